package policy

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/regionwarden/regionwarden/router/table"
)

// ejectPool is four shared regions with minRequests 10, threshold 0.5 and
// ejection times of 10 s base, 60 s max.
func ejectPool(maxEjectedPct int) table.Pool {
	tp := pool(shared("europe-west1", 0), shared("europe-west2", 0), shared("europe-west3", 0), shared("europe-west4", 0))
	e := &tp.Policy.Ejection
	e.MinRequests = 10
	e.FailureRateThreshold = 0.5
	e.Interval.Duration = 10 * time.Second
	e.BaseEjectionTime.Duration = 10 * time.Second
	e.MaxEjectionTime.Duration = 60 * time.Second
	e.MaxEjectedPercent = new(maxEjectedPct)
	return tp
}

// TestEjectionThreshold checks the failure-rate rule: at or over the
// threshold with at least minRequests answered, and only then.
func TestEjectionThreshold(t *testing.T) {
	for _, tc := range []struct {
		name          string
		ok, failed    int
		wantEjected   bool
		provisionedTo bool
	}{
		{"under minRequests", 0, 9, false, false},
		{"at the threshold", 5, 5, true, false},
		{"under the threshold", 6, 4, false, false},
		{"all failing", 0, 30, true, false},
		{"provisioned all failing", 0, 30, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			tp := ejectPool(50)
			if tc.provisionedTo {
				tp.Regions[0].Tier, tp.Regions[0].Ejectable = table.TierProvisioned, false
			}
			p := mustNew(t, tp, clk)
			report(p, 0, Success, tc.ok)
			report(p, 0, Failure, tc.failed)
			rs := p.Snapshot().Regions[0]
			if rs.Ejected != tc.wantEjected {
				t.Errorf("ejected = %v, want %v (%+v)", rs.Ejected, tc.wantEjected, rs)
			}
			if tc.provisionedTo && !rs.Failing {
				t.Errorf("provisioned region not reported failing: %+v", rs)
			}
		})
	}
}

// TestEjectionTime checks that each ejection lasts base × multiplier, capped
// at max, less at most 10% jitter, and that the multiplier decays while the
// region stays healthy.
func TestEjectionTime(t *testing.T) {
	clk := newClock()
	p := mustNew(t, ejectPool(50), clk)
	ejectedFor := func() time.Duration {
		report(p, 0, Failure, 10)
		rs := p.Snapshot().Regions[0]
		if !rs.Ejected {
			t.Fatalf("not ejected after 10 failures: %+v", rs)
		}
		d := rs.EjectedUntil.Sub(clk.Now())
		clk.Advance(d)
		return d
	}
	for i, base := range []time.Duration{10, 20, 30, 40, 50, 60, 60, 60} {
		want := base * time.Second
		if d := ejectedFor(); d > want || d < want*9/10 {
			t.Errorf("ejection %d lasted %v, want within [%v, %v]", i+1, d, want*9/10, want)
		}
	}
	// Eight ejections so far; 5 healthy intervals bring the multiplier to 3,
	// so the next ejection is the 4th step: 40 s.
	clk.Advance(5*10*time.Second + time.Second)
	if d := ejectedFor(); d > 40*time.Second || d < 36*time.Second {
		t.Errorf("after 5 healthy intervals the ejection lasted %v, want about 40s", d)
	}
	if n := p.Snapshot().Regions[0].TimesEjected; n != 9 {
		t.Errorf("times ejected = %d, want 9", n)
	}
}

// TestMaxEjectedPercent checks that the cap is applied after the ejection and
// that the panic threshold brings ejected regions back into use.
func TestMaxEjectedPercent(t *testing.T) {
	for _, tc := range []struct {
		pct, wantEjected int
		wantPanic        bool
	}{
		{0, 0, false},
		{24, 0, false},
		{25, 1, false},
		{50, 2, false},
		{74, 2, false},
		{75, 3, true},
		{99, 3, true},
	} {
		clk := newClock()
		p := mustNew(t, ejectPool(tc.pct), clk)
		for i := range 4 {
			report(p, i, Failure, 10)
		}
		snap := p.Snapshot()
		ejected := 0
		for _, rs := range snap.Regions {
			if rs.Ejected {
				ejected++
			}
		}
		if ejected != tc.wantEjected || snap.Panic != tc.wantPanic {
			t.Errorf("maxEjectedPercent %d: %d ejected, panic %v; want %d, %v", tc.pct, ejected, snap.Panic, tc.wantEjected, tc.wantPanic)
		}
		if tc.wantPanic {
			// Past the throttle's window, which the failures fed, and
			// within the ejections.
			clk.Advance(throttleWindow + time.Second)
			seen := map[string]bool{}
			for range 200 {
				seen[once(t, p, Success)] = true
			}
			if len(seen) != 4 {
				t.Errorf("maxEjectedPercent %d: in panic, calls reached %d regions, want all 4", tc.pct, len(seen))
			}
		}
	}
}

// TestDemotedProvisionedRegion checks demotion: a provisioned region failing
// at the threshold keeps only its probes of first attempts (the healthy
// provisioned region takes the rest, the shared region none, having no
// need), its failed probes fall back to the healthy provisioned region, and
// once it answers again it is restored within a few seconds of probes and
// takes about half of first attempts again.
func TestDemotedProvisionedRegion(t *testing.T) {
	clk := newClock()
	tp := pool(provisioned("europe-west4", table.Capacity{}), provisioned("us-central1", table.Capacity{}), shared("europe-west1", 0))
	tp.Policy.Retry = table.Retry{MaxAttempts: 3, BudgetPercent: new(100), MinRetriesPerSecond: new(0)}
	p := mustNew(t, tp, clk)
	report(p, 0, Failure, 100)
	rs := p.Snapshot().Regions[0]
	if !rs.Failing || rs.Ejected || rs.Demotion == nil || rs.TimesDemoted != 1 {
		t.Fatalf("failing provisioned region: %+v", rs)
	}
	if d := rs.Demotion; d.FailureRate != 1 || d.Answered != 20 || d.Threshold != 0.5 || d.RestoreAfter != 14 || !d.Since.Equal(clk.Now()) {
		t.Errorf("demotion %+v, want failure rate 1 of 20 answered, threshold 0.5, restore after 14 (for the 100 failures of the interval), since now", d)
	}
	// run sends 100 calls a second for d; the first attempts on europe-west4
	// answer o.
	run := func(d time.Duration, o Outcome) map[string]int {
		firsts := map[string]int{}
		for range int(d / (10 * time.Millisecond)) {
			c, a := pick(t, p, PriorityDefault)
			firsts[a.Region]++
			if a.Region == "europe-west4" && o == Failure {
				a.Done(Failure)
				b, err := c.Pick()
				if err != nil {
					t.Fatal(err)
				}
				if b.Region != "us-central1" {
					t.Errorf("retry after a failed probe went to %s, want the healthy provisioned region", b.Region)
				}
				b.Done(Success)
			} else {
				a.Done(Success)
			}
			clk.Advance(10 * time.Millisecond)
		}
		return firsts
	}
	firsts := run(10*time.Second, Failure)
	// Probes: minRequests (20) per ejection interval (10 s).
	if n := firsts["europe-west4"]; n < 18 || n > 22 || firsts["europe-west1"] != 0 {
		t.Errorf("first attempts while demoted %v: want about 20 probes on europe-west4, none on the shared region", firsts)
	}
	if rs := p.Snapshot().Regions[0]; rs.Demotion == nil {
		t.Fatalf("restored while its probes fail: %+v", rs)
	}
	firsts = run(4*time.Second, Success)
	rs = p.Snapshot().Regions[0]
	if rs.Demotion != nil || rs.Failing || rs.ThrottleProbability != 0 {
		t.Fatalf("4 s (8 probes) after recovering: %+v, want restored", rs)
	}
	t.Logf("first attempts in the 4 s of recovery: %v", firsts)
	if firsts = run(10*time.Second, Success); firsts["europe-west4"] < 400 {
		t.Errorf("first attempts after restoration %v: want about half on europe-west4", firsts)
	}
}

// TestEjectedRegionTakesWhatNoOtherCan: an ejected region gets no call while
// the others have headroom, and the calls none of them has room for, which
// would otherwise be refused: a region answering half its calls serves half
// of them.
func TestEjectedRegionTakesWhatNoOtherCan(t *testing.T) {
	clk := newClock()
	p := mustNew(t, threeShared(10), clk)
	// Half failing: at the threshold, and not yet throttled (it accepts
	// half of what it answers).
	report(p, 0, Success, 5)
	report(p, 0, Failure, 5)
	if rs := p.Snapshot().Regions[0]; !rs.Ejected || rs.ThrottleProbability != 0 {
		t.Fatalf("europe-west1 after 5 failures of 10: %+v, want ejected, not throttled", rs)
	}
	got := map[string]int{}
	for i := range 30 {
		c := p.Start(Request{})
		a, err := c.Pick()
		if err != nil {
			t.Fatalf("call %d refused with %v; europe-west1 had room", i+1, err)
		}
		if a.Region == "europe-west1" && i < 20 {
			t.Errorf("call %d went to the ejected region while the others had room: %v", i+1, got)
		}
		got[a.Region]++
	}
	if got["europe-west1"] != 10 {
		t.Errorf("calls by region %v, want 10 on each", got)
	}
}

// TestEjectedRegionAsksOnce: an ejected region whose failures have aged out
// of its window, with nothing answered since, takes one of the calls the
// others have no room for at a time: its answer is the evidence. A success
// lends it its share of them at once, before its ejection ends; a failure
// nothing until the failure ages out. Lending it nothing without evidence,
// a region that had recovered took none of them until its ejection ended.
func TestEjectedRegionAsksOnce(t *testing.T) {
	for _, tc := range []struct {
		answer Outcome
		want   int // of 20 more calls, how many it takes after its answer
	}{
		{Success, 9}, // its quota of 10 a second, less the call that asked
		{Failure, 0},
	} {
		t.Run(tc.answer.String(), func(t *testing.T) {
			clk := newClock()
			tp := threeShared(10)
			p := mustNew(t, tp, clk)
			report(p, 0, Failure, 10)
			clk.Advance(tp.Policy.Ejection.Interval.Duration + time.Second)
			if rs := p.Snapshot().Regions[0]; !rs.Ejected || rs.FailureRate != 0 {
				t.Fatalf("europe-west1 %+v: want ejected, its failures aged out", rs)
			}
			var held []Attempt
			take := func(n int) map[string]int {
				got := map[string]int{}
				for range n {
					c := p.Start(Request{})
					if a, err := c.Pick(); err == nil {
						got[a.Region]++
						held = append(held, a)
					}
				}
				return got
			}
			if got := take(20); got["europe-west1"] != 0 {
				t.Fatalf("calls %v: the ejected region took some while the others had room", got)
			}
			if got := take(5); got["europe-west1"] != 1 || len(got) != 1 {
				t.Fatalf("calls the others had no room for %v, want one on the ejected region", got)
			}
			held[len(held)-1].Done(tc.answer)
			held = held[:len(held)-1]
			if got := take(20); got["europe-west1"] != tc.want || len(got) > 1 {
				t.Errorf("after its answer (%s) calls %v, want %d on the ejected region", tc.answer, got, tc.want)
			}
			for _, a := range held {
				a.Done(Cancelled)
			}
		})
	}
}

// TestEjectedRegionReturnsOnProbation: when its ejection ends, a region
// does not get its share of first attempts back at once (the failures that
// ejected it have aged out of its window, and it would look healthy): it
// ranks behind the regions that answer and takes one probe per probe
// interval, a failed probe breaks its run, and restoreAfter successes in a
// row give it its full share back. In panic its probation, as its
// ejection, is ignored.
func TestEjectedRegionReturnsOnProbation(t *testing.T) {
	g := NewWithT(t)
	clk := newClock()
	tp := threeShared(100)
	e := &tp.Policy.Ejection
	p := mustNew(t, tp, clk)
	report(p, 0, Failure, 10)
	g.Expect(p.Snapshot().Regions[0].Ejected).To(BeTrue())
	clk.Advance(tp.Policy.Ejection.BaseEjectionTime.Duration)
	rs := p.Snapshot().Regions[0]
	g.Expect(rs.Ejected).To(BeFalse())
	g.Expect(rs.Probation).To(BeTrue())

	// firsts makes n calls at this instant and reports each with o on
	// europe-west1, success elsewhere; it returns how many went there.
	firsts := func(n int, o Outcome) int {
		k := 0
		for range n {
			c := p.Start(Request{})
			a, err := c.Pick()
			if err != nil {
				t.Fatalf("pick: %v", err)
			}
			if a.Region == "europe-west1" {
				k++
				a.Done(o)
				continue
			}
			a.Done(Success)
		}
		return k
	}
	g.Expect(firsts(30, Failure)).To(Equal(1), "one probe, the others go to the regions that answer")
	g.Expect(p.Snapshot().Regions[0].Probation).To(BeTrue(), "its probe failed")
	probeEvery := tp.Policy.Ejection.Interval.Duration / time.Duration(e.MinRequests)
	clk.Advance(probeEvery)
	// Successes make the next call a probe at once (demote.go).
	for i := range restoreNeed(p, 0) {
		g.Expect(p.Snapshot().Regions[0].Probation).To(BeTrue(), "after %d successes", i)
		g.Expect(firsts(1, Success)).To(Equal(1), "probe %d", i+1)
	}
	rs = p.Snapshot().Regions[0]
	g.Expect(rs.Probation).To(BeFalse(), "restored after its run of successes")
	clk.Advance(time.Second)
	g.Expect(firsts(150, Success)).To(BeNumerically("~", 50, 20), "its share back")

	// Panic: two regions of three out, and their probations are ignored
	// as their ejections would be.
	tp.Policy.Ejection.MaxEjectedPercent = new(99)
	g.Expect(p.Update(tp)).To(Succeed())
	clk.Advance(tp.Policy.Ejection.Interval.Duration) // the successes above age out
	report(p, 1, Failure, 10)
	report(p, 2, Failure, 10)
	clk.Advance(tp.Policy.Ejection.BaseEjectionTime.Duration)
	snap := p.Snapshot()
	g.Expect(snap.Regions[1].Probation && snap.Regions[2].Probation).To(BeTrue())
	g.Expect(snap.Panic).To(BeTrue(), "one region of three answers")
	// The calls stay in flight: a probe's success would make the next
	// call a probe at once, and restore the region within the loop.
	got := map[string]int{}
	var held []Attempt
	for range 150 {
		c := p.Start(Request{})
		a, err := c.Pick()
		if err != nil {
			got[errName(err)]++
			continue
		}
		got[a.Region]++
		held = append(held, a)
	}
	for _, a := range held {
		a.Done(Success)
	}
	g.Expect(got["europe-west2"]).To(BeNumerically(">", 25), "in panic a region on probation ranks as any: %v", got)
	g.Expect(got["europe-west1"]+got["europe-west2"]+got["europe-west3"]).To(Equal(150), "%v", got)
}

// threeShared is three shared regions of rps calls a second each, ejected
// at half their calls failing once they answered ten, at most half of them
// at once.
func threeShared(rps float64) table.Pool {
	tp := pool(shared("europe-west1", rps), shared("europe-west2", rps), shared("europe-west3", rps))
	e := &tp.Policy.Ejection
	e.MinRequests, e.FailureRateThreshold, e.MaxEjectedPercent = 10, 0.5, new(50)
	return tp
}
