package metricstest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestValueMatchesLabels: Value finds the series that carries the labels
// asked for, whatever others it has, and says when there is none.
func TestValueMatchesLabels(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "calls_total", Help: "calls"}, []string{"region", "tier"})
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "in_flight", Help: "in flight"})
	reg.MustRegister(c, g)
	c.WithLabelValues("europe-west1", "provisioned").Add(3)
	c.WithLabelValues("us-central1", "shared").Add(5)
	g.Set(7)

	if v, ok := Value(t, reg, "calls_total", map[string]string{"region": "us-central1"}); !ok || v != 5 {
		t.Errorf("us-central1: %v, %v; want 5, true", v, ok)
	}
	if v, ok := Value(t, reg, "in_flight", nil); !ok || v != 7 {
		t.Errorf("gauge: %v, %v; want 7, true", v, ok)
	}
	if _, ok := Value(t, reg, "calls_total", map[string]string{"region": "asia-east1"}); ok {
		t.Error("found a series for a region that has none")
	}
	if n := len(Samples(t, reg, "calls_total")); n != 2 {
		t.Errorf("%d series of calls_total, want 2", n)
	}
}
