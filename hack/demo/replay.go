package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/regionwarden/regionwarden/internal/emulator"
	"github.com/regionwarden/regionwarden/internal/replay"
)

// followClock is the clock of the demo's emulated regions. Until the replay
// starts it is a stopped clock at the scenario's scale (scenario time zero);
// then it follows the replay's clock, so the incident's faults unfold in step
// with the load.
type followClock struct {
	target atomic.Pointer[emulator.ScaledClock]
}

func newFollowClock(scale float64) *followClock {
	f := &followClock{}
	f.target.Store(emulator.NewScaledClock(scale))
	return f
}

func (f *followClock) follow(c *emulator.ScaledClock) { f.target.Store(c) }

// Elapsed is scenario time since the replay started.
func (f *followClock) Elapsed() time.Duration { return f.target.Load().Elapsed() }

// Sleep waits d of scenario time.
func (f *followClock) Sleep(ctx context.Context, d time.Duration) error {
	return f.target.Load().Sleep(ctx, d)
}

const liveName = "regionwarden (router)"

// replayIncident drives the scenario's load through the running router and,
// on emulated regions of its own, through the count blocklist, then prints the
// side-by-side table and writes the chart.
func replayIncident(ctx context.Context, sc *emulator.Scenario, routerURL string, emu *emulator.Emulator, clock *followClock, prom *demoPrometheus, work string, o options) error {
	policies := []replay.Policy{
		replay.Blocklist(),
		replay.LiveRouter(liveName, routerURL, func(env *replay.Env) { clock.follow(env.Clock) }),
	}
	fmt.Printf("    %s of scenario time at %gx: about %s; Ctrl-C stops everything\n",
		sc.Duration.Duration, sc.TimeScale, time.Duration(float64(sc.Duration.Duration)/sc.TimeScale).Round(time.Second))
	rep, err := replay.Run(ctx, sc, policies, replay.Options{
		Seed: o.seed,
		Progress: func(ev replay.Event) {
			if ev.Result != nil {
				return
			}
			line := fmt.Sprintf("    %6s / %s", ev.Elapsed.Truncate(time.Second), ev.Duration)
			for _, l := range ev.Live {
				line += fmt.Sprintf("  |  %s: %5.1f%% of %d ok", l.Policy, 100*l.SuccessRate(), l.Requests)
			}
			fmt.Printf("\r%-150s", line)
		},
	})
	fmt.Println()
	if err != nil {
		return err
	}
	// The live router's calls reached the demo's own emulated regions: take
	// what each region received from them.
	if live := rep.Results[1]; live.Skipped == "" {
		live.Attempts = 0
		live.Regions = live.Regions[:0]
		for _, r := range emu.Stats().Regions {
			live.Attempts += r.Requests
			live.Regions = append(live.Regions, replay.NewRegionLoad(r))
		}
	}

	step("results")
	fmt.Printf("    %-24s %9s %9s %9s %9s %13s %11s %6s\n", "POLICY", "SUCCESS", "P50", "P99", "PT SHARE", "ATTEMPTS/REQ", "NO REGIONS", "SHED")
	for _, r := range rep.Results {
		if r.Skipped != "" {
			fmt.Printf("    %-24s skipped: %s\n", r.Policy, r.Skipped)
			continue
		}
		fmt.Printf("    %-24s %8.2f%% %9s %9s %8.1f%% %13.2f %11d %6d\n", r.Policy, 100*r.SuccessRate(),
			r.P50.Round(time.Millisecond), r.P99.Round(time.Millisecond), 100*r.PTShare(), r.AttemptsPerRequest(), r.NoRegions, r.Shed)
	}
	chart := filepath.Join(work, replay.ChartFile(sc.Name))
	if err := replay.WriteChart(chart, rep); err != nil {
		return fmt.Errorf("writing the chart: %w", err)
	}
	page := filepath.Join(work, "results.md")
	f, err := os.Create(page)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	if err := replay.WriteMarkdown(f, replay.Page{Command: "make demo", ChartDir: ".", Reports: []*replay.Report{rep}}); err != nil {
		return err
	}
	fmt.Printf("\n    success rate over time: %s\n    full table: %s\n", chart, page)
	return reportAlerts(ctx, sc, clock, prom, work)
}

// reportAlerts prints which alerts Prometheus fired during the replay, in
// scenario time, and draws the key series it scraped with the alerts shaded.
func reportAlerts(ctx context.Context, sc *emulator.Scenario, clock *followClock, prom *demoPrometheus, work string) error {
	// Let the last scrape and evaluation after the load land.
	time.Sleep(2 * promInterval)
	end := time.Now()
	zero := end.Add(-time.Duration(float64(clock.Elapsed()) / sc.TimeScale))
	fired, err := prom.alertsFired(ctx, zero, end)
	if err != nil {
		return fmt.Errorf("reading the alerts from Prometheus: %w", err)
	}
	step("alerts Prometheus fired during the replay (scenario time; the incident's faults: %s)", faultWindow(sc))
	printAlerts(fired, time.Duration(float64(end.Sub(zero))*sc.TimeScale))
	chart := filepath.Join(work, "prometheus-"+replay.ChartFile(sc.Name))
	if err := prom.writeChart(ctx, chart, sc.Name, zero, end, fired); err != nil {
		return fmt.Errorf("drawing the Prometheus chart: %w", err)
	}
	fmt.Printf("\n    key series and alerts over time: %s\n", chart)
	return nil
}

// faultWindow is when the scenario's regions fail, from the first fault's
// start to the last one's end.
func faultWindow(sc *emulator.Scenario) string {
	var from, to time.Duration
	first := true
	for _, r := range sc.Regions {
		for _, f := range r.Faults {
			if first || f.From.Duration < from {
				from = f.From.Duration
			}
			to = max(to, f.To.Duration)
			first = false
		}
	}
	if first {
		return "none"
	}
	return fmtMinutes(from) + " to " + fmtMinutes(to)
}
