package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/regionwarden/regionwarden/internal/emulator"
	"github.com/regionwarden/regionwarden/internal/replay"
)

// TestGenerateWritesWhatItReplays: --generate replays the scenarios drawn
// from --seed, and --write-scenarios writes each as a file that reads back
// as the same scenario, so a shape a run finds can be replayed again.
func TestGenerateWritesWhatItReplays(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "generated")
	cfg, err := parseFlags([]string{"--generate", "3", "--seed", "5", "--write-scenarios", dir}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	scs, err := loadScenarios(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(scs) != 3 {
		t.Fatalf("%d scenarios, want 3", len(scs))
	}
	for _, sc := range scs {
		back, err := emulator.LoadScenario(filepath.Join(dir, sc.Name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back, sc) {
			t.Errorf("%s: the file reads back as another scenario", sc.Name)
		}
	}
	if _, err := parseFlags([]string{"--write-scenarios", dir}, io.Discard); err == nil || !strings.Contains(err.Error(), "--generate") {
		t.Errorf("--write-scenarios without --generate: %v, want an error naming --generate", err)
	}
}

// TestGenerateRate: --generate-rate draws the same shapes at a fraction of
// their calls a second, named for it; it needs --generate and a positive
// rate.
func TestGenerateRate(t *testing.T) {
	cfg, err := parseFlags([]string{"--generate", "2", "--seed", "5", "--generate-rate", "0.2"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	scs, err := loadScenarios(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i, sc := range scs {
		if want := fmt.Sprintf("generated-5-%d-x0.2", i+1); sc.Name != want || sc.Load.RequestsPerSecond > 12 {
			t.Errorf("scenario %d: %s at %v calls a second, want %s at 2 to 12", i+1, sc.Name, sc.Load.RequestsPerSecond, want)
		}
	}
	for _, args := range [][]string{{"--generate-rate", "0.2"}, {"--generate", "1", "--generate-rate", "0"}} {
		if _, err := parseFlags(args, io.Discard); err == nil || !strings.Contains(err.Error(), "generate-rate") {
			t.Errorf("%v: %v, want an error naming generate-rate", args, err)
		}
	}
}

// TestRegionTimelineFlag: the timeline's width is whole seconds, as the
// regions count their calls, and not negative; the error names the flag.
func TestRegionTimelineFlag(t *testing.T) {
	cfg, err := parseFlags([]string{"--region-timeline", "10s"}, io.Discard)
	if err != nil || cfg.timeline != 10*time.Second {
		t.Fatalf("--region-timeline 10s: %v, %v", cfg.timeline, err)
	}
	for _, bad := range []string{"1500ms", "-10s"} {
		if _, err := parseFlags([]string{"--region-timeline", bad}, io.Discard); err == nil || !strings.Contains(err.Error(), "--region-timeline") {
			t.Errorf("--region-timeline %s: %v, want an error naming the flag", bad, err)
		}
	}
}

// TestRoutersIn: --routers-in says which scenarios are replayed behind
// several routers sharing capacity, many-routers alone by default.
func TestRoutersIn(t *testing.T) {
	cfg, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !sharesIn(cfg.routersIn, replay.ScenarioManyRouters) || sharesIn(cfg.routersIn, "generated-1-1") {
		t.Errorf("by default only %s is replayed behind several routers (--routers-in %q)", replay.ScenarioManyRouters, cfg.routersIn)
	}
	for _, name := range []string{replay.ScenarioManyRouters, "generated-1-1", "total-outage"} {
		if !sharesIn("all", name) {
			t.Errorf("--routers-in all leaves out %s", name)
		}
	}
	if !sharesIn("total-outage,generated-1-1", "generated-1-1") || sharesIn("total-outage,generated-1-1", replay.ScenarioManyRouters) {
		t.Error("--routers-in with a list replays exactly the scenarios it names behind several routers")
	}
	replayed := []*emulator.Scenario{{Name: "total-outage"}, {Name: "generated-1-1"}}
	for _, ok := range []string{replay.ScenarioManyRouters, "all", "generated-1-1", "total-outage,generated-1-1"} {
		if err := routersInKnown(ok, replayed); err != nil {
			t.Errorf("--routers-in %s: %v", ok, err)
		}
	}
	if err := routersInKnown("total-outage,generated-1-2", replayed); err == nil || !strings.Contains(err.Error(), `"generated-1-2"`) {
		t.Errorf("--routers-in naming a scenario not replayed: got %v, want an error naming it", err)
	}
	// --duration 2m of a longer scenario: the store dies a minute in, in
	// the middle of what is replayed.
	cfg.routersIn = "all"
	cols := routerColumns(cfg, "generated-1-1", 2*time.Minute)
	killed := 0
	for _, c := range cols {
		if strings.Contains(c.Name, "store killed") {
			killed++
			if !strings.Contains(c.Name, "store killed at 1m") {
				t.Errorf("column %q: want the store killed at 1m, half of the 2m replayed", c.Name)
			}
		}
	}
	if killed == 0 || len(cols) < 2*killed {
		t.Errorf("%d columns, %d with the store killed: want the sharing columns, some with the store killed", len(cols), killed)
	}
	cfg.routersIn = "total-outage"
	if cols := routerColumns(cfg, "generated-1-1", time.Minute); len(cols) != 0 {
		t.Errorf("%d sharing columns for a scenario --routers-in does not name", len(cols))
	}
}

// TestRepeat: --repeat replays each scenario with --seed and the seeds after
// it, and the page says each policy's success over them; the first seed's
// run is the page's tables. It must be a positive count.
func TestRepeat(t *testing.T) {
	if testing.Short() {
		t.Skip("replays a scenario twice")
	}
	out := filepath.Join(t.TempDir(), "page.md")
	var stdout strings.Builder
	args := []string{"--generate", "1", "--seed", "3", "--repeat", "2", "--duration", "20s", "--scale", "20",
		"--policies", "allowlist", "--out", out, "--charts", ""}
	if err := run(t.Context(), args, &stdout, io.Discard); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	for _, want := range []string{"seed 3.", "Over 2 replays with seeds 3 to 4", "| " + replay.NameAllowlist + " | 2 | "} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q:\n%s", want, page)
		}
	}
	if !strings.Contains(stdout.String(), "again with seed 4") || !strings.Contains(stdout.String(), "over 2 seeds") {
		t.Errorf("the progress does not say the second seed and the spread:\n%s", stdout.String())
	}
	if _, err := parseFlags([]string{"--repeat", "0"}, io.Discard); err == nil || !strings.Contains(err.Error(), "repeat") {
		t.Errorf("--repeat 0: %v, want an error naming repeat", err)
	}
}
