package replay

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/regionwarden/regionwarden/router/table"
)

// TestPriorityPayGoKeepsCriticalCalls replays a short priority-paygo
// (test/scenarios; the full four minutes are in docs/replays.md): 20 s with
// the PT on global full, then 80 s in which standard pay-as-you-go also
// throttles, against regionwarden in process and the blocklist with the PT
// allowlist, which knows no pay-as-you-go tiers. It checks what
// docs/replays.md checks: regionwarden serves every critical call, the
// overflow through Priority PayGo, while the allowlist loses some in the
// same conditions. Scale 8 replays it in about 13 s of real time.
func TestPriorityPayGoKeepsCriticalCalls(t *testing.T) {
	if testing.Short() {
		t.Skip("replays a short scenario in about 13 seconds")
	}
	sc := shortScenario(t, ScenarioPriorityPayGo, 20*time.Second, 100*time.Second)
	rep, err := runOnSchedule(t, sc, []Policy{Allowlist(), Regionwarden()}, Options{Seed: 5, Scale: 8, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Results {
		for _, p := range r.Priorities {
			t.Logf("%s: %s calls %d, %.2f%% served, by traffic type %v", r.Policy, p.Priority, p.Requests, 100*p.SuccessRate(), p.ByTraffic)
		}
		t.Logf("%s: PT served %d calls; load late p99 %s", r.Policy, r.Provisioned, r.LagP99)
	}
	cs := Checks(rep)
	if len(cs) != 2 {
		t.Fatalf("checks %+v, want one per policy", cs)
	}
	for _, c := range cs {
		if !c.Pass {
			t.Errorf("missed: %s: %s", c.Target, c.Measured)
		}
	}
	if sh := rep.Results[1].Priority(table.PrioritySheddable); sh == nil || sh.ByTraffic[trafficFlex] == 0 {
		t.Errorf("regionwarden's sheddable calls %+v, want some served by Flex PayGo", sh)
	}
}

// TestShortageShedsLowestFirst replays a short
// provisioned-region-down-priorities (test/scenarios; the full four minutes
// are in docs/replays.md): 20 s of normal traffic, then 60 s in which the PT
// answers 503 and the pay-as-you-go quotas carry 60% of the calls, against
// regionwarden in process. It checks, with room for a busy machine where
// the full targets leave little: at least 90% of what the quotas carry
// served (the target is 95%), critical calls served at least 90% (95% of
// what a priority queue gives them, 100%), and each priority served at
// least as much as the one below it, sheddable calls well under default
// ones. Scale 8 replays it in about 13 s of real time.
func TestShortageShedsLowestFirst(t *testing.T) {
	if testing.Short() {
		t.Skip("replays a short scenario in about 13 seconds")
	}
	sc := shortScenario(t, ScenarioDownPriorities, 20*time.Second, 100*time.Second)
	rep, err := runOnSchedule(t, sc, []Policy{Regionwarden()}, Options{Seed: 7, Scale: 8, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Results[0]
	if f := r.Fault; f.Success < 0.9*rep.FaultCarry {
		t.Errorf("served %.2f%% while the PT was down, want at least 90%% of the %.0f%% the quotas carry", 100*f.Success, 100*rep.FaultCarry)
	}
	var got []float64
	for _, pr := range highestFirst {
		p := r.Priority(pr)
		if p == nil || p.FaultRequests == 0 {
			t.Fatalf("no %s calls while the PT was down", pr)
		}
		t.Logf("%s: %d calls while the PT was down, %.2f%% served (a priority queue: %.0f%%)", pr, p.FaultRequests, 100*p.FaultSuccess(), 100*rep.PriorityCarry[pr])
		got = append(got, p.FaultSuccess())
	}
	if got[0] < 0.9 || got[0] < got[1] || got[1] < got[2]+0.2 {
		t.Errorf("served critical %.2f%%, default %.2f%%, sheddable %.2f%% while the PT was down; want critical at least 90%%, and each priority more than the one below, default by 20 points", 100*got[0], 100*got[1], 100*got[2])
	}
}

// TestPriorityChecks judges the priority-paygo targets on known results:
// every critical call served and some through Priority PayGo, in a run where
// the PT was full and standard pay-as-you-go answered 429s; and a policy
// without tiers judged on losing critical calls.
func TestPriorityChecks(t *testing.T) {
	result := func(policy string, crit, critOK, priority, standard429 int64) *Result {
		return &Result{
			Policy: policy, Requests: 400, Succeeded: 300, Provisioned: 160,
			Priorities: []PriorityResult{
				{Priority: table.PriorityCritical, Requests: crit, Succeeded: critOK, ByTraffic: map[string]int64{trafficProvisioned: critOK - priority, trafficPriority: priority}},
				{Priority: table.PriorityDefault, Requests: 200, Succeeded: 120, ByTraffic: map[string]int64{trafficStandard: 120}},
			},
			Regions: []RegionLoad{{Name: "global", Full: map[string]int64{"provisioned": 3}}, {Name: "europe-west4", Full: map[string]int64{"standard": standard429}}},
		}
	}
	for _, tc := range []struct {
		name    string
		r       *Result
		ptCalls float64
		want    bool
	}{
		{"every critical call, some by Priority PayGo", result(NameRegionwarden, 100, 100, 60, 40), 8, true},
		{"one critical call lost", result(NameRegionwarden, 100, 99, 60, 40), 8, false},
		{"none by Priority PayGo", result(NameRegionwarden, 100, 100, 0, 40), 8, false},
		{"standard never throttled", result(NameRegionwarden, 100, 100, 60, 0), 8, false},
		{"the PT was never full", result(NameRegionwarden, 100, 100, 60, 40), 25, false},
		{"no critical calls", result(NameRegionwarden, 0, 0, 0, 40), 8, false},
		{"the allowlist loses critical calls", result(NameAllowlist, 100, 60, 0, 40), 8, true},
		{"the allowlist loses none", result(NameAllowlist, 100, 100, 0, 40), 8, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := &Report{Scenario: ScenarioPriorityPayGo, Duration: 100 * time.Second, Rate: 20, PTCalls: tc.ptCalls, Results: []*Result{tc.r}}
			cs := Checks(rep)
			if len(cs) != 1 || cs[0].Pass != tc.want {
				t.Errorf("checks %+v, want one that passes: %v", cs, tc.want)
			}
		})
	}
	rep := &Report{Scenario: ScenarioPriorityPayGo, Duration: 100 * time.Second, Rate: 20, PTCalls: 8, Results: []*Result{result(NameRegionwarden, 100, 100, 60, 40)}}
	var b strings.Builder
	if err := WriteMarkdown(&b, Page{Reports: []*Report{rep}}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| " + NameRegionwarden + " | critical | 100 | 100.00% | 40 | 0 | 60 | 0 | 0 |",
		"while the PT is full (the load asks 20 calls/s of a PT that serves 8) and standard pay-as-you-go throttles",
		"the PT served 1.60 calls/s; standard pay-as-you-go answered 40 429s (met)",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("page lacks %q:\n%s", want, b.String())
		}
	}
}

// TestRegionPoolTiers renders the priority-paygo scenario's table: global
// lists the pay-as-you-go tiers it offers, standard among them, the regions
// that offer standard alone list nothing (the table's default), and callers
// may claim critical, as the scenario's load does.
func TestRegionPoolTiers(t *testing.T) {
	_, p := scenarioPool(t, ScenarioPriorityPayGo)
	want := map[string][]table.PayGoTier{
		"global":       {table.PayGoStandard, table.PayGoPriority, table.PayGoFlex},
		"europe-west4": {table.PayGoStandard},
		"europe-west1": {table.PayGoStandard},
	}
	for _, r := range p.Regions {
		if !slices.Equal(r.PayGoTiers, want[r.Name]) {
			t.Errorf("%s offers %v, want %v", r.Name, r.PayGoTiers, want[r.Name])
		}
	}
	if p.Callers.MaxPriority != table.PriorityCritical {
		t.Errorf("callers may claim %q, want critical", p.Callers.MaxPriority)
	}
}
