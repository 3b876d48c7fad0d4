package replay

import (
	"strings"
	"testing"
	"time"

	"github.com/regionwarden/regionwarden/internal/emulator"
)

// TestPTWindowAbsorbsBursts replays two and a half minutes of the bursts on
// a small PT, two bursts of twice its per-second rate: metered over its
// 40 s window, the PT takes the bursts with no 429; metered over one second,
// half of each burst spills to pay-as-you-go. The full replay (make replay)
// holds the columns to the target in docs/replays.md.
func TestPTWindowAbsorbsBursts(t *testing.T) {
	if testing.Short() {
		t.Skip("replays two and a half minutes of scenario time in about 5 seconds")
	}
	sc := testScenario(t, "small-pt-bursts")
	sc.Duration = emulator.D(150 * time.Second)
	rep, err := runOnSchedule(t, sc, []Policy{Regionwarden(), PerSecond()}, Options{Seed: 1, Scale: 30})
	if err != nil {
		t.Fatal(err)
	}
	window, perSecond := rep.result(NameRegionwarden), rep.result(NamePerSecond)
	for _, r := range []*Result{window, perSecond} {
		t.Logf("%s: %d calls, %.2f%% success, %d served by pay-as-you-go, %d 429s from the PT, errors %v, load late p99 %s",
			r.Policy, r.Requests, 100*r.SuccessRate(), r.PayGo(), r.ptThrottled(), r.Errors, r.LagP99)
	}
	// Two bursts of 10 s, each 10 calls/s over the PT's per-second rate.
	if perSecond.PayGo() < 100 {
		t.Errorf("metered per second, the PT spilled only %d calls: the replay does not show the problem", perSecond.PayGo())
	}
	c := windowCheck(window, perSecond)
	if !c.Pass {
		t.Errorf("%s: %s", c.Target, c.Measured)
	}
}

// TestWindowCheck: the bursts' target fails when the window spills more than
// half of what per-second metering spills, when the PT answered a 429, and
// when per-second metering spilled nothing to compare with.
func TestWindowCheck(t *testing.T) {
	res := func(succeeded, provisioned, pt429 int64) *Result {
		return &Result{Policy: NameRegionwarden, Succeeded: succeeded, Provisioned: provisioned,
			Regions: []RegionLoad{{Name: "europe-west1", Tier: "provisioned", Full: map[string]int64{emulator.FullProvisioned: pt429}}}}
	}
	perSecond := res(1000, 700, 0) // 300 spilled
	for _, tc := range []struct {
		name      string
		r, base   *Result
		wantPass  bool
		wantInMsg string
	}{
		{"spills nothing", res(1000, 1000, 0), perSecond, true, "0 calls spilled against 300"},
		{"spills half", res(1000, 850, 0), perSecond, true, "150 calls spilled against 300"},
		{"spills more than half", res(1000, 840, 0), perSecond, false, "160 calls spilled"},
		{"a 429 from the PT", res(1000, 1000, 1), perSecond, false, "1 429s from the PT"},
		{"nothing to compare with", res(1000, 1000, 0), res(1000, 1000, 0), false, "0 calls spilled against 0"},
		{"no per-second column", res(1000, 1000, 0), nil, false, "no per-second column"},
	} {
		c := windowCheck(tc.r, tc.base)
		if c.Pass != tc.wantPass || !strings.Contains(c.Measured, tc.wantInMsg) {
			t.Errorf("%s: pass %v, measured %q; want pass %v and %q", tc.name, c.Pass, c.Measured, tc.wantPass, tc.wantInMsg)
		}
	}
}
