package replay

import (
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
	sc, err := emulator.LoadScenario("../../test/scenarios/small-pt-bursts.yaml")
	if err != nil {
		t.Fatal(err)
	}
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
