package policy

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/regionwarden/regionwarden/internal/clocktest"
	"github.com/regionwarden/regionwarden/router/table"
)

// TestPTKeepsItsPaceWhileQuotasHaveRoom: under a load of three times a PT's
// rate (a 2-GSU order of 10 calls a second, metered over 40 s), with a
// pay-as-you-go quota that has room for the rest, the PT takes the burst
// its window holds, and once its window has filled it takes its rate,
// evenly: in every window after the first, between 92.5% and 102.5% of
// what it holds, and in every 10 s at least 75 calls, never all the calls
// for a while and none after (pace.go). With the quota gone, the same PT
// takes its window at once and then what leaves it.
func TestPTKeepsItsPaceWhileQuotasHaveRoom(t *testing.T) {
	const tokens = 100 // ptUnderLoad's: 10 calls a second
	for _, tc := range []struct {
		name     string
		payGo    float64 // the quota's calls a second
		min10    int     // the PT's calls in each 10 s after the first 40 s, at least
		min, max int     // the PT's calls in each later 40 s
	}{
		{"quota with room", 100, 75, 370, 410},
		{"quota full", 0.001, 0, 0, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, clk := ptUnderLoad(t, 2, tc.payGo)
			var per [40]int        // the PT's calls in each 10 s
			for i := range 12000 { // 30 calls a second for 400 s
				c := p.Start(Request{Deadline: clk.Now().Add(30 * time.Second)})
				if a, err := c.Pick(); err == nil {
					if a.Tier == table.TierProvisioned {
						per[i/300]++
					}
					a.DoneTokens(Success, tokens)
				}
				clk.Advance(time.Second / 30)
			}
			if !p.Snapshot().Regions[0].ProvisionedPaced {
				t.Error("snapshot's provisionedPaced false, want true: the PT's window filled")
			}
			if got := per[0] + per[1]; got < 400 {
				t.Errorf("the PT took %d calls in the first 20 s, want its window, 400: %v", got, per)
			}
			for k := 4; k < len(per); k++ {
				if per[k] < tc.min10 {
					t.Errorf("the PT took %d calls in the %d-th 10 s, want at least %d: %v", per[k], k+1, tc.min10, per)
					break
				}
			}
			for k := 4; k+4 <= len(per); k += 4 {
				if w := per[k] + per[k+1] + per[k+2] + per[k+3]; w < tc.min || w > tc.max {
					t.Errorf("the PT took %d calls in the %d-th 40 s, want %d to %d: %v", w, k/4+1, tc.min, tc.max, per)
					break
				}
			}
		})
	}
}

// ptUnderLoad is a PT of gsus GSUs and 10 calls a second (1,000 tokens a
// second, 100 a call, which it has learned) beside a quota of quota calls a
// second, an hour after its last call.
func ptUnderLoad(t *testing.T, gsus int64, quota float64) (*Pool, *clocktest.Clock) {
	return ptUnderLoadWith(t, gsus, quota, func(*table.Pool) {})
}

// ptUnderLoadWith is ptUnderLoad with the pool changed by edit first.
func ptUnderLoadWith(t *testing.T, gsus int64, quota float64, edit func(*table.Pool)) (*Pool, *clocktest.Clock) {
	clk := newClock()
	tp := pool(
		provisioned("europe-west1", table.Capacity{GSUs: gsus, TokensPerSecond: 1000}),
		shared("europe-west4", quota),
	)
	edit(&tp)
	p := mustNew(t, tp, clk)
	burstToPT(t, p, clk, 1, 100)
	clk.Advance(time.Hour)
	return p, clk
}

// sendToPT sends calls for d, gap apart, each a success of 100 tokens at
// once, and counts those the PT took; paced says the PT was held to its
// pace at some call.
func sendToPT(t *testing.T, p *Pool, clk *clocktest.Clock, d time.Duration, gap func() time.Duration) (pt, all int, paced bool) {
	t.Helper()
	return sendToFailingPT(t, p, clk, d, gap, false)
}

// sendToFailingPT is sendToPT, where the PT fails every call it takes when
// fails is set.
func sendToFailingPT(t *testing.T, p *Pool, clk *clocktest.Clock, d time.Duration, gap func() time.Duration, fails bool) (pt, all int, paced bool) {
	t.Helper()
	for end := clk.Now().Add(d); clk.Now().Before(end); clk.Advance(gap()) {
		c := p.Start(Request{Deadline: clk.Now().Add(30 * time.Second)})
		a, err := c.Pick()
		if err != nil {
			t.Fatal(err)
		}
		all++
		switch {
		case a.Tier != table.TierProvisioned:
			a.DoneTokens(Success, 100)
		case fails:
			a.Done(Failure)
		default:
			pt++
			a.DoneTokens(Success, 100)
		}
		paced = paced || p.Snapshot().Regions[0].ProvisionedPaced
	}
	return pt, all, paced
}

// poisson draws gaps between calls arriving at random, perSecond a second
// on average, from a seeded source.
func poisson(perSecond float64) func() time.Duration {
	rnd := rand.New(rand.NewPCG(1, 2))
	return func() time.Duration { return time.Duration(rnd.ExpFloat64() * float64(time.Second) / perSecond) }
}

// TestPacedPTKeepsALoadUnderItsRate: after an overload has held a PT to its
// pace, a load at 80% of its rate, arriving at random (Poisson, seeded),
// goes to the PT, not to the quota that has room: the pace passes a PT
// over only while it has taken more than its rate over the last tenth of
// its window, which such a load rarely does, so it costs nothing in
// pay-as-you-go once the overload is over.
func TestPacedPTKeepsALoadUnderItsRate(t *testing.T) {
	p, clk := ptUnderLoad(t, 2, 100)
	sendToPT(t, p, clk, 60*time.Second, func() time.Duration { return time.Second / 30 }) // three times its rate
	if !p.Snapshot().Regions[0].ProvisionedPaced {
		t.Fatal("the overload did not hold the PT to its pace: the shape is not the one under test")
	}
	gap := poisson(8)
	sendToPT(t, p, clk, 60*time.Second, gap)
	pt, all, _ := sendToPT(t, p, clk, 200*time.Second, gap)
	t.Logf("%d of %d calls at 8 a second to the PT", pt, all)
	if pt < all*97/100 {
		t.Errorf("after the overload, the PT took %d of %d calls at 80%% of its rate, want at least 97%%", pt, all)
	}
}

// TestPaceLapsesUnderItsRate: a load under a PT's rate fills a short window
// now and then on its own fluctuations (a 12-GSU order is metered over 5 s:
// 50 calls here), and each fill holds the PT to its pace for a window. The
// pace lasts a window from the last fill, not from the last call it passed
// over: renewed by each call it passed over, it held the PT to its pace for
// as long as the fluctuations above its rate over a tenth of its window (5
// calls) kept coming, which a load at 90% of its rate does without end, and
// 16.4% of the calls went to pay-as-you-go, where a greedy PT sends 5.7%.
func TestPaceLapsesUnderItsRate(t *testing.T) {
	p, clk := ptUnderLoad(t, 12, 100)
	pt, all, paced := sendToPT(t, p, clk, 600*time.Second, poisson(9))
	t.Logf("%d of %d calls at 9 a second to the PT", pt, all)
	if !paced {
		t.Fatal("the window never filled: the shape is not the one under test")
	}
	if pt < all*90/100 {
		t.Errorf("the PT took %d of %d calls at 90%% of its rate, want at least 90%%", pt, all)
	}
}

// TestGoogleFullStartsThePace: Google saying the PT is full (another
// cluster's routers took the order's window) starts the pace as the
// router's own meter refusing a call does, though this router's share of
// the window has room; and with no fill since, the pace lapses a window
// later.
func TestGoogleFullStartsThePace(t *testing.T) {
	p, clk := ptUnderLoad(t, 2, 100)
	c := p.Start(Request{})
	a, err := c.Pick()
	if err != nil || a.Tier != table.TierProvisioned {
		t.Fatalf("first pick %+v, %v: want the PT", a, err)
	}
	a.Done(ProvisionedFull)
	rs := p.Snapshot().Regions[0]
	if !rs.ProvisionedPaced {
		t.Error("after Google said the PT is full, provisionedPaced false, want true")
	}
	if rs.ProvisionedWindowUsed > 0.05 {
		t.Fatalf("this router's window is %.3f used: the shape (another cluster filled it) is not the one under test", rs.ProvisionedWindowUsed)
	}
	clk.Advance(rs.ProvisionedWindow.Duration + time.Millisecond)
	if p.Snapshot().Regions[0].ProvisionedPaced {
		t.Errorf("a window (%s) after the only fill, provisionedPaced true, want false", rs.ProvisionedWindow)
	}
}

// TestPacedPTOverflowsFirst: a PT called in spillover mode, under a load of
// three times its rate, beside a quota that has no room. Once its window
// has filled, what it takes over its pace goes first to its location's
// standard pay-as-you-go, its overflow (which answers every call here), and
// the PT takes its rate, evenly: in each 10 s after the first 40 s between
// 75 and 105 calls of its 100. Ranked after the PT's pace instead, the
// overflow was sent only what a full window refused: the PT took every call
// until its window filled again and none until the calls in it aged out.
func TestPacedPTOverflowsFirst(t *testing.T) {
	p, clk := ptUnderLoad(t, 2, 0.001)
	var pt, overflow [40]int // each 10 s
	for i := range 12000 {   // 30 calls a second for 400 s
		c := p.Start(Request{Deadline: clk.Now().Add(30 * time.Second)})
		a, err := c.Pick()
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case a.Tier == table.TierProvisioned:
			pt[i/300]++
		case a.Region == "europe-west1":
			overflow[i/300]++
		}
		a.DoneTokens(Success, 100)
		clk.Advance(time.Second / 30)
	}
	for k := 4; k < len(pt); k++ {
		if pt[k] < 75 || pt[k] > 105 {
			t.Fatalf("the PT took %d calls in the %d-th 10 s, want 75 to 105 (its rate, evenly)\nPT:       %v\noverflow: %v", pt[k], k+1, pt, overflow)
		}
	}
}

// TestPacedPTWhenItsOverflowRefuses: the same PT and load, its location's
// pay-as-you-go refusing every call (429: Google's shared pool has no room;
// or 503). Ranked before the paced PT, the overflow costs the PT nothing:
// its throttle turns calls away from it, those it lets through spill at once
// to the PT, and the PT still takes its whole window in every window after
// the first (at least 370 of 400 calls), never demoted for its location's
// pay-as-you-go.
//
// With no retry budget at all, the same holds of the 429s: a 429 of the
// overflow (its location's pay-as-you-go, another quota) says nothing of
// the PT's own window, so a call sent to the overflow while the PT was only
// ahead of its pace spills to the PT, outside the budget, as to any
// capacity it has not tried. Taken for the whole region, the overflow's 429
// left the call only the budget's way back to the PT, and with none no call
// got there after the overflow's 429.
func TestPacedPTWhenItsOverflowRefuses(t *testing.T) {
	for _, tc := range []struct {
		refusal  Outcome
		noBudget bool
	}{{Capacity, false}, {Failure, false}, {Capacity, true}} {
		t.Run(fmt.Sprintf("%s, no budget %v", tc.refusal, tc.noBudget), func(t *testing.T) {
			p, clk := ptUnderLoadWith(t, 2, 0.001, func(tp *table.Pool) {
				if tc.noBudget {
					tp.Policy.Retry.BudgetPercent, tp.Policy.Retry.MinRetriesPerSecond = new(0), new(0)
				}
			})
			var pt, spilled [10]int // each 40 s; spilled: after the overflow refused the call
			for i := range 12000 {
				c := p.Start(Request{Deadline: clk.Now().Add(30 * time.Second)})
				for n := 0; ; n++ {
					a, err := c.Pick()
					if err != nil {
						break
					}
					if a.Tier == table.TierProvisioned {
						pt[i/1200]++
						if n > 0 {
							spilled[i/1200]++
						}
						a.DoneTokens(Success, 100)
						break
					}
					a.Done(tc.refusal)
				}
				clk.Advance(time.Second / 30)
			}
			for k := 1; k < len(pt); k++ {
				if pt[k] < 370 {
					t.Fatalf("the PT took %d calls in the %d-th 40 s, want at least 370 of its 400: %v", pt[k], k+1, pt)
				}
			}
			t.Logf("PT per 40 s: %v, of them after the overflow refused them: %v", pt, spilled)
			if spilled == [10]int{} {
				t.Fatalf("no call went to the PT after its overflow refused it (PT: %v)", pt)
			}
			if d := p.Snapshot().Regions[0].Demotion; d != nil {
				t.Errorf("the PT's region demoted for its overflow's refusals: %+v", d)
			}
		})
	}
}

// TestPaceOutlastsADemotion: a PT held to its pace (a 2-GSU order of 10
// calls a second under 30 a second, a quota with room beside it) fails
// every call for 60 s, longer than its 40-s window, and is demoted; it
// then answers again and is restored. It comes back held to its pace,
// taking about its rate while the quota has room (at most 150 of the 300
// calls of its first 10 s back), not its whole empty window at once and
// then nothing while those calls age out. A demoted PT's window cannot
// fill, so the pace lapsing while it was out says nothing of the load.
func TestPaceOutlastsADemotion(t *testing.T) {
	p, clk := ptUnderLoad(t, 2, 100)
	gap := func() time.Duration { return time.Second / 30 }
	if _, _, paced := sendToPT(t, p, clk, 60*time.Second, gap); !paced {
		t.Fatal("the overload did not hold the PT to its pace: the shape is not the one under test")
	}
	sendToFailingPT(t, p, clk, 60*time.Second, gap, true)
	if p.Snapshot().Regions[0].Demotion == nil {
		t.Fatal("the PT failing every call was not demoted: the shape is not the one under test")
	}
	for i := 0; p.Snapshot().Regions[0].Demotion != nil; i++ {
		if i == 600 {
			t.Fatal("the PT answering every call was not restored within 20 s")
		}
		sendToPT(t, p, clk, gap(), gap)
	}
	if !p.Snapshot().Regions[0].ProvisionedPaced {
		t.Error("restored, the PT is not held to its pace")
	}
	if pt, all, _ := sendToPT(t, p, clk, 10*time.Second, gap); pt > 150 {
		t.Errorf("in its first 10 s back the PT took %d of %d calls, want at most 150 (its rate, 100, and a tenth of its window)", pt, all)
	}
}
