package emulator_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

// benchScenario has one region with ample capacity and a 5% fault window
// covering the whole run, so a call goes through every step.
const benchScenario = scenarioHead + `
regions:
- name: europe-west1
  tier: provisioned
  provisioned: {gsus: 100, tokensPerSecond: 1e12}
  capacity: {requestsPerSecond: 1e9}
  latency: {p50: 100ms, p99: 1s}
  faults:
  - {from: 0s, to: 10m, errorRate: 0.05, code: 504, burstLength: 6}
`

// BenchmarkGenerateContentGRPC measures what one call costs the emulator
// through the real aiplatform client; the hand-driven clock makes latency
// free, so the number is the emulator's own overhead.
func BenchmarkGenerateContentGRPC(b *testing.B) {
	sc := mustParse(b, benchScenario)
	e, _ := start(b, sc, 0)
	c := client(b, e, "europe-west1")
	req := request(sc, "europe-west1", "How many regions hold capacity?")
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, _ = c.GenerateContent(context.Background(), req)
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
}

// BenchmarkGenerateContentREST is the same through the REST surface.
func BenchmarkGenerateContentREST(b *testing.B) {
	sc := mustParse(b, benchScenario)
	e, _ := start(b, sc, 0)
	url := "http://" + e.Regions()[0].REST + "/v1/" + sc.ModelName("europe-west1") + ":generateContent"
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := hc.Post(url, "application/json", strings.NewReader(restBody))
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
}
