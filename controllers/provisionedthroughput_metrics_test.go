package controllers

import (
	"context"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/regionwarden/regionwarden/internal/metricstest"
	"github.com/regionwarden/regionwarden/internal/waittest"
)

// TestPTMetricsDeletedWithObject checks that a deleted PT's series leave the
// metrics endpoint, and that another object's stay.
func TestPTMetricsDeletedWithObject(t *testing.T) {
	e := newPTEnv(t, ptEnvOptions{})
	e.gcpShows(4, 3000, nil)
	e.create("gone", 4)
	e.create("kept", 4)
	e.waitReconciled("gone")
	e.waitReconciled("kept")
	for _, name := range []string{"gone", "kept"} {
		if _, ok := metricValue(t, "regionwarden_provisionedthroughput_observed_gsus", map[string]string{"namespace": e.ns, "name": name}); !ok {
			t.Fatalf("no observed_gsus series for %s", name)
		}
	}

	if err := e.cl.Delete(context.Background(), e.get("gone")); err != nil {
		t.Fatal(err)
	}
	waittest.Until(t, time.Minute, "the deleted object's series to go", func() bool {
		_, served := metricValue(t, "regionwarden_provisionedthroughput_observed_gsus", map[string]string{"namespace": e.ns, "name": "gone"})
		return served
	}, func(served bool) bool { return !served })
	for _, m := range []string{"observed_gsus", "utilization", "spillover_ratio"} {
		if _, ok := metricValue(t, "regionwarden_provisionedthroughput_"+m, map[string]string{"namespace": e.ns, "name": "gone"}); ok {
			t.Errorf("%s of the deleted object is still served", m)
		}
		if _, ok := metricValue(t, "regionwarden_provisionedthroughput_"+m, map[string]string{"namespace": e.ns, "name": "kept"}); !ok {
			t.Errorf("%s of the kept object is gone", m)
		}
	}
}

// TestPTConditionSeriesFollowStatus checks that the condition series say what
// the status says: one series per condition type, replaced when its status or
// reason changes, and gone with the object.
func TestPTConditionSeriesFollowStatus(t *testing.T) {
	e := newPTEnv(t, ptEnvOptions{})
	e.gcpShows(4, 3000, nil)
	e.create("pt", 4, withInterval(time.Minute))
	e.waitReconciled("pt")
	e.reconcile("pt")
	if got := conditionSeries(t, e.ns, "pt", "Verified"); len(got) != 1 || got["True/Observed"] != 1 {
		t.Fatalf("Verified series = %v, want only True/Observed = 1", got)
	}

	e.gcpShows(2, 1500, nil)
	e.clk.Step(2 * time.Minute)
	e.reconcile("pt")
	expectCond(t, e.get("pt"), "Verified", "False", "Mismatch")
	if got := conditionSeries(t, e.ns, "pt", "Verified"); len(got) != 1 || got["False/Mismatch"] != 1 {
		t.Fatalf("after a mismatch, Verified series = %v, want only False/Mismatch = 1", got)
	}
	if got := conditionSeries(t, e.ns, "pt", "Ready"); len(got) != 1 || got["True/Active"] != 1 {
		t.Fatalf("Ready series = %v, want only True/Active = 1", got)
	}

	if err := e.cl.Delete(context.Background(), e.get("pt")); err != nil {
		t.Fatal(err)
	}
	waittest.Until(t, time.Minute, "the deleted object's condition series to go",
		func() map[string]float64 { return conditionSeries(t, e.ns, "pt", "") },
		func(series map[string]float64) bool { return len(series) == 0 })
}

// conditionSeries returns the object's condition series of type typ (every
// type when empty), as status/reason (type/status/reason) to value.
func conditionSeries(t *testing.T, namespace, name, typ string) map[string]float64 {
	t.Helper()
	got := map[string]float64{}
	for _, s := range metricstest.Samples(t, metrics.Registry, "regionwarden_provisionedthroughput_condition") {
		l := s.Labels
		if l["namespace"] != namespace || l["name"] != name || (typ != "" && l["type"] != typ) {
			continue
		}
		key := l["status"] + "/" + l["reason"]
		if typ == "" {
			key = l["type"] + "/" + key
		}
		got[key] = s.Value
	}
	return got
}
