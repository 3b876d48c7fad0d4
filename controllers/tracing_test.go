package controllers

import (
	"slices"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/regionwarden/regionwarden/internal/waittest"
)

var (
	spansOnce sync.Once
	spans     *tracetest.SpanRecorder
)

// recordSpans installs, once for the package's tests, a tracer provider that
// keeps every span in memory. Clients and reconcilers created afterwards
// trace to it.
func recordSpans() *tracetest.SpanRecorder {
	spansOnce.Do(func() {
		spans = tracetest.NewSpanRecorder()
		otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)))
	})
	return spans
}

// TestReconcileTraced checks that a PT's reconcile is a span that says what
// it concluded, and that the Cloud Monitoring call it made, and that call's
// gRPC requests, are spans under it.
func TestReconcileTraced(t *testing.T) {
	rec := recordSpans()
	e := newPTEnv(t, ptEnvOptions{})
	e.gcpShows(4, 3000, nil)
	e.create("traced", 4)
	e.waitReconciled("traced")
	// The reconcile's span ends after its status write, which the test may
	// see first.
	waittest.Until(t, poolWait, "the reconcile's span ended", rec.Ended, func(ended []sdktrace.ReadOnlySpan) bool {
		return slices.ContainsFunc(ended, func(s sdktrace.ReadOnlySpan) bool {
			return s.Name() == "reconcile ProvisionedThroughput" && attr(s, "k8s.namespace.name") == e.ns
		})
	})

	byID := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		byID[s.SpanContext().SpanID().String()] = s
	}
	var monitoring sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() != "cloudmonitoring ProvisionedThroughput" {
			continue
		}
		parent := byID[s.Parent().SpanID().String()]
		if parent != nil && parent.Name() == "reconcile ProvisionedThroughput" && attr(parent, "k8s.namespace.name") == e.ns {
			monitoring = s
			if got := attr(parent, "regionwarden.name"); got != "traced" {
				t.Errorf("reconcile span regionwarden.name = %q", got)
			}
			if got := attr(parent, "regionwarden.condition.Verified"); got != "True/Observed" {
				t.Errorf("reconcile span regionwarden.condition.Verified = %q, want True/Observed", got)
			}
		}
	}
	if monitoring == nil {
		t.Fatalf("no Cloud Monitoring span under a reconcile of namespace %s among %d spans", e.ns, len(rec.Ended()))
	}
	if got := attr(monitoring, "cloud.account.id"); got != testProject {
		t.Errorf("Cloud Monitoring span cloud.account.id = %q, want %q", got, testProject)
	}
	calls := 0
	for _, s := range rec.Ended() {
		if s.Parent().SpanID() == monitoring.SpanContext().SpanID() && s.Name() == "google.monitoring.v3.MetricService/ListTimeSeries" {
			calls++
		}
	}
	if calls == 0 {
		t.Errorf("no ListTimeSeries gRPC span under the Cloud Monitoring span")
	}
}

func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}
