package controllers

import (
	"context"
	"testing"
	"time"
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
	deadline := time.Now().Add(time.Minute)
	for {
		_, ok := metricValue(t, "regionwarden_provisionedthroughput_observed_gsus", map[string]string{"namespace": e.ns, "name": "gone"})
		if !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the deleted object's series is still served")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, m := range []string{"observed_gsus", "utilization", "spillover_ratio"} {
		if _, ok := metricValue(t, "regionwarden_provisionedthroughput_"+m, map[string]string{"namespace": e.ns, "name": "gone"}); ok {
			t.Errorf("%s of the deleted object is still served", m)
		}
		if _, ok := metricValue(t, "regionwarden_provisionedthroughput_"+m, map[string]string{"namespace": e.ns, "name": "kept"}); !ok {
			t.Errorf("%s of the kept object is gone", m)
		}
	}
}
