//go:build linux

package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/regionwarden/regionwarden/internal/loadtest"
	"github.com/regionwarden/regionwarden/router/table"
	"github.com/regionwarden/regionwarden/router/upstream/upstreamtest"
)

// routerProcess is a router this test binary runs in a process of its own.
type routerProcess struct {
	cmd *exec.Cmd
	api string // host:port of its REST surface
}

// startRouterProcess starts the router with args in a process of its own
// and waits until it listens; it is stopped (SIGTERM) when b ends.
func startRouterProcess(b *testing.B, args ...string) *routerProcess {
	b.Helper()
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), routerProcessEnv+"="+strings.Join(args, "\n"))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		b.Fatalf("the router process: %v", err)
	}
	return &routerProcess{cmd: cmd, api: strings.TrimSpace(line)}
}

// BenchmarkRouterProcess measures the router binary as it runs in a pod, in
// a process of its own, at 500 and 5,000 calls per second per path: the same
// generateContent calls, from one client, sent straight to a fake region's
// REST surface and through the router (REST in, REST to the same region),
// interleaved in one open-loop run. It reports p50 and p99 of each path and
// their differences in microseconds, the failures, and the CPU time the
// router's process spent per call (user and system, from /proc, in ticks of
// 10 ms: -benchtime=10000x measures it to a few percent): all of its work,
// its runtime's included (the scheduler, the garbage collector, the timers),
// which the benchmark of the router in the load's own process
// (router/server's BenchmarkAddedLatency) shares with the client and the
// region. b.N is the number of calls per path: -benchtime=10000x runs 20 s
// at 500/s.
func BenchmarkRouterProcess(b *testing.B) {
	for _, rate := range []int{500, 5000} {
		b.Run(fmt.Sprintf("rate=%d", rate), func(b *testing.B) {
			region := upstreamtest.Start(b, "europe-west1", table.TierProvisioned)
			region.Set(func(b *upstreamtest.Behavior) { b.Quick = true })
			pol := table.DefaultPolicy()
			// Room for the calls in flight when the machine stalls: the
			// benchmark measures the data path, not shedding.
			pol.Concurrency = table.Concurrency{MaxInFlight: 4096, RegionInitialLimit: 1024, RegionMaxLimit: 2048}
			const project, model = "demo-project", "gemini-2.5-flash-lite"
			data, err := table.Render(&table.Table{Pools: []table.Pool{{
				Project: project, Publisher: "google", Model: model, Regions: []table.Region{region.TableRegion(0)}, Policy: pol,
			}}})
			if err != nil {
				b.Fatal(err)
			}
			file := filepath.Join(b.TempDir(), table.DataKey)
			if err := os.WriteFile(file, data, 0o600); err != nil {
				b.Fatal(err)
			}
			router := startRouterProcess(b, "--table-file", file, "--listen", "127.0.0.1:0", "--ops-listen", "127.0.0.1:0",
				"--caller-auth", "none", "--upstream-insecure", "--allow-endpoint-host", "127.0.0.1", "--log-level", "error", "--shutdown-delay", "0s")
			path := "/v1/projects/" + project + "/locations/europe-west1/publishers/google/models/" + model + ":generateContent"
			urls := []string{"http://" + region.Addr + path, "http://" + router.api + path}
			load := loadtest.New(loadtest.GenerateBody)
			// Warm the connections, the policy and the router's heap.
			if _, failed := load.OpenLoop(urls, rate, min(b.N, 2000)); failed > 0 {
				b.Fatalf("%d warm-up calls failed", failed)
			}
			pid := router.cmd.Process.Pid
			loadBefore, machineBefore := loadtest.LoadAverage(), loadtest.MachineCPU()
			cpuBefore := loadtest.ProcessCPU(pid)
			b.ResetTimer()
			lat, failed := load.OpenLoop(urls, rate, b.N)
			b.StopTimer()
			cpu := loadtest.ProcessCPU(pid) - cpuBefore
			busy, ours := loadtest.MachineShare(machineBefore, loadtest.MachineCPU(), cpu)
			if b.N < 100 {
				return // the framework's first, one-call run
			}
			d50, d99 := loadtest.Quantile(lat[0], 0.50), loadtest.Quantile(lat[0], 0.99)
			r50, r99 := loadtest.Quantile(lat[1], 0.50), loadtest.Quantile(lat[1], 0.99)
			perCall := float64(cpu.Nanoseconds()) / 1e3 / float64(b.N)
			b.ReportMetric(r50-d50, "added-p50-µs")
			b.ReportMetric(r99-d99, "added-p99-µs")
			b.ReportMetric(perCall, "router-cpu-µs/call")
			b.ReportMetric(float64(failed), "failed")
			b.ReportMetric(0, "ns/op")
			b.Logf("%d calls per path at %d/s per path, open loop, interleaved; load average %s before, %s after", b.N, rate, loadBefore, loadtest.LoadAverage())
			b.Logf("  the machine's CPUs were %.0f%% busy during the run, %.0f%% of them with the router's process", busy, ours)
			b.Logf("  straight p50 %.0f µs  p99 %.0f µs", d50, d99)
			b.Logf("  router   p50 %.0f µs  p99 %.0f µs", r50, r99)
			b.Logf("  added    p50 %.0f µs  p99 %.0f µs;  %d failed", r50-d50, r99-d99, failed)
			b.Logf("  the router's process: %.1f µs of CPU a call (%v for %d calls), %.2f of a core", perCall, cpu, b.N, float64(cpu)/float64(time.Duration(b.N)*time.Second/time.Duration(rate)))
		})
	}
}
