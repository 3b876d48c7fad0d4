package server_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/aiplatform/apiv1/aiplatformpb"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/regionwarden/regionwarden/router/server"
	"github.com/regionwarden/regionwarden/router/table"
	"github.com/regionwarden/regionwarden/router/upstream"
)

// serveREST gives the fake region a Vertex REST front for generateContent,
// doing what the router's front does with a body (parse it, answer, encode
// the answer), so that a client can call the region straight.
func (f *fakeRegion) serveREST(tb testing.TB) string {
	tb.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		var in aiplatformpb.GenerateContentRequest
		if err == nil {
			err = protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(body, &in)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.calls.Add(1)
		b, _ := protojson.Marshal(f.answer(fmt.Sprintf("%s answers: %s", f.name, promptText(&in)), true))
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		_, _ = w.Write(b)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(lis) }()
	tb.Cleanup(func() { _ = hs.Close() })
	return "http://" + lis.Addr().String()
}

// rig is a fake region reachable straight (REST) and through the router
// (REST in, gRPC to the region), and one HTTP client for both paths.
type rig struct {
	direct, routed string
	call           func(url string) (time.Duration, error)
}

func newRig(b *testing.B) *rig {
	b.Helper()
	pt := startRegion(b, "europe-west1", table.TierProvisioned)
	direct := pt.serveREST(b) + "/v1/projects/" + project + "/locations/europe-west1/publishers/google/models/" + model + ":generateContent"

	clients := upstream.New(upstream.Options{Insecure: true})
	b.Cleanup(func() { _ = clients.Close() })
	srv, err := server.New(server.Options{Upstream: clients, Logger: quietLogger(), Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	if err := srv.Apply(&table.Table{Version: table.Version, Pools: []table.Pool{poolOf(table.DefaultPolicy(), region(pt, 0))}}); err != nil {
		b.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(lis) }()
	b.Cleanup(func() { _ = hs.Close() })
	routed := "http://" + lis.Addr().String() + "/v1/projects/" + project + "/locations/europe-west1/publishers/google/models/" + model + ":generateContent"

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	body := []byte(`{"contents":[{"role":"user","parts":[{"text":"Which regions hold provisioned capacity for this model?"}]}],"generationConfig":{"temperature":0.2,"maxOutputTokens":256}}`)
	call := func(url string) (time.Duration, error) {
		start := time.Now()
		resp, err := client.Post(url, "application/json", bytes.NewReader(body))
		if err != nil {
			return 0, err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		return time.Since(start), err
	}
	return &rig{direct: direct, routed: routed, call: call}
}

// BenchmarkAddedLatency measures what the router adds to a call: the same
// generateContent requests, from the same HTTP client, sent straight to a
// fake region's REST front and through the router (REST in, gRPC to the same
// fake region), interleaved in one run at a fixed rate of 500 requests/s per
// path. It reports p50 and p99 of each path and their differences, in
// microseconds. b.N is the number of requests per path; run it with
// -benchtime=5000x for ten seconds of traffic.
func BenchmarkAddedLatency(b *testing.B) {
	const rate = 500 // requests per second per path
	rg := newRig(b)
	direct, routed, call := rg.direct, rg.routed, rg.call
	// Warm both paths: connections, the region's gRPC client, the policy.
	for range 200 {
		if _, err := call(direct); err != nil {
			b.Fatal(err)
		}
		if _, err := call(routed); err != nil {
			b.Fatal(err)
		}
	}

	var (
		mu       sync.Mutex
		lat      [2][]time.Duration // 0: direct, 1: routed
		failures int
		wg       sync.WaitGroup
	)
	urls := [2]string{direct, routed}
	b.ResetTimer()
	tick := time.NewTicker(time.Second / (2 * rate))
	for i := range 2 * b.N {
		<-tick.C
		path := i % 2
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := call(urls[path])
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failures++
				return
			}
			lat[path] = append(lat[path], d)
		}()
	}
	wg.Wait()
	tick.Stop()
	b.StopTimer()
	if failures > 0 {
		b.Fatalf("%d requests failed", failures)
	}
	q := func(path int, p float64) float64 {
		l := lat[path]
		sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
		return float64(l[min(int(p*float64(len(l))), len(l)-1)].Microseconds())
	}
	d50, d99, r50, r99 := q(0, 0.50), q(0, 0.99), q(1, 0.50), q(1, 0.99)
	b.ReportMetric(d50, "direct-p50-µs")
	b.ReportMetric(d99, "direct-p99-µs")
	b.ReportMetric(r50, "router-p50-µs")
	b.ReportMetric(r99, "router-p99-µs")
	b.ReportMetric(r50-d50, "added-p50-µs")
	b.ReportMetric(r99-d99, "added-p99-µs")
	b.ReportMetric(0, "ns/op")
	b.Logf("%d requests per path at %d/s per path, interleaved: direct p50 %.0fµs p99 %.0fµs; router p50 %.0fµs p99 %.0fµs; added p50 %.0fµs p99 %.0fµs",
		len(lat[0]), rate, d50, d99, r50, r99, r50-d50, r99-d99)
}

// BenchmarkCPUPerRequest measures the process's CPU time (client, router and
// fake region together, getrusage) per request, one request at a time, for
// each path: the difference is what the router costs in CPU, a measure that
// other load on the machine disturbs less than wall time.
func BenchmarkCPUPerRequest(b *testing.B) {
	rg := newRig(b)
	for _, path := range []struct{ name, url string }{{"direct", rg.direct}, {"router", rg.routed}} {
		b.Run(path.name, func(b *testing.B) {
			for range 200 {
				if _, err := rg.call(path.url); err != nil {
					b.Fatal(err)
				}
			}
			before := processCPU()
			b.ResetTimer()
			for range b.N {
				if _, err := rg.call(path.url); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64((processCPU()-before).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}
