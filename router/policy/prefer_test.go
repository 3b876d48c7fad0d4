package policy

import (
	"testing"
	"time"

	"github.com/regionwarden/regionwarden/router/table"
)

// everyNth fails every n-th attempt a region is sent (n <= 0: none), per
// region, and serves the rest.
func everyNth(n map[string]int) serveFunc {
	sent := map[string]int{}
	return func(region string, _ time.Time) Outcome {
		sent[region]++
		if k := n[region]; k > 0 && sent[region]%k == 0 {
			return Failure
		}
		return Success
	}
}

// firstAttempts runs rps calls a second through two shared regions of
// room each (calls a second) for a minute, each failing as fail says, and
// returns how many first attempts of the last half went to each region.
func firstAttempts(t *testing.T, room float64, fail map[string]int) (map[string]int, simStats) {
	t.Helper()
	clk := newClock()
	p := mustNew(t, pool(shared("europe-west1", room), shared("europe-west4", room)), clk)
	firsts := map[string]int{}
	s := simulate(p, clk, 10, time.Minute, everyNth(fail), func(elapsed time.Duration, tried []string) {
		if elapsed >= 30*time.Second && len(tried) > 0 {
			firsts[tried[0]]++
		}
	})
	return firsts, s
}

// TestPreferTheRegionThatFailsLess: of two regions of one rank with room
// for every call, one failing one call in eight (a share far under the
// ejection threshold, so it is neither ejected nor demoted), the other
// none, the calls go first to the one that fails none. The failing one is
// still measured: held only while it has minRequests (20) ended attempts in
// the ejection interval (10 s), it is sent about that many, two calls a
// second of the ten, a fifth; spread by weight it would be sent half.
func TestPreferTheRegionThatFailsLess(t *testing.T) {
	firsts, _ := firstAttempts(t, 20, map[string]int{"europe-west1": 8})
	total := firsts["europe-west1"] + firsts["europe-west4"]
	if firsts["europe-west1"]*4 > total {
		t.Errorf("first attempts of the last 30 s: %v; want at most a quarter to europe-west1, which fails one call in eight", firsts)
	}
}

// TestRegionsThatFailAlikeShareByWeight: two regions failing the same share
// of their calls are not told apart: the calls are spread over both, as by
// weight, not herded onto whichever looked better by chance.
func TestRegionsThatFailAlikeShareByWeight(t *testing.T) {
	firsts, _ := firstAttempts(t, 20, map[string]int{"europe-west1": 8, "europe-west4": 8})
	total := firsts["europe-west1"] + firsts["europe-west4"]
	for _, r := range []string{"europe-west1", "europe-west4"} {
		if firsts[r]*10 < total*3 {
			t.Errorf("first attempts of the last 30 s: %v; want each region at least 30%%", firsts)
		}
	}
}

// TestHeldRegionTakesTheOverflow: when the region that fails less has room
// for only some of the calls, the one that fails more takes the rest: the
// hold orders the capacities, it removes none, and no call is refused for
// it.
func TestHeldRegionTakesTheOverflow(t *testing.T) {
	firsts, s := firstAttempts(t, 6, map[string]int{"europe-west1": 8})
	if firsts["europe-west1"] < 100 {
		t.Errorf("first attempts of the last 30 s: %v; want europe-west1 to take the ~4 calls a second europe-west4 has no room for", firsts)
	}
	if len(s.errs) != 0 {
		t.Errorf("calls refused: %v; want none (the two regions have room for 12 a second, the load is 10)", s.errs)
	}
}

// TestFailShareNeedsEvidence: the test that holds a region back needs
// minRequests ended attempts on both sides and a difference beyond chance.
func TestFailShareNeedsEvidence(t *testing.T) {
	for _, c := range []struct {
		f, b failShare
		want bool
	}{
		{failShare{100, 10}, failShare{100, 0}, true},
		{failShare{100, 2}, failShare{100, 0}, false}, // 2% against 0% on 100 each: chance
		{failShare{19, 5}, failShare{100, 0}, false},  // under minRequests
		{failShare{100, 10}, failShare{19, 0}, false}, // the better one under minRequests
		{failShare{100, 0}, failShare{100, 10}, false},
		{failShare{100, 10}, failShare{100, 10}, false},
		{failShare{1000, 100}, failShare{1000, 70}, true},
	} {
		if got := c.f.worseThan(c.b, int64(table.DefaultPolicy().Ejection.MinRequests)); got != c.want {
			t.Errorf("%+v worse than %+v: %v, want %v", c.f, c.b, got, c.want)
		}
	}
	// Behind many routers, minRequests 5: one failure in five against none
	// in fifty is chance (continuity-corrected), two in five is not.
	for _, c := range []struct {
		f, b failShare
		want bool
	}{
		{failShare{5, 1}, failShare{50, 0}, false},
		{failShare{5, 2}, failShare{50, 0}, true},
	} {
		if got := c.f.worseThan(c.b, 5); got != c.want {
			t.Errorf("%+v worse than %+v: %v, want %v", c.f, c.b, got, c.want)
		}
	}
}

// TestSnapshotSaysWhichRegionIsHeldBehind: /debug/pools names, for the
// region that fails more, the region its capacity is held behind, and
// nothing once they fail alike.
func TestSnapshotSaysWhichRegionIsHeldBehind(t *testing.T) {
	clk := newClock()
	p := mustNew(t, pool(shared("europe-west1", 20), shared("europe-west4", 20)), clk)
	report(p, 0, Success, 88)
	report(p, 0, Failure, 12)
	report(p, 1, Success, 100)
	snap := p.Snapshot()
	w1, _ := snap.Region("europe-west1")
	w4, _ := snap.Region("europe-west4")
	if got := w1.HeldBehind["standard"]; got != "europe-west4" || len(w1.HeldBehind) != 1 {
		t.Errorf("europe-west1 (12 of 100 failed) heldBehind %v, want standard: europe-west4", w1.HeldBehind)
	}
	if w4.HeldBehind != nil {
		t.Errorf("europe-west4 (none failed) heldBehind %v, want none", w4.HeldBehind)
	}
	report(p, 1, Failure, 12)
	if w1, _ := p.Snapshot().Region("europe-west1"); w1.HeldBehind != nil {
		t.Errorf("regions failing alike: europe-west1 heldBehind %v, want none", w1.HeldBehind)
	}
}

// TestProbesAreNotOrdered: of two demoted PTs whose probes are due, the one
// failing more is probed first as often as the other (by weight): a probe
// asks whether its region answers again, and is no capacity to fill.
func TestProbesAreNotOrdered(t *testing.T) {
	first := map[string]int{}
	for seed := range int64(20) {
		clk := newClock()
		tp := pool(provisioned("europe-west4", table.Capacity{}), provisioned("europe-west1", table.Capacity{}), shared("europe-north1", 0))
		p, err := New(tp, Options{Now: clk.Now, Seed: uint64(seed + 1), Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		report(p, 0, Failure, 100)
		report(p, 1, Success, 40)
		report(p, 1, Failure, 60)
		if s := p.Snapshot(); s.Regions[0].Demotion == nil || s.Regions[1].Demotion == nil {
			t.Fatal("both PTs should be demoted")
		}
		probeWait(p, clk)
		_, a := pick(t, p, PriorityDefault)
		first[a.Region]++
		a.Done(Cancelled)
	}
	if first["europe-west4"] < 3 || first["europe-west1"] < 3 {
		t.Errorf("first probes over 20 pools: %v; want each demoted PT probed first in some", first)
	}
}

// TestHoldDoesNotHerdARegionThatFailsUnderLoad: two regions that each fail
// whatever they are sent beyond 6 calls in a second (a backend that fails
// under load, not a quota: 5xx, not 429), 10 calls a second in all, and a
// first 20 s in which one of them also fails one call in eight. The hold
// moves that one's calls to the other, which then fails beyond its 6 a
// second; its own failure share turns the order, and nothing herds the
// load onto either for long: first attempts fail about as often as when
// the calls are spread by weight (1,271 attempts for 1,200 calls when
// the hold is off, 1,267 with it), where a hold that kept all ten a second
// on one region would fail four of them every second.
func TestHoldDoesNotHerdARegionThatFailsUnderLoad(t *testing.T) {
	clk := newClock()
	p := mustNew(t, pool(shared("europe-west1", 20), shared("europe-west4", 20)), clk)
	begin := clk.Now()
	perSecond := map[string]map[int64]int{"europe-west1": {}, "europe-west4": {}}
	early := 0
	serve := func(region string, now time.Time) Outcome {
		elapsed := now.Sub(begin)
		s := int64(elapsed / time.Second)
		perSecond[region][s]++
		if region == "europe-west1" && elapsed < 20*time.Second {
			if early++; early%8 == 0 {
				return Failure
			}
		}
		if perSecond[region][s] > 6 {
			return Failure
		}
		return Success
	}
	s := simulate(p, clk, 10, 2*time.Minute, serve, nil)
	if s.attempts*10 > s.requests*11 {
		t.Errorf("%d attempts for %d calls (%v, refused %v); want at most 1.1 a call", s.attempts, s.requests, s.byRegion, s.errs)
	}
	if s.ok*100 < s.requests*99 {
		t.Errorf("%d of %d calls served; want at least 99%%", s.ok, s.requests)
	}
}
