package policy

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/regionwarden/regionwarden/internal/clocktest"
	"github.com/regionwarden/regionwarden/router/table"
)

// Two callers of one pool, told apart by their keys.
const (
	goodCaller   uint64 = 0x1111_0001
	poisonCaller uint64 = 0x2222_0002
)

// blameRun is what two callers' calls met over a run: per caller, the calls
// that succeeded, their attempts, and the calls whose last attempt the
// policy learned as the caller's own fault.
type blameRun struct {
	ok, attempts, ownFault map[uint64]int
}

// runCallers sends, every 50 ms for d, one call of each caller in keys
// through p (a call retried as the policy allows), each attempt answered by
// serve, and returns what they met.
func runCallers(p *Pool, clk *clocktest.Clock, d time.Duration, keys []uint64, serve func(key uint64, region string) Outcome) blameRun {
	return runCalls(p, clk, d, keys, serve, callsOpts{retry: true})
}

// callsOpts are how runCalls sends calls.
type callsOpts struct {
	// retry: calls are retried as the policy allows; otherwise never,
	// sessions committed to the region of their first attempt, as a Live
	// session or a stream Google ends after it began.
	retry bool
	// pin holds a caller's calls to a region (Request.Region), as a call
	// naming a cached content or a resumed Live session.
	pin map[uint64]string
}

// runCalls is runCallers, the calls sent as o says. A key listed n times
// sends n calls every 50 ms.
func runCalls(p *Pool, clk *clocktest.Clock, d time.Duration, keys []uint64, serve func(key uint64, region string) Outcome, o callsOpts) blameRun {
	run := blameRun{ok: map[uint64]int{}, attempts: map[uint64]int{}, ownFault: map[uint64]int{}}
	for end := clk.Now().Add(d); clk.Now().Before(end); clk.Advance(50 * time.Millisecond) {
		for _, key := range keys {
			c := p.Start(Request{Caller: key, Deadline: clk.Now().Add(30 * time.Second), Region: o.pin[key]})
			for {
				a, err := c.Pick()
				if err != nil {
					break
				}
				run.attempts[key]++
				learned := a.Finish(Report{Outcome: serve(key, a.Region)})
				if learned == Success {
					run.ok[key]++
				}
				if learned == CallerFault {
					run.ownFault[key]++
				}
				if !o.retry || !learned.Retryable() {
					break
				}
			}
		}
	}
	return run
}

// blamePool is a PT and two pay-as-you-go regions, judged on 10 answers.
func blamePool() table.Pool {
	tp := pool(provisioned("europe-west1", table.Capacity{RequestsPerSecond: 1000}), shared("europe-west4", 1000), shared("europe-north1", 1000))
	tp.Policy.Ejection.MinRequests = 10
	tp.Policy.Retry = table.Retry{MaxAttempts: 3, BudgetPercent: new(100), MinRetriesPerSecond: new(100)}
	return tp
}

// TestACallerFailingEverywhereFailsItself: one caller's calls fail in every
// region they reach while the other's succeed there. Its failures are its
// own: after the first few, they are not retried and count toward nothing,
// so the PT is never demoted nor a pay-as-you-go region ejected, and the
// other caller keeps the PT. The same failures from a region failing
// everyone (in a pool that served them a moment before, too), from a
// caller alone in the pool, from a caller whose calls fail in one region
// only in a pool with no history, or from one that a third region serves
// are the regions', as they always were.
func TestACallerFailingEverywhereFailsItself(t *testing.T) {
	poison := func(key uint64, _ string) Outcome {
		if key == poisonCaller {
			return Failure
		}
		return Success
	}
	t.Run("poison calls", func(t *testing.T) {
		clk := newClock()
		var logs strings.Builder
		p, err := New(blamePool(), Options{Now: clk.Now, Seed: 1, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		// The pool serves the other caller for an interval first: a
		// neighbor's burst comes into a pool whose regions have a
		// history. (Into a pool with none, the regions' first answers
		// are the burst's alone, and nothing tells its failures apart.)
		runCallers(p, clk, 10*time.Second, []uint64{goodCaller}, poison)
		run := runCallers(p, clk, 20*time.Second, []uint64{goodCaller, poisonCaller}, poison)
		snap := p.Snapshot()
		for _, r := range snap.Regions {
			if r.TimesDemoted > 0 || r.TimesEjected > 0 {
				t.Errorf("%s demoted %d times, ejected %d times by one caller's calls: %+v", r.Name, r.TimesDemoted, r.TimesEjected, r)
			}
		}
		calls := 400 // 20 s at 20 calls a second
		if run.ok[goodCaller] != calls || run.attempts[goodCaller] != calls {
			t.Errorf("the other caller: %d of %d calls served in %d attempts, want all in one each", run.ok[goodCaller], calls, run.attempts[goodCaller])
		}
		callers := p.Snapshot().Callers
		if len(callers) != 1 || !callers[0].Own || callers[0].Caller != fmt.Sprintf("%016x", poisonCaller) || callers[0].Failed == 0 {
			t.Errorf("the snapshot's watched callers: %+v, want the failing caller, its failures its own", callers)
		}
		if n := strings.Count(logs.String(), "its failures are its own"); n != 1 {
			t.Errorf("the caller's judgement logged %d times, want once:\n%s", n, logs.String())
		}
		if run.ownFault[poisonCaller] < calls-10 || run.attempts[poisonCaller] > calls+20 {
			t.Errorf("the failing caller: %d calls its own fault, %d attempts for %d calls; want nearly every call its own fault, with hardly a retry",
				run.ownFault[poisonCaller], run.attempts[poisonCaller], calls)
		}
		// Then the PT goes down for everyone: a caller whose failures
		// were its own excuses no region that fails the others too.
		runCallers(p, clk, 5*time.Second, []uint64{goodCaller, poisonCaller}, func(key uint64, region string) Outcome {
			if region == "europe-west1" {
				return Failure
			}
			return poison(key, region)
		})
		if pt := p.Snapshot().Regions[0]; pt.TimesDemoted == 0 {
			t.Errorf("the PT down for everyone is not demoted: %+v", pt)
		}
	})
	ptDown := func(_ uint64, region string) Outcome {
		if region == "europe-west1" {
			return Failure
		}
		return Success
	}
	// A PT failing 60% of four callers' calls, at random, in a pool that
	// served them: the others are judged on their first attempt since a
	// caller's first failure, which one in 2.5 passes, but each later
	// failure is judged again and the region's failures still count. Over
	// an interval, once the history has left the window, it is demoted.
	t.Run("region failing most calls of four callers, after serving them", func(t *testing.T) {
		rnd := rand.New(rand.NewPCG(1, 2))
		clk := newClock()
		p := mustNew(t, blamePool(), clk)
		four := []uint64{goodCaller, poisonCaller, 0x3333_0003, 0x4444_0004}
		runCallers(p, clk, 10*time.Second, four, func(uint64, string) Outcome { return Success })
		run := runCallers(p, clk, 10*time.Second, four, func(_ uint64, region string) Outcome {
			if region == "europe-west1" && rnd.Float64() < 0.6 {
				return Failure
			}
			return Success
		})
		if pt := p.Snapshot().Regions[0]; pt.TimesDemoted == 0 {
			t.Errorf("the PT failing 60%% of everyone's calls is not demoted: %+v", pt)
		}
		for key, n := range run.ownFault {
			t.Errorf("caller %x: %d failures taken for its own", key, n)
		}
	})
	// A neighbor sending three calls for each of the other's: its retries
	// reach the pay-as-you-go regions three times as fast until the others
	// are judged, and must not eject one meanwhile.
	t.Run("poison calls, three to the other's one", func(t *testing.T) {
		clk := newClock()
		p := mustNew(t, blamePool(), clk)
		runCallers(p, clk, 10*time.Second, []uint64{goodCaller}, poison)
		run := runCallers(p, clk, 20*time.Second, []uint64{goodCaller, poisonCaller, poisonCaller, poisonCaller}, poison)
		for _, r := range p.Snapshot().Regions {
			if r.TimesDemoted > 0 || r.TimesEjected > 0 {
				t.Errorf("%s demoted %d times, ejected %d times by one caller's calls", r.Name, r.TimesDemoted, r.TimesEjected)
			}
		}
		if calls := 400; run.ok[goodCaller] != calls || run.attempts[goodCaller] != calls {
			t.Errorf("the other caller: %d of %d calls served in %d attempts, want all in one each", run.ok[goodCaller], calls, run.attempts[goodCaller])
		}
		if calls := 1200; run.ownFault[poisonCaller] < calls*9/10 {
			t.Errorf("the failing caller: %d of %d calls its own fault, want nearly all", run.ownFault[poisonCaller], calls)
		}
	})
	for _, tc := range []struct {
		name string
		// history: the pool served the callers for an interval before.
		history bool
		keys    []uint64
		serve   func(key uint64, region string) Outcome
	}{
		{"region down for everyone", false, []uint64{goodCaller, poisonCaller}, ptDown},
		// Each caller's own successes of the moment before are in the
		// region's window: they must not pass for the others' (others).
		{"region down for everyone, after serving them", true, []uint64{goodCaller, poisonCaller}, ptDown},
		{"a caller alone", false, []uint64{poisonCaller}, poison},
		// In a pool with no history, nothing tells the caller's failures
		// from the region's: the others are not judged yet.
		{"a caller failing in one region, in a new pool", false, []uint64{goodCaller, poisonCaller}, func(key uint64, region string) Outcome {
			if key == poisonCaller && region == "europe-west1" {
				return Failure
			}
			return Success
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			p := mustNew(t, blamePool(), clk)
			if tc.history {
				runCallers(p, clk, 10*time.Second, tc.keys, func(uint64, string) Outcome { return Success })
			}
			run := runCallers(p, clk, 5*time.Second, tc.keys, tc.serve)
			if pt := p.Snapshot().Regions[0]; pt.TimesDemoted == 0 {
				t.Errorf("the PT is not demoted: its failures were not counted (%+v)", pt)
			}
			for _, key := range tc.keys {
				if n := run.ownFault[key]; n != 0 {
					t.Errorf("caller %x: %d failures taken for its own", key, n)
				}
			}
		})
	}
	// Two regions of three fail what the caller sends (a feature broken
	// where it has rolled out), the third serves it, in a pool with a
	// history: its calls do not fail wherever they go, so its failures
	// are the regions', and its retries go on reaching the region that
	// serves them.
	t.Run("a caller served in one region of three", func(t *testing.T) {
		clk := newClock()
		p := mustNew(t, blamePool(), clk)
		serve := func(key uint64, region string) Outcome {
			if key == poisonCaller && region != "europe-north1" {
				return Failure
			}
			return Success
		}
		runCallers(p, clk, 10*time.Second, []uint64{goodCaller}, serve)
		run := runCallers(p, clk, 20*time.Second, []uint64{goodCaller, poisonCaller}, serve)
		if n := run.ownFault[poisonCaller]; n != 0 {
			t.Errorf("%d of the caller's failures taken for its own, though a region serves its calls", n)
		}
		if calls := 400; run.ok[poisonCaller] < calls-10 {
			t.Errorf("the caller: %d of %d calls served; its retries must reach the region that serves it", run.ok[poisonCaller], calls)
		}
	})
}

// TestUnknownCallersAreNotWatched: calls without a caller key feed every
// failure to the regions, and a pool watches no more than blameSlots
// callers: one that finds no slot free is judged as an unknown one.
func TestUnknownCallersAreNotWatched(t *testing.T) {
	clk := newClock()
	p := mustNew(t, blamePool(), clk)
	r := p.st.Load().slots[0].r
	if o, _ := p.blameCaller(goodCaller, r, Success); o != Success || p.slotOf(goodCaller) >= 0 {
		t.Errorf("a success of a caller not watched: %v, slot %d; want it unwatched", o, p.slotOf(goodCaller))
	}
	for k := uint64(1); k <= 4*blameSlots; k++ {
		p.blameCaller(k<<32|k, r, Failure)
	}
	watched := 0
	for k := uint64(1); k <= 4*blameSlots; k++ {
		if p.slotOf(k<<32|k) >= 0 {
			watched++
		}
	}
	if watched != blameSlots {
		t.Errorf("%d callers watched, want the %d slots full", watched, blameSlots)
	}
	clk.Advance(15 * time.Second) // the slots' counts leave the window
	if o, _ := p.blameCaller(poisonCaller, r, Failure); o != Failure || p.slotOf(poisonCaller) < 0 {
		t.Errorf("after the window: %v, slot %d; want a stale slot given to the new caller", o, p.slotOf(poisonCaller))
	}
}

// TestACallerFailingAloneMovesAway: in a pool that serves its callers, a
// neighbor's calls start failing in the PT alone, which serves the other
// caller, and are served elsewhere (a feature not rolled out there, say).
// Its failures there count toward nothing of the PT's, so the PT is never
// demoted and the other caller keeps it, every call served in one attempt;
// and the neighbor's calls go to the other regions first, served there.
// Most of all where its calls cannot be retried: sessions committed to the
// region of their first attempt (a Live session, a stream Google ends
// midway), three times as many as the other caller's calls, whose failures
// reach no second region, or calls held to the PT (a cached content of the
// neighbor's lives there). Before, they alone demoted the PT for everyone.
// And where the neighbor's sessions fail in the other regions too, its
// failures become its own, there as in the PT.
func TestACallerFailingAloneMovesAway(t *testing.T) {
	const calls = 400 // 20 s at 20 calls a second, each caller
	three := []uint64{goodCaller, poisonCaller, poisonCaller, poisonCaller}
	for _, tc := range []struct {
		name string
		keys []uint64
		opts callsOpts
		// elsewhere is how the neighbor's calls do outside the PT.
		elsewhere Outcome
	}{
		{"calls retried", []uint64{goodCaller, poisonCaller}, callsOpts{retry: true}, Success},
		{"committed sessions", three, callsOpts{}, Success},
		{"committed sessions failing everywhere", three, callsOpts{}, Failure},
		// Held to the PT (its cached content lives there), the
		// neighbor's calls cannot go elsewhere: they fail, and the PT
		// goes on serving the other caller.
		{"calls held to the PT", three, callsOpts{retry: true, pin: map[uint64]string{poisonCaller: "europe-west1"}}, Success},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			var logs strings.Builder
			p, err := New(blamePool(), Options{Now: clk.Now, Seed: 1, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			serve := func(key uint64, region string) Outcome {
				switch {
				case key != poisonCaller:
					return Success
				case region == "europe-west1":
					return Failure
				}
				return tc.elsewhere
			}
			runCallers(p, clk, 10*time.Second, []uint64{goodCaller}, serve)
			run := runCalls(p, clk, 20*time.Second, tc.keys, serve, tc.opts)
			snap := p.Snapshot()
			if pt := snap.Regions[0]; pt.TimesDemoted > 0 {
				t.Errorf("the PT demoted %d times by the neighbor's calls alone: %+v", pt.TimesDemoted, pt)
			}
			if run.ok[goodCaller] != calls || run.attempts[goodCaller] != calls {
				t.Errorf("the other caller: %d of %d calls served in %d attempts, want all in one each", run.ok[goodCaller], calls, run.attempts[goodCaller])
			}
			sent := calls * (len(tc.keys) - 1)
			if tc.elsewhere == Failure {
				// Its failures are its own once they are seen in a
				// second region; nothing is ejected meanwhile.
				for _, r := range snap.Regions {
					if r.TimesEjected > 0 {
						t.Errorf("%s ejected %d times by the neighbor's calls", r.Name, r.TimesEjected)
					}
				}
				if run.ownFault[poisonCaller] < sent*9/10 {
					t.Errorf("the neighbor: %d of %d calls its own fault, want nearly all", run.ownFault[poisonCaller], sent)
				}
				return
			}
			if tc.opts.pin != nil {
				callers := snap.Callers
				if len(callers) != 1 || !slices.Equal(callers[0].FailingAlone, []string{"europe-west1"}) || callers[0].Own {
					t.Errorf("the snapshot's watched callers: %+v, want the neighbor failing alone in the PT", callers)
				}
				return
			}
			// The neighbor's calls go back to the PT once its failures
			// there have left the window, to fail there minRequests
			// times more: about that many an interval (10 s), 3 in 20 s.
			if lost := sent - run.ok[poisonCaller]; (!tc.opts.retry && lost > 3*10+5) || (tc.opts.retry && lost != 0) {
				t.Errorf("the neighbor: %d of %d calls served, in %d attempts", run.ok[poisonCaller], sent, run.attempts[poisonCaller])
			}
			if extra := run.attempts[poisonCaller] - sent; tc.opts.retry && extra > 3*10+5 {
				t.Errorf("the neighbor: %d attempts for %d calls, want its calls to go elsewhere first", run.attempts[poisonCaller], sent)
			}
			if !strings.Contains(logs.String(), "fail in a region that serves the pool's other callers") {
				t.Errorf("no log of the neighbor failing alone in the PT:\n%s", logs.String())
			}
		})
	}
}
