package controllers

import (
	"testing"
	"time"
)

// BenchmarkPTReconcile measures one reconcile of a PT against the real API
// server and the fake Monitoring: "unchanged" is a verification served by the
// shared answer that changes nothing (one GET, no write); "new answer" moves
// the clock one interval each time, so every reconcile fetches the project
// (three ListTimeSeries) and patches lastVerifiedTime.
func BenchmarkPTReconcile(b *testing.B) {
	const interval = time.Minute
	for _, tc := range []struct {
		name    string
		advance time.Duration
	}{
		{"unchanged", 0},
		{"new answer", interval},
	} {
		b.Run(tc.name, func(b *testing.B) {
			e := newPTEnv(b, ptEnvOptions{})
			e.gcpShows(4, 3000, nil)
			e.create("pt", 4, withInterval(interval))
			e.waitReconciled("pt")
			b.ReportAllocs()
			for b.Loop() {
				e.clk.Step(tc.advance)
				e.reconcile("pt")
			}
			b.ReportMetric(float64(e.fake.TotalCalls())/float64(b.N), "calls/op")
		})
	}
}
