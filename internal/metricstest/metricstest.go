// Package metricstest reads the series of a Prometheus registry in tests, as
// a scrape would see them: by metric name and labels.
package metricstest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Sample is one series of a counter or a gauge: its labels and its value.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// Samples gathers g and returns the series of the metric name, in the
// registry's order; none when the metric has no series.
func Samples(t testing.TB, g prometheus.Gatherer, name string) []Sample {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []Sample
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			s := Sample{Labels: map[string]string{}}
			for _, l := range m.GetLabel() {
				s.Labels[l.GetName()] = l.GetValue()
			}
			switch {
			case m.GetCounter() != nil:
				s.Value = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				s.Value = m.GetGauge().GetValue()
			}
			out = append(out, s)
		}
	}
	return out
}

// Value is the value of the first series of the metric name that carries
// every label of labels (and maybe others); ok is false when there is none.
func Value(t testing.TB, g prometheus.Gatherer, name string, labels map[string]string) (v float64, ok bool) {
	t.Helper()
next:
	for _, s := range Samples(t, g, name) {
		for k, want := range labels {
			if s.Labels[k] != want {
				continue next
			}
		}
		return s.Value, true
	}
	return 0, false
}
