package server_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/regionwarden/regionwarden/internal/loadtest"
	"github.com/regionwarden/regionwarden/internal/tracing/tracingtest"
	"github.com/regionwarden/regionwarden/router/server"
	"github.com/regionwarden/regionwarden/router/table"
	"github.com/regionwarden/regionwarden/router/upstream"
	"github.com/regionwarden/regionwarden/router/upstream/upstreamtest"
)

// rig is a fake region reachable straight and through the router, both over
// Vertex REST, and one HTTP client for both paths.
type rig struct {
	direct, routed string
	// traced is a second router in front of the same region, tracing every
	// call (sampler always on) to an OTLP/HTTP collector in the process.
	traced string
	// collector counts the spans traced exports; tp flushes them.
	collector *tracingtest.Receiver
	tp        *sdktrace.TracerProvider
	load      *loadtest.Load // one client for every path
}

func newRig(b *testing.B) *rig {
	b.Helper()
	pt := startRegion(b, "europe-west1", table.TierProvisioned)
	pt.set(func(b *upstreamtest.Behavior) { b.Quick = true })
	path := "/v1/projects/" + project + "/locations/europe-west1/publishers/google/models/" + model + ":generateContent"
	rcv, collector := tracingtest.StartHTTP(b)
	rcv.Discard() // it counts: the benchmark sends many spans
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(collector+"/v1/traces"))
	if err != nil {
		b.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return &rig{
		direct:    "http://" + pt.Addr + path,
		routed:    serveRouter(b, pt, nil) + path,
		traced:    serveRouter(b, pt, tp) + path,
		collector: rcv,
		tp:        tp,
		load:      loadtest.New(loadtest.GenerateBody),
	}
}

// serveRouter serves a router in front of pt and returns its base URL; tp,
// when not nil, traces its calls, with the W3C propagator.
func serveRouter(b *testing.B, pt *fakeRegion, tp trace.TracerProvider) string {
	b.Helper()
	// Without a provider, tracing is off as in the router binary without
	// OTEL_* settings.
	uo, so := upstream.Options{Insecure: true}, server.Options{Logger: quietLogger(), Seed: 1, TracerProvider: noop.NewTracerProvider()}
	if tp != nil {
		uo.Propagator, so.Propagator, so.TracerProvider = propagation.TraceContext{}, propagation.TraceContext{}, tp
	}
	clients := upstream.New(uo)
	b.Cleanup(func() { _ = clients.Close() })
	so.Upstream = clients
	srv, err := server.New(so)
	if err != nil {
		b.Fatal(err)
	}
	// Room for the calls in flight when the machine stalls: the benchmark
	// measures the data path, not shedding.
	pol := table.DefaultPolicy()
	pol.Concurrency = table.Concurrency{MaxInFlight: 4096, RegionInitialLimit: 1024, RegionMaxLimit: 2048}
	if err := srv.Apply(&table.Table{Version: table.Version, Pools: []table.Pool{poolOf(pol, region(pt, 0))}}); err != nil {
		b.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	// The router's goroutines (its connections, handlers and its own
	// connections to the region, which they start) carry the profile label
	// side=router, so that a CPU profile of the benchmark tells the router's
	// share from the client's and the region's: -tagfocus side=router.
	go pprof.Do(context.Background(), pprof.Labels("side", "router"), func(context.Context) { _ = hs.Serve(lis) })
	b.Cleanup(func() { _ = hs.Close() })
	return "http://" + lis.Addr().String()
}

// measurement is one phase of BenchmarkAddedLatency: the latencies of b.N
// calls per path, sent interleaved, the machine's load around them, and the
// CPU per call of the paths measured one at a time after them.
type measurement struct {
	lat        [][]time.Duration
	failed     int
	loadBefore string
	busy, ours float64
	cpu        []float64   // µs a call, each of cpuURLs, over all its rounds
	rounds     [][]float64 // µs a call, each of cpuURLs, round by round
	cpuFailed  []int
}

// cpuRounds is how many turns the paths take in the CPU phase. Alternating
// them spreads what else the process and the machine do during the phase (a
// collection cycle, a neighbor's burst) over every path, where one phase a
// path would charge it all to whichever path ran then.
const cpuRounds = 5

// measure warms the paths (connections, the policy, the collector), then
// sends b.N calls to each of urls at rate per path, interleaved, then
// measures the CPU per call of each of cpuURLs, b.N calls each, alone and in
// turns (cpuRounds), all under b's timer.
func (rg *rig) measure(b *testing.B, rate int, urls []string, cpuURLs ...string) measurement {
	b.Helper()
	if _, failed := rg.load.OpenLoop(urls, rate, min(b.N, 2000)); failed > 0 {
		b.Fatalf("%d warm-up calls failed", failed)
	}
	var m measurement
	var machineBefore [2]time.Duration
	var cpuBefore time.Duration
	m.loadBefore, machineBefore, cpuBefore = loadtest.LoadAverage(), loadtest.MachineCPU(), loadtest.SelfCPU()
	b.ResetTimer()
	m.lat, m.failed = rg.load.OpenLoop(urls, rate, b.N)
	m.busy, m.ours = loadtest.MachineShare(machineBefore, loadtest.MachineCPU(), loadtest.SelfCPU()-cpuBefore)
	m.cpu, m.cpuFailed = make([]float64, len(cpuURLs)), make([]int, len(cpuURLs))
	m.rounds = make([][]float64, len(cpuURLs))
	for r := range cpuRounds {
		n := b.N / cpuRounds
		if r == cpuRounds-1 {
			n = b.N - n*(cpuRounds-1)
		}
		for i, u := range cpuURLs {
			cpu, failed := rg.cpuPerCall(u, rate, n)
			m.rounds[i] = append(m.rounds[i], cpu)
			m.cpu[i] += cpu * float64(n) / float64(b.N)
			m.cpuFailed[i] += failed
		}
	}
	b.StopTimer()
	return m
}

// roundDiffs is, round by round, the CPU a call of cpuURLs[1] less that of
// cpuURLs[0], as the log prints it.
func (m measurement) roundDiffs() string {
	var b strings.Builder
	for r := range m.rounds[0] {
		fmt.Fprintf(&b, " %.1f", m.rounds[1][r]-m.rounds[0][r])
	}
	return b.String()
}

// log says how the phase was run and how busy the machine was.
func (m measurement) log(b *testing.B, rate int) {
	b.Helper()
	b.Logf("%d calls per path at %d/s per path, open loop, interleaved; load average %s before, %s after", b.N, rate, m.loadBefore, loadtest.LoadAverage())
	b.Logf("  the machine's CPUs were %.0f%% busy during the run, %.0f%% of them with this process", m.busy, m.ours)
}

// cpuPerCall is the process's CPU time per call, in microseconds, while n
// calls go to url at rate per second, and how many failed.
func (rg *rig) cpuPerCall(url string, rate, n int) (float64, int) {
	before := loadtest.SelfCPU()
	_, failed := rg.load.OpenLoop([]string{url}, rate, n)
	return float64((loadtest.SelfCPU() - before).Nanoseconds()) / 1e3 / float64(n), failed
}

// BenchmarkAddedLatency measures what the router adds to a call, at 500 and
// 5,000 calls per second per path: the same generateContent requests, from
// the same HTTP client, sent straight to a fake region's REST surface and
// through the router (REST in, REST to the same fake region), interleaved in
// one open-loop run. It reports p50 and p99 of each path and their
// differences in microseconds, and the failures. Then, to split CPU time
// (client, router and region share the process), it sends each path alone
// at the same rate, the paths taking turns in cpuRounds rounds, and reports
// the CPU time per call of each; the difference is what the router spends
// on a call. b.N is the number of calls
// per path and phase: -benchtime=10000x runs 20 s at 500/s.
func BenchmarkAddedLatency(b *testing.B) {
	for _, rate := range []int{500, 5000} {
		b.Run(fmt.Sprintf("rate=%d", rate), func(b *testing.B) {
			rg := newRig(b)
			m := rg.measure(b, rate, []string{rg.direct, rg.routed}, rg.direct, rg.routed)
			if b.N < 100 {
				return // the framework's first, one-call run
			}
			lat, failed, f1, f2, cpuDirect, cpuRouted := m.lat, m.failed, m.cpuFailed[0], m.cpuFailed[1], m.cpu[0], m.cpu[1]
			d50, d99 := loadtest.Quantile(lat[0], 0.50), loadtest.Quantile(lat[0], 0.99)
			r50, r99 := loadtest.Quantile(lat[1], 0.50), loadtest.Quantile(lat[1], 0.99)
			b.ReportMetric(d50, "direct-p50-µs")
			b.ReportMetric(d99, "direct-p99-µs")
			b.ReportMetric(r50, "router-p50-µs")
			b.ReportMetric(r99, "router-p99-µs")
			b.ReportMetric(r50-d50, "added-p50-µs")
			b.ReportMetric(r99-d99, "added-p99-µs")
			b.ReportMetric(cpuRouted-cpuDirect, "router-cpu-µs/call")
			b.ReportMetric(float64(failed+f1+f2), "failed")
			b.ReportMetric(0, "ns/op")
			m.log(b, rate)
			b.Logf("  straight p50 %.0f µs  p90 %.0f µs  p99 %.0f µs  p99.9 %.0f µs", d50, loadtest.Quantile(lat[0], 0.90), d99, loadtest.Quantile(lat[0], 0.999))
			b.Logf("  router   p50 %.0f µs  p90 %.0f µs  p99 %.0f µs  p99.9 %.0f µs", r50, loadtest.Quantile(lat[1], 0.90), r99, loadtest.Quantile(lat[1], 0.999))
			b.Logf("  added    p50 %.0f µs  p99 %.0f µs;  %d failed", r50-d50, r99-d99, failed+f1+f2)
			b.Logf("  CPU per call (client, region and router in one process, the paths alternated in %d rounds): straight %.1f µs, through the router %.1f µs: the router %.1f µs (round by round:%s)",
				cpuRounds, cpuDirect, cpuRouted, cpuRouted-cpuDirect, m.roundDiffs())
		})
	}
	// Tracing on (sampler always on, the collector reachable) against off:
	// the same calls straight, through a router without tracing and through
	// one that traces each call (a server span and an attempt span, exported
	// in batches over OTLP/HTTP), interleaved, at 100 and 500 calls/s per
	// path.
	for _, rate := range []int{100, 500} {
		b.Run(fmt.Sprintf("rate=%d/tracing", rate), func(b *testing.B) {
			rg := newRig(b)
			m := rg.measure(b, rate, []string{rg.direct, rg.routed, rg.traced}, rg.routed, rg.traced)
			if b.N < 100 {
				return
			}
			lat, failed, f1, f2, cpuRouted, cpuTraced := m.lat, m.failed, m.cpuFailed[0], m.cpuFailed[1], m.cpu[0], m.cpu[1]
			if err := rg.tp.ForceFlush(context.Background()); err != nil || rg.collector.Count() < b.N {
				b.Fatalf("the collector received %d spans for %d traced calls (%v)", rg.collector.Count(), b.N, err)
			}
			d50, r50, t50 := loadtest.Quantile(lat[0], 0.50), loadtest.Quantile(lat[1], 0.50), loadtest.Quantile(lat[2], 0.50)
			d99, r99, t99 := loadtest.Quantile(lat[0], 0.99), loadtest.Quantile(lat[1], 0.99), loadtest.Quantile(lat[2], 0.99)
			b.ReportMetric(r50-d50, "added-p50-µs")
			b.ReportMetric(t50-d50, "added-traced-p50-µs")
			b.ReportMetric(t50-r50, "tracing-p50-µs")
			b.ReportMetric(t99-r99, "tracing-p99-µs")
			b.ReportMetric(cpuTraced-cpuRouted, "tracing-cpu-µs/call")
			b.ReportMetric(float64(rg.collector.Count()), "spans-exported")
			b.ReportMetric(float64(failed+f1+f2), "failed")
			b.ReportMetric(0, "ns/op")
			m.log(b, rate)
			b.Logf("  straight             p50 %.0f µs  p99 %.0f µs", d50, d99)
			b.Logf("  router, tracing off  p50 %.0f µs  p99 %.0f µs", r50, r99)
			b.Logf("  router, tracing on   p50 %.0f µs  p99 %.0f µs", t50, t99)
			b.Logf("  tracing adds         p50 %.0f µs  p99 %.0f µs;  CPU %.1f µs per call;  %d failed", t50-r50, t99-r99, cpuTraced-cpuRouted, failed+f1+f2)
		})
	}
}

// BenchmarkThroughRouter sends calls through the router as fast as they
// answer, a few at a time, for profiles: run with -cpuprofile and read the
// router's share with go tool pprof -tagfocus side=router; allocs/op counts
// the client's, the router's and the region's allocations together (see
// BenchmarkStraight for the client's and the region's alone).
func BenchmarkThroughRouter(b *testing.B) {
	benchmarkCalls(b, func(rg *rig) string { return rg.routed })
}

// BenchmarkStraight is BenchmarkThroughRouter without the router.
func BenchmarkStraight(b *testing.B) { benchmarkCalls(b, func(rg *rig) string { return rg.direct }) }

func benchmarkCalls(b *testing.B, url func(*rig) string) {
	rg := newRig(b)
	u := url(rg)
	for range 200 {
		if err := rg.load.Call(u); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.SetParallelism(2)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := rg.load.Call(u); err != nil {
				b.Error(err)
			}
		}
	})
}
