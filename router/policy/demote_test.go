package policy

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/regionwarden/regionwarden/internal/clocktest"
	"github.com/regionwarden/regionwarden/router/table"
)

// TestDemotionLogged checks that a demotion and a restoration are logged once
// each, with why, however many failures and probes there are. A call every
// 500 ms: the first probe waits for the tenth call after the demotion
// (4.5 s), and its success makes the next calls probes too; the 100
// failures of the interval ask for 14 in a row until they leave it, 10 s
// after them, and 7 then: restored at 10 s, after 12.
func TestDemotionLogged(t *testing.T) {
	clk := newClock()
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	p, err := New(pool(provisioned("europe-west4", table.Capacity{}), shared("europe-west1", 0)), Options{Now: clk.Now, Seed: 1, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	report(p, 0, Failure, 100)
	for range 30 {
		_, a := pick(t, p, PriorityDefault)
		a.Done(Success)
		clk.Advance(500 * time.Millisecond)
	}
	out := buf.String()
	t.Log(out)
	if n := strings.Count(out, `msg="provisioned region demoted`); n != 1 {
		t.Errorf("%d demotion lines, want 1", n)
	}
	if n := strings.Count(out, `msg="provisioned region restored`); n != 1 {
		t.Errorf("%d restoration lines, want 1", n)
	}
	for _, want := range []string{"level=WARN", "region=europe-west4", "failureRate=1", "answered=20", "threshold=0.5", "level=INFO", "probeCalls=10", "restoreAfter=11", "demotedFor=10s", "successesInARow=12"} {
		if !strings.Contains(out, want) {
			t.Errorf("log has no %q", want)
		}
	}
}

// TestSuccessfulProbeProbesAgainAtOnce: failures pace a demoted region's
// probes, successes do not: once a probe succeeds the next calls probe it at
// once, and it is restored after restoreAfter calls, not restoreAfter probe
// intervals.
func TestSuccessfulProbeProbesAgainAtOnce(t *testing.T) {
	clk := newClock()
	p := mustNew(t, pool(provisioned("europe-west4", table.Capacity{}), shared("europe-west1", 0)), clk)
	report(p, 0, Failure, 100)
	if p.Snapshot().Regions[0].Demotion == nil {
		t.Fatal("not demoted after 100 failures")
	}
	probeWait(p, clk)
	for i := range restoreNeed(p, 0) {
		if _, a := pick(t, p, PriorityDefault); a.Region != "europe-west4" {
			t.Fatalf("call %d after a successful probe went to %s, want a probe of europe-west4", i+1, a.Region)
		} else {
			a.Done(Success)
		}
	}
	if d := p.Snapshot().Regions[0].Demotion; d != nil {
		t.Errorf("still demoted after %d successful probes at one moment", restoreNeed(p, 0))
	}
}

// TestRestoredInTheOrderItWasSent: a demoted PT's successes restore it when
// they are in a row in the order it was sent its calls, not the order they
// end in. A PT that answers some calls at once and lets others run out
// their deadline ends its quick successes first: restoreAfter of them in a
// row while the calls sent before them still wait is no evidence it fails
// less. The region's slowest recent answer took 2 s.
func TestRestoredInTheOrderItWasSent(t *testing.T) {
	// demoted returns a pool whose PT answered one call in 2 s and was then
	// demoted, with held probes of it in flight, sent before what follows.
	demoted := func(t *testing.T, held int) (*Pool, *clocktest.Clock, []Attempt) {
		clk := newClock()
		p := mustNew(t, pool(provisioned("europe-west4", table.Capacity{}), shared("europe-west1", 0)), clk)
		_, a := pick(t, p, PriorityDefault)
		clk.Advance(2 * time.Second)
		a.Done(Success)
		for p.Snapshot().Regions[0].Demotion == nil {
			clk.Advance(time.Millisecond)
			if _, a := pick(t, p, PriorityDefault); a.Region != "europe-west4" {
				t.Fatalf("call went to %s before the PT was demoted", a.Region)
			} else {
				a.Done(Failure)
			}
		}
		var old []Attempt
		for range held {
			probeWait(p, clk)
			if _, a := pick(t, p, PriorityDefault); a.Region != "europe-west4" {
				t.Fatalf("probe went to %s", a.Region)
			} else {
				old = append(old, a)
			}
		}
		probeWait(p, clk)
		return p, clk, old
	}
	// succeed makes n probes of the PT that succeed at once, a millisecond
	// apart.
	succeed := func(t *testing.T, p *Pool, clk *clocktest.Clock, n int64) {
		t.Helper()
		for range n {
			clk.Advance(time.Millisecond)
			_, a := pick(t, p, PriorityDefault)
			if a.Region != "europe-west4" {
				t.Fatalf("call went to %s, want a probe of the PT", a.Region)
			}
			a.Done(Success)
		}
	}
	isDemoted := func(p *Pool) bool { return p.Snapshot().Regions[0].Demotion != nil }

	t.Run("the calls sent before the run end after it, failed", func(t *testing.T) {
		p, clk, old := demoted(t, 3)
		// As many as restore it once the three have failed too: each
		// failure is a try at a run (poolState.restoreAfter).
		succeed(t, p, clk, p.st.Load().restoreAfter(regionOf(t, p, "europe-west4").Failed+int64(len(old))))
		if !isDemoted(p) {
			t.Fatal("restored by quick successes while three calls sent before them were in flight")
		}
		for i, a := range old {
			a.Finish(Report{Outcome: Failure, Timeout: true})
			if last := i == len(old)-1; isDemoted(p) == last {
				t.Fatalf("after %d of the earlier calls ended: demoted %v, want restored only when the last one ends", i+1, isDemoted(p))
			}
		}
	})
	t.Run("a call sent in the run fails", func(t *testing.T) {
		p, clk, old := demoted(t, 1)
		succeed(t, p, clk, 1)
		clk.Advance(time.Millisecond)
		_, in := pick(t, p, PriorityDefault)
		if in.Region != "europe-west4" {
			t.Fatalf("call went to %s, want a probe of the PT", in.Region)
		}
		probeWait(p, clk)
		succeed(t, p, clk, restoreNeed(p, 0))
		in.Finish(Report{Outcome: Failure, Timeout: true})
		old[0].Finish(Report{Outcome: Failure, Timeout: true})
		if !isDemoted(p) {
			t.Error("restored by a run of successes that a call sent within it failed")
		}
	})
	t.Run("a call held longer than the slowest answer", func(t *testing.T) {
		p, clk, _ := demoted(t, 1)
		succeed(t, p, clk, restoreNeed(p, 0))
		if !isDemoted(p) {
			t.Fatal("restored at once while a call sent before the run was in flight")
		}
		clk.Advance(2100 * time.Millisecond)
		succeed(t, p, clk, 1)
		if isDemoted(p) {
			t.Error("still demoted: a call in flight for longer than the region's slowest answer holds its restoration back")
		}
	})
}

// TestProbesAreAShareOfTheCalls: the probes of a demoted PT that fails
// every one of them are at most budgetPercent of the pool's calls, at any
// rate, and there is one every 100/budgetPercent calls while calls come
// slower than the probe interval allows. Paced by the clock alone, a pool of
// six calls a second sent a third of its calls to a PT failing them all,
// while the shared region had room for every call.
func TestProbesAreAShareOfTheCalls(t *testing.T) {
	for _, tc := range []struct {
		perSecond int
		budget    int
	}{
		{6, 10}, {1, 10}, {6, 25}, {6, 0}, {200, 10},
	} {
		t.Run(fmt.Sprintf("%d calls a second, budget %d%%", tc.perSecond, tc.budget), func(t *testing.T) {
			clk := newClock()
			tp := pool(provisioned("europe-west4", table.Capacity{}), shared("europe-west1", 0))
			tp.Policy.Retry.BudgetPercent = new(tc.budget)
			p := mustNew(t, tp, clk)
			report(p, 0, Failure, 100)
			if regionOf(t, p, "europe-west4").Demotion == nil {
				t.Fatal("not demoted")
			}
			const calls = 2000
			probes := 0
			for range calls {
				clk.Advance(time.Second / time.Duration(tc.perSecond))
				c, a := pick(t, p, PriorityDefault)
				if a.Region == "europe-west4" {
					probes++
					a.Done(Failure)
					b, err := c.Pick()
					if err != nil || b.Region != "europe-west1" {
						t.Fatalf("retry after a failed probe: %v %v, want europe-west1", b.Region, err)
					}
					a = b
				}
				a.Done(Success)
			}
			st := p.st.Load()
			most := calls/int(st.probeCalls) + 1
			// By the clock alone: a probe every probeEvery.
			if byClock := int(time.Duration(calls) * time.Second / time.Duration(tc.perSecond) / time.Duration(st.probeEvery)); byClock < most {
				most = byClock + 1
			}
			if probes > most || probes < most-2 {
				t.Errorf("%d probes in %d calls, want %d (one each %d calls and %v)", probes, calls, most, st.probeCalls, time.Duration(st.probeEvery))
			}
			if d := regionOf(t, p, "europe-west4").Demotion; d == nil {
				t.Error("restored while every probe failed")
			}
		})
	}
}

// TestRestoreAfterGrowsWithTheTries: each failure of a demoted region is a
// try at a run of successes, so the run that restores it grows with its
// failures over the ejection interval, keeping the chance that a region
// still failing at the threshold (half its calls) is restored by luck
// within an interval under 1%. A region that failed a hundred times in the
// interval (as a demoted PT taking every call the quotas have no room for
// does) is not restored by the seven in a row that restore one that failed
// once.
func TestRestoreAfterGrowsWithTheTries(t *testing.T) {
	clk := newClock()
	p := mustNew(t, pool(provisioned("europe-west4", table.Capacity{}), shared("europe-west1", 0)), clk)
	st := p.st.Load()
	for _, tc := range []struct{ failed, want int64 }{
		{0, 7}, {1, 7}, {20, 11}, {110, 14}, {1_000_000, 20}, // at most minRequests
	} {
		if got := st.restoreAfter(tc.failed); got != tc.want {
			t.Errorf("restoreAfter(%d failures) = %d, want %d", tc.failed, got, tc.want)
		}
	}
	report(p, 0, Failure, 100)
	probeWait(p, clk)
	for i := range 14 {
		if regionOf(t, p, "europe-west4").Demotion == nil {
			t.Fatalf("restored after %d successes in a row, following 100 failures in the interval; want 14", i)
		}
		_, a := pick(t, p, PriorityDefault)
		if a.Region != "europe-west4" {
			t.Fatalf("call %d went to %s, want a probe of europe-west4", i+1, a.Region)
		}
		a.Done(Success)
	}
	if d := regionOf(t, p, "europe-west4").Demotion; d != nil {
		t.Errorf("still demoted after 14 successes in a row: %+v", d)
	}
}
