package emulator_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/regionwarden/regionwarden/internal/emulator"
)

func TestParseScenarioDefaults(t *testing.T) {
	sc := mustParse(t, baseScenario+`
  faults:
  - {from: 1m, to: 2m, errorRate: 0.1}
`)
	if sc.Publisher != "google" || sc.TimeScale != 1 || sc.CapacityWindow.Duration != time.Second {
		t.Errorf("publisher %q scale %v window %s: defaults not applied", sc.Publisher, sc.TimeScale, sc.CapacityWindow)
	}
	if sc.Load.SessionCalls.Min != 50 || sc.Load.SessionCalls.Max != 100 || sc.Load.InputTokens == 0 || sc.Load.OutputTokens == 0 {
		t.Errorf("load %+v: defaults not applied", sc.Load)
	}
	f := sc.Regions[1].Faults[0]
	if f.Code != 503 || f.BurstLength != 1 {
		t.Errorf("fault %+v: want code 503 and burst length 1 by default", f)
	}
	if sc.Regions[1].Latency.Distribution != emulator.Fixed || sc.Regions[0].Provisioned.Mode != emulator.ModeSpillover {
		t.Errorf("regions %+v", sc.Regions)
	}
}

func TestParseScenarioRefusesBadFiles(t *testing.T) {
	tests := []struct {
		name    string
		from    string // replaced in baseScenario...
		to      string // ...by this
		wantErr string // the error must contain this, naming the field
	}{
		{name: "unknown field", from: "tier: shared", to: "tier: shared\n  weight: 3", wantErr: `unknown field "regions[1].weight"`},
		{name: "unknown top-level field", from: "name: unit", to: "name: unit\nregion: x", wantErr: `unknown field "region"`},
		{name: "unknown nested field", from: "p50: 100ms}", to: "p50: 100ms, p95: 1s}", wantErr: `unknown field "regions[0].latency.p95"`},
		{name: "bad tier", from: "tier: shared", to: "tier: premium", wantErr: `regions[1].tier: must be provisioned or shared`},
		{name: "duplicate region", from: "name: europe-west4", to: "name: europe-west1", wantErr: `regions[1].name: duplicate region "europe-west1"`},
		{name: "bad location", from: "name: europe-west4", to: "name: Europe West", wantErr: `regions[1].name: must be a Vertex AI location`},
		{name: "shared region without capacity", from: "capacity: {requestsPerSecond: 4}", to: "", wantErr: `regions[1].capacity: a shared region needs`},
		{name: "PT on a shared region", from: "capacity: {requestsPerSecond: 4}", to: "capacity: {requestsPerSecond: 4}\n  provisioned: {gsus: 1, tokensPerSecond: 10}", wantErr: `regions[1].provisioned: only a provisioned region`},
		{name: "provisioned without PT", from: "  provisioned: {gsus: 2, tokensPerSecond: 100000, requestsPerSecond: 5, mode: spillover, window: 1s}\n", to: "", wantErr: `regions[0].provisioned: required`},
		{name: "PT window too short", from: "window: 1s", to: "window: 1ms", wantErr: `regions[0].provisioned.window: must be at least 10ms`},
		{name: "zero GSUs", from: "gsus: 2", to: "gsus: 0", wantErr: `regions[0].provisioned.gsus: must be positive`},
		{name: "bad mode", from: "mode: spillover", to: "mode: burst", wantErr: `regions[0].provisioned.mode: must be spillover or dedicated`},
		{name: "bad duration", from: "duration: 10m", to: "duration: ten minutes", wantErr: `time: invalid duration`},
		{name: "missing load", from: "load: {requestsPerSecond: 10}", to: "", wantErr: `load.requestsPerSecond: must be positive`},
		{name: "bad phase", from: "load: {requestsPerSecond: 10}", to: "load: {requestsPerSecond: 10, phases: [{from: 2m, to: 1m, multiplier: 3}]}", wantErr: `load.phases[0]: need 0 <= from < to`},
		{name: "priority share above one", from: "load: {requestsPerSecond: 10}", to: "load: {requestsPerSecond: 10, priorities: {critical: 1.5}}", wantErr: `load.priorities.critical: must be a share in [0, 1]`},
		{name: "stream share above one", from: "load: {requestsPerSecond: 10}", to: "load: {requestsPerSecond: 10, streamShare: 1.2}", wantErr: `load.streamShare: must be a share in [0, 1], got 1.2`},
		{name: "negative stream share", from: "load: {requestsPerSecond: 10}", to: "load: {requestsPerSecond: 10, streamShare: -0.1}", wantErr: `load.streamShare: must be a share in [0, 1], got -0.1`},
		{name: "priority shares over one", from: "load: {requestsPerSecond: 10}", to: "load: {requestsPerSecond: 10, priorities: {critical: 0.6, sheddable: 0.5}}", wantErr: `load.priorities: critical and sheddable shares add up to 1.1`},
		{name: "p99 below p50", from: "p50: 200ms}", to: "p50: 200ms, p99: 100ms}", wantErr: `regions[1].latency.p99: must be at least p50`},
		{name: "error rate above one", from: "latency: {distribution: fixed, p50: 200ms}", to: "faults: [{from: 1m, to: 2m, errorRate: 1.5}]", wantErr: `regions[1].faults[0].errorRate: must be in [0, 1]`},
		{name: "bad fault code", from: "latency: {distribution: fixed, p50: 200ms}", to: "faults: [{from: 1m, to: 2m, errorRate: 0.5, code: 418}]", wantErr: `regions[1].faults[0].code: must be 404, 429, 500, 503 or 504`},
		{name: "streams broken by a 429", from: "latency: {distribution: fixed, p50: 200ms}", to: "faults: [{from: 1m, to: 2m, errorRate: 0.5, code: 429, breaksStreams: true}]", wantErr: `regions[1].faults[0].breaksStreams: needs an errorRate of a code other than 429`},
		{name: "streams broken without errors", from: "latency: {distribution: fixed, p50: 200ms}", to: "faults: [{from: 1m, to: 2m, addedLatency: 1s, breaksStreams: true}]", wantErr: `regions[1].faults[0].breaksStreams: needs an errorRate`},
		{name: "fault window backwards", from: "latency: {distribution: fixed, p50: 200ms}", to: "faults: [{from: 3m, to: 2m, errorRate: 0.5}]", wantErr: `regions[1].faults[0]: need 0 <= from < to`},
		{name: "bad outage", from: "latency: {distribution: fixed, p50: 200ms}", to: "faults: [{from: 1m, to: 2m, outage: partial}]", wantErr: `regions[1].faults[0].outage: must be refused or unavailable`},
		{name: "fault that does nothing", from: "latency: {distribution: fixed, p50: 200ms}", to: "faults: [{from: 1m, to: 2m}]", wantErr: `regions[1].faults[0]: does nothing`},
		{name: "capacity below one call per window", from: "requestsPerSecond: 4}", to: "requestsPerSecond: 0.5}", wantErr: `regions[1].capacity.requestsPerSecond: 0.5 per second admits no call`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(baseScenario, tt.from) {
				t.Fatalf("base scenario has no %q", tt.from)
			}
			_, err := emulator.ParseScenario([]byte(strings.Replace(baseScenario, tt.from, tt.to, 1)))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestLoadRate(t *testing.T) {
	sc := mustParse(t, strings.Replace(baseScenario, "load: {requestsPerSecond: 10}",
		"load: {requestsPerSecond: 10, phases: [{from: 10m, to: 11m, multiplier: 3}]}", 1))
	for _, tt := range []struct {
		at   time.Duration
		want float64
	}{{9 * time.Minute, 10}, {10 * time.Minute, 30}, {10*time.Minute + 59*time.Second, 30}, {11 * time.Minute, 10}} {
		if got := sc.Load.RateAt(tt.at); got != tt.want {
			t.Errorf("rate at %s = %v, want %v", tt.at, got, tt.want)
		}
	}
}

// TestShippedScenariosParse loads every scenario in test/scenarios.
func TestShippedScenariosParse(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "test", "scenarios", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 3 {
		t.Fatalf("found %d scenarios in test/scenarios, want at least 3", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			sc, err := emulator.LoadScenario(f)
			if err != nil {
				t.Fatal(err)
			}
			if want := strings.TrimSuffix(filepath.Base(f), ".yaml"); sc.Name != want {
				t.Errorf("name %q, want the file's name %q", sc.Name, want)
			}
			data, _ := os.ReadFile(f)
			if !strings.HasPrefix(string(data), "#") {
				t.Errorf("no comment header saying what the scenario models")
			}
			if _, err := emulator.New(sc, emulator.Options{Clock: emulator.NewManualClock()}); err != nil {
				t.Errorf("new: %v", err)
			}
		})
	}
}
