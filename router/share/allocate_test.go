package share

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestAllocate(t *testing.T) {
	peers := func(ds ...float64) []Peer {
		var ps []Peer
		for i, d := range ds {
			ps = append(ps, Peer{ID: fmt.Sprintf("r%d", i), Replicas: len(ds), Demand: d})
		}
		return ps
	}
	for _, tc := range []struct {
		name  string
		peers []Peer
		id    string
		want  float64
		ok    bool
	}{
		{"even demand", peers(10, 10, 10), "r0", 1.0 / 3, true},
		{"70/20/10", peers(70, 20, 10), "r0", 0.7, true},
		{"70/20/10, the smallest", peers(70, 20, 10), "r2", 0.1, true},
		{"no demand splits evenly", peers(0, 0, 0), "r1", 1.0 / 3, true},
		// r2 has no demand: it keeps the floor, 0.1/3 of the weight.
		{"idle replica keeps the floor", peers(50, 50, 0), "r2", (0.1 / 3) / (1 + 0.1/3), true},
		{"absent router takes its static share", peers(1, 1), "r9", 0, false},
		// Two routers published, one counts three replicas: the third
		// keeps its static third, the two share the rest.
		{"a silent replica's share is left to it", []Peer{{ID: "a", Replicas: 3, Demand: 30}, {ID: "b", Replicas: 2, Demand: 10}}, "a", 2.0 / 3 * 0.75, true},
		// c left the epoch holding 0.7: a and b share the 0.3 left.
		{"an absent router's held share is left to it", []Peer{{ID: "a", Replicas: 3, Demand: 20}, {ID: "b", Replicas: 3, Demand: 10}, {ID: "c", Share: 0.7, Absent: true}}, "a", 0.3 * 2 / 3, true},
		{"a held share under the static one leaves the static one", []Peer{{ID: "a", Replicas: 3, Demand: 20}, {ID: "b", Replicas: 3, Demand: 10}, {ID: "c", Share: 0.1, Absent: true}}, "a", 2.0 / 3 * 2 / 3, true},
		// One router of three is missing and two are in the roster: the
		// larger held share is reserved, whichever is still counted.
		{"the largest held shares are reserved", []Peer{{ID: "a", Replicas: 3, Demand: 20}, {ID: "b", Replicas: 3, Demand: 10}, {ID: "c", Share: 0.5, Absent: true}, {ID: "d", Share: 0.2, Absent: true}}, "a", 0.5 * 2 / 3, true},
		{"a held share of a router counted out is not reserved", []Peer{{ID: "a", Replicas: 2, Demand: 20}, {ID: "b", Replicas: 2, Demand: 10}, {ID: "c", Share: 0.7, Absent: true}}, "a", 2.0 / 3, true},
		{"an absent router has no share of its own", []Peer{{ID: "a", Replicas: 2, Demand: 20}, {ID: "c", Share: 0.7, Absent: true}}, "c", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Allocate(tc.peers, tc.id)
			if ok != tc.ok || math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("Allocate = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestAllocateSumsToOne is the invariant the quota rests on: from one
// snapshot, the shares of the routers in it plus the reserves left to the
// others (static shares, or the shares they hold) add up to one, whatever
// the demands, counts and held shares.
func TestAllocateSumsToOne(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		p := 1 + rnd.IntN(8)
		var peers []Peer
		n := p
		// Entries with their counts (some few, where a router without a
		// share holds its equal part), without (an earlier version's), or
		// both in one epoch, as in a rolling upgrade.
		counts := rnd.IntN(3)
		for i := range p {
			c := p + rnd.IntN(3)
			n = max(n, c)
			d := 0.0
			if rnd.IntN(4) > 0 {
				d = rnd.ExpFloat64() * 100
			}
			prev := 0.0
			if rnd.IntN(2) == 0 {
				prev = rnd.Float64() / float64(p)
			}
			pr := Peer{ID: fmt.Sprintf("r%d", i), Replicas: c, Demand: d, Share: prev}
			if counts == 1 || (counts == 2 && rnd.IntN(2) == 0) {
				pr.Calls, pr.Counted = uint64(rnd.IntN(50)), true
			}
			peers = append(peers, pr)
		}
		// Held shares of up to 1.2/n: with n-p of them reserved at most,
		// they leave the present routers more than their floor.
		for i := range rnd.IntN(4) {
			peers = append(peers, Peer{ID: fmt.Sprintf("gone%d", i), Share: rnd.Float64() * 1.2 / float64(n), Absent: true})
		}
		present, _, part, reserves := split(peers)
		sum := 0.0
		for _, r := range reserves {
			sum += r
		}
		if len(reserves) != n-p || math.Abs(part+sum-1) > 1e-9 {
			t.Fatalf("%+v: reserves %v for %d absent of %d, and %v for the present", peers, reserves, n-p, n, part)
		}
		byDemand := demandShares(present, part)
		for i, pr := range peers[:p] {
			s, ok := Allocate(peers, pr.ID)
			if !ok || s <= 0 {
				t.Fatalf("router %s of %+v got %v, %v", pr.ID, peers, s, ok)
			}
			// Sticky shares may be under the floor: it binds a new share.
			if a := byDemand[i]; a < Floor/float64(p)*part/(1+Floor)*0.999 {
				t.Fatalf("router %s of %+v got %v, under the floor", pr.ID, peers, a)
			}
			sum += s
		}
		if sum > 1+1e-9 || (kept(present, part, byDemand) == nil && math.Abs(sum-1) > 1e-9) {
			t.Fatalf("shares of %+v add up to %v", peers, sum)
		}
	}
}

// TestPartCallsAddUp: the routers of one snapshot hand out the whole calls of
// a region by largest remainder: together with the absent routers' reserves,
// rounded down (static shares) or up (held shares, the most their routers
// take), they take at most the floor of the region's calls (the routers in
// the snapshot none when the reserves take it all), exactly that where no
// router holds a share, and none of them takes more than its share rounded
// up.
func TestPartCallsAddUp(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	for range 5000 {
		p := 1 + rnd.IntN(6)
		n := p + rnd.IntN(3)
		var peers []Peer
		for i := range p {
			peers = append(peers, Peer{ID: fmt.Sprintf("r%d", i), Replicas: n, Demand: rnd.ExpFloat64() * 10})
		}
		for i := range rnd.IntN(3) {
			peers = append(peers, Peer{ID: fmt.Sprintf("gone%d", i), Share: rnd.Float64() * 1.5 / float64(n), Absent: true})
		}
		_, _, part, reserves := split(peers)
		own, _ := DemandPart(peers, "r0")
		k := rnd.Float64() * 30
		total := 0.0
		for i, r := range reserves {
			if k < 1 {
				break // below one call the parts are paced, not counted
			}
			if i < own.rostered {
				total += math.Ceil(k*r - 1e-9)
			} else {
				total += floor(k * r)
			}
		}
		reserved := total
		for _, pr := range peers[:p] {
			part, ok := DemandPart(peers, pr.ID)
			if !ok {
				t.Fatal("router missing from its own snapshot")
			}
			c := part.Calls(k)
			if k >= 1 && c > math.Ceil(k*part.Share)+float64(n-p)+1e-9 {
				t.Fatalf("router %s of %+v takes %v of %v calls with share %v", pr.ID, peers, c, k, part.Share)
			}
			total += c
		}
		want := floor(k)
		if k < 1 {
			want = k * part
		}
		if total > max(want, reserved)+1e-9 || (own.rostered == 0 && math.Abs(total-want) > 1e-9) {
			t.Fatalf("%d routers of %d, %+v: %v calls of %v handed out, want %v", p, n, peers, total, k, want)
		}
	}
}

// TestAllocateSticky: routers keep the shares they took while their demand
// shares stay within the band, and all take new ones when one leaves it.
func TestAllocateSticky(t *testing.T) {
	peers := []Peer{{ID: "a", Replicas: 3, Demand: 36, Share: 1.0 / 3}, {ID: "b", Replicas: 3, Demand: 31, Share: 1.0 / 3}, {ID: "c", Replicas: 3, Demand: 33, Share: 1.0 / 3}}
	if s, _ := Allocate(peers, "a"); s != 1.0/3 {
		t.Errorf("noise of 3 points moved a's share to %v, want it kept at 1/3", s)
	}
	peers[0].Demand = 80 // a's clients grew: 80 of 144
	if s, _ := Allocate(peers, "a"); math.Abs(s-80.0/144) > 1e-9 {
		t.Errorf("a's demand share went to 0.56: share %v, want 0.56", s)
	}
	if s, _ := Allocate(peers, "b"); math.Abs(s-31.0/144) > 1e-9 {
		t.Errorf("b's share %v, want 31/144: every router moves together", s)
	}
}

func TestPartCalls(t *testing.T) {
	even := []Peer{{ID: "a", Replicas: 3, Demand: 1}, {ID: "b", Replicas: 3, Demand: 1}, {ID: "c", Replicas: 3, Demand: 1}}
	var got []float64
	for _, id := range []string{"a", "b", "c"} {
		p, _ := DemandPart(even, id)
		got = append(got, p.Calls(5))
	}
	if fmt.Sprint(got) != "[2 2 1]" {
		t.Errorf("5 calls over 3 even routers: %v, want [2 2 1]", got)
	}
	if c := StaticPart(3).Calls(5); c != 1 {
		t.Errorf("a static third of 5 calls: %v, want 1 (rounded down: no ranks)", c)
	}
	if c := StaticPart(3).Calls(0.6); math.Abs(c-0.2) > 1e-12 {
		t.Errorf("a static third of 0.6 calls: %v, want 0.2, paced", c)
	}
}

// TestSharesMoveOnEvidence: routers that count their calls keep the equal
// split until the counts tell their demands apart, and take shares by
// demand once they do; in an epoch where any entry carries no count (an
// earlier version's), every router takes shares as that version does.
func TestSharesMoveOnEvidence(t *testing.T) {
	epoch := func(calls []uint64, counted bool) []Peer {
		var ps []Peer
		for i, n := range calls {
			ps = append(ps, Peer{ID: fmt.Sprintf("r%d", i), Replicas: len(calls), Demand: float64(n) / 10, Calls: n, Counted: counted})
		}
		return ps
	}
	shares := func(ps []Peer) []float64 {
		var out []float64
		for _, p := range ps {
			s, _ := Allocate(ps, p.ID)
			out = append(out, math.Round(s*1000)/1000)
		}
		return out
	}
	// Six calls in the first moments of three routers: 4, 1 and 1.
	if got := shares(epoch([]uint64{4, 1, 1}, true)); fmt.Sprint(got) != "[0.333 0.333 0.333]" {
		t.Errorf("six calls split 4/1/1: shares %v, want the equal split", got)
	}
	// The same split of 600 calls is evidence.
	if got := shares(epoch([]uint64{400, 100, 100}, true)); fmt.Sprint(got) != "[0.667 0.167 0.167]" {
		t.Errorf("600 calls split 4/1/1: shares %v, want 0.667/0.167/0.167", got)
	}
	// An earlier version's entries: shares by demand, whatever the counts.
	if got := shares(epoch([]uint64{4, 1, 1}, false)); fmt.Sprint(got) != "[0.667 0.167 0.167]" {
		t.Errorf("six calls without counts: shares %v, want them by demand", got)
	}
	mixed := epoch([]uint64{4, 1, 1}, true)
	mixed[2].Counted = false
	if got := shares(mixed); fmt.Sprint(got) != "[0.667 0.167 0.167]" {
		t.Errorf("one earlier version's entry among counted ones: shares %v, want them by demand, as it takes them", got)
	}
	// Shares in force are kept through a move the counts do not support
	// (0.47 against 1/3 on 60 calls: about two standard errors), and
	// dropped for the same move on 6,000.
	held := func(calls []uint64) []Peer {
		ps := epoch(calls, true)
		for i := range ps {
			ps[i].Share = 1.0 / 3
		}
		return ps
	}
	if got := shares(held([]uint64{28, 20, 12})); fmt.Sprint(got) != "[0.333 0.333 0.333]" {
		t.Errorf("60 calls split 28/20/12: shares %v, want the ones in force", got)
	}
	if got := shares(held([]uint64{2800, 2000, 1200})); fmt.Sprint(got) != "[0.467 0.333 0.2]" {
		t.Errorf("6,000 calls split 28/20/12: shares %v, want them by demand", got)
	}
}

// TestCountingNoiseKeepsTheShares: routers whose clients call at the same
// rate, from half a call a second to fifty, keep the equal split through
// the Poisson noise of their counts; each test here is a fresh draw, harsher
// than the overlapping windows of successive epochs. By the band alone (an
// earlier version's rule) the noise of a quiet pool moves the shares most
// of the time.
func TestCountingNoiseKeepsTheShares(t *testing.T) {
	rnd := rand.New(rand.NewPCG(5, 6))
	poisson := func(mean float64) uint64 {
		// Knuth's method, in steps of at most 30 so exp does not underflow.
		var n uint64
		for mean > 0 {
			step := min(mean, 30)
			mean -= step
			l, p := math.Exp(-step), 1.0
			for {
				p *= rnd.Float64()
				if p <= l {
					break
				}
				n++
			}
		}
		return n
	}
	for _, rate := range []float64{0.5, 2, 10, 50} {
		moved, movedByBand := 0, 0
		const tests = 2000
		for range tests {
			var ps []Peer
			for i := range 3 {
				n := poisson(rate * DemandWindow.Seconds())
				ps = append(ps, Peer{ID: fmt.Sprintf("r%d", i), Replicas: 3, Demand: float64(n) / DemandWindow.Seconds(), Share: 1.0 / 3, Calls: n, Counted: true})
			}
			if s, _ := Allocate(ps, "r0"); s != 1.0/3 {
				moved++
			}
			for i := range ps {
				ps[i].Counted = false
			}
			if s, _ := Allocate(ps, "r0"); s != 1.0/3 {
				movedByBand++
			}
		}
		if moved > tests/100 {
			t.Errorf("%v calls a second each: counting noise moved the shares in %d of %d epochs, want at most 1%%", rate, moved, tests)
		}
		t.Logf("%v calls a second each: shares moved in %d of %d epochs (by the band alone %d)", rate, moved, tests, movedByBand)
	}
}

// demandShareOf is router id's share of one epoch by demand alone, whatever
// shares are in force (0 when it has no entry).
func demandShareOf(peers []Peer, id string) float64 {
	present, _, part, _ := split(peers)
	for i, s := range demandShares(present, part) {
		if present[i].ID == id {
			return s
		}
	}
	return 0
}

// TestLastingMoveIsFollowed: counting over a PT's 40 s window and moving on
// evidence must not keep the shares from following a client that really
// moves. Three routers with 6 calls a second each for a minute; then the
// third router's client moves to the first (12, 6 and none a second, as
// when a router is drained and its connections go elsewhere). Exchanging
// every 250 ms, the first router's share starts to follow within half the
// window, and comes within Band of its final demand share (where the shares
// stay) within the window and one exchange: the time its demand takes to be
// counted in full.
func TestLastingMoveIsFollowed(t *testing.T) {
	const window = 40 * time.Second
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ds := []*Demand{NewDemand(window), NewDemand(window), NewDemand(window)}
	rates := []float64{6, 6, 6}
	next := []time.Duration{0, 0, 0}
	taken := []float64{0, 0, 0}
	final := 0.0
	var moved, reached time.Duration
	for at := time.Duration(0); at < 3*time.Minute; at += 250 * time.Millisecond {
		if at == time.Minute {
			rates = []float64{12, 6, 0}
			final = demandShareOf([]Peer{{ID: "a", Replicas: 3, Demand: 12}, {ID: "b", Replicas: 3, Demand: 6}, {ID: "c", Replicas: 3, Demand: 0}}, "a")
		}
		for i, d := range ds {
			for ; rates[i] > 0 && next[i] < at; next[i] += time.Duration(float64(time.Second) / rates[i]) {
				d.Add(t0.Add(next[i]).UnixNano())
			}
			if rates[i] == 0 {
				next[i] = at
			}
		}
		var peers []Peer
		for i, d := range ds {
			rate, calls := d.Sample(t0.Add(at).UnixNano())
			peers = append(peers, Peer{ID: string(rune('a' + i)), Replicas: 3, Demand: rate, Share: taken[i], Calls: calls, Counted: true})
		}
		for i, p := range peers {
			taken[i], _ = Allocate(peers, p.ID)
		}
		if at < time.Minute {
			if math.Abs(taken[0]-1.0/3) > 1e-9 {
				t.Fatalf("at %s, before the move, a's share is %v, want the equal split", at, taken[0])
			}
			continue
		}
		if moved == 0 && taken[0] > 1.0/3+1e-9 {
			moved = at - time.Minute
		}
		if reached == 0 && math.Abs(taken[0]-final) <= Band(final) {
			reached = at - time.Minute
		}
	}
	t.Logf("a's share followed its client %s after the move, and came within Band of %.3f (%.3f) %s after it", moved, final, taken[0], reached)
	if moved == 0 || moved > window/2 {
		t.Errorf("a's share first moved %s after its client arrived, want within %s", moved, window/2)
	}
	if reached == 0 || reached > window+250*time.Millisecond {
		t.Errorf("a's share came within Band of its demand share %.3f %s after the move (0: never), want within %s", final, reached, window+250*time.Millisecond)
	}
}
