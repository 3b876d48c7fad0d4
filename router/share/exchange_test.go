package share

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/regionwarden/regionwarden/internal/proxytest"
	"github.com/regionwarden/regionwarden/internal/redisserver"
	"github.com/regionwarden/regionwarden/internal/waittest"
	"github.com/regionwarden/regionwarden/router/table"
)

// TestExchangeSnapshotIsShared has three routers exchange through a real
// Redis server: every one of them reads the same closed epoch, and the
// shares they compute from it add up to one.
func TestExchangeSnapshotIsShared(t *testing.T) {
	srv := redisserver.ForTest(t)
	ctx := context.Background()
	var xs []*Exchange
	for _, id := range []string{"a", "b", "c"} {
		x, err := NewExchange(ExchangeOptions{URL: srv.URL(), ID: id, Epoch: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = x.Close() })
		xs = append(xs, x)
	}
	demand := []float64{70, 20, 10}
	// Publish for a few epochs, then compare what each read last.
	var last [3][]Peer
	for range 8 {
		for i, x := range xs {
			got, err := x.Exchange(ctx, 3, map[string]Entry{"p/google/m": {Demand: demand[i], Calls: uint64(10 * demand[i])}})
			if err != nil {
				t.Fatal(err)
			}
			last[i] = got["p/google/m"]
		}
		time.Sleep(100 * time.Millisecond)
	}
	sum := 0.0
	for i, x := range xs {
		s, ok := Allocate(last[i], x.ID())
		if !ok {
			t.Fatalf("router %s is not in the epoch it read: %v", x.ID(), last[i])
		}
		if math.Abs(s-demand[i]/100) > 1e-9 {
			t.Errorf("router %s: share %v, want %v", x.ID(), s, demand[i]/100)
		}
		sum += s
	}
	if math.Abs(sum-1) > 1e-9 {
		t.Errorf("shares add up to %v", sum)
	}
}

// TestDemandShareAndStoreLoss runs three controllers exchanging through a
// real Redis server, with calls split 70/20/10: their shares follow the
// split and never add up to more than one. Then the server is killed: each
// router holds the share its last epochs gave it, the busiest keeping most
// of its 70%, for Hold, and then is back on its static third within MaxAge
// and an exchange (a shrinking share), or that plus the grow delay (a
// growing one); the shares add up to at most one throughout.
func TestDemandShareAndStoreLoss(t *testing.T) {
	srv := redisserver.ForTest(t)
	const (
		interval = 50 * time.Millisecond
		maxAge   = 150 * time.Millisecond
		grow     = 300 * time.Millisecond
		hold     = time.Second
	)
	pool := testPool()
	key := pool.Key()
	var cs []*Controller
	var as []*applied
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for _, id := range []string{"a", "b", "c"} {
		x, err := NewExchange(ExchangeOptions{URL: srv.URL(), ID: id, Epoch: 2 * interval})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = x.Close() })
		a := &applied{}
		as = append(as, a)
		c := New(Options{Apply: a.apply, Replicas: Static(3), Store: x, Interval: interval, MaxAge: maxAge, GrowDelay: grow, Hold: hold})
		if err := c.SetTable(&table.Table{Version: table.Version, Pools: []table.Pool{pool}}); err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
		wg.Add(1)
		go func() { defer wg.Done(); _ = c.Run(ctx) }()
	}
	// Calls split 70/20/10.
	load, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	drive(load, &wg, key, cs, 7, 2, 1)
	shares := func() []float64 {
		var out []float64
		for _, c := range cs {
			out = append(out, c.Shares()[0].Share)
		}
		return out
	}
	// calls is what the three routers may send europe-west4 (6 calls a
	// second) together: 70/20/10 of it is 4.2, 1.2 and 0.6, handed out as
	// 4, 1 and 1 by largest remainder.
	// A router left no whole call of a region meters minRate there, a call
	// in a million seconds: it counts as none (with shares such as 0.73,
	// 0.21 and 0.06, the calls are 5, 1 and 0).
	calls := func() float64 {
		var sum float64
		for _, a := range as {
			if r := a.rps(); r > minRate {
				sum += r
			}
		}
		return sum
	}
	// A router keeps the share it took while its demand share stays within
	// Band of it, so that a share does not move with every epoch's noise: an
	// epoch that measured one router's demand in a stall of the load (a
	// loaded machine) can leave the shares anywhere in that band, such as
	// 0.784, 0.144 and 0.072 once. Following the split is being within it.
	want := []float64{0.7, 0.2, 0.1}
	worst := 0.0
	waittest.For(t, 5*time.Second, func() string {
		return fmt.Sprintf("shares %v after 5s, want each within Band of 0.7, 0.2, 0.1 (sources %+v)", shares(), cs[0].Shares())
	}, func() bool {
		s := shares()
		worst = max(worst, s[0]+s[1]+s[2])
		for i := range s {
			if math.Abs(s[i]-want[i]) > Band(s[i]) {
				return false
			}
		}
		return true
	})
	for range 50 {
		s := shares()
		worst = max(worst, s[0]+s[1]+s[2])
		time.Sleep(10 * time.Millisecond)
	}
	if worst > 1+1e-9 {
		t.Errorf("the shares added up to %v at worst", worst)
	}
	t.Logf("demand shares %v (sum at worst %.4f), source %q", shares(), worst, cs[0].Shares()[0].Source)

	if got := calls(); got != 6 {
		t.Errorf("the routers may send europe-west4 %v calls a second together, want its 6", got)
	}
	before := shares()[0]
	killed := time.Now()
	srv.Kill()
	var shrunk, all time.Duration
	worst, least := 0.0, 1.0
	mostCalls, leastCalls := 0.0, 6.0
	for {
		s := shares()
		since := time.Since(killed)
		worst = max(worst, s[0]+s[1]+s[2])
		mostCalls = max(mostCalls, calls())
		if since > maxAge+2*interval && since < hold-interval {
			least = min(least, s[0])
			leastCalls = min(leastCalls, calls())
		}
		if shrunk == 0 && math.Abs(s[0]-1.0/3) < 1e-9 {
			shrunk = since
		}
		if math.Abs(s[0]-1.0/3)+math.Abs(s[1]-1.0/3)+math.Abs(s[2]-1.0/3) < 1e-9 {
			all = since
			break
		}
		if since > hold+5*time.Second {
			t.Fatalf("shares %v %v after the store was killed, want a third each", s, since)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("store killed: the busiest router held at least %.4f, went to its static share after %v, every router after %v; sum at worst %.4f", least, shrunk, all, worst)
	if least < before-0.1 {
		t.Errorf("the busiest router held %v while the store was gone, want about the %v it had", least, before)
	}
	// Held in the places of their last epochs, the routers keep every whole
	// call; rounding each held part down would leave one of the six.
	if leastCalls != 6 || mostCalls > 6 {
		t.Errorf("the routers may send europe-west4 from %v to %v calls a second together while the store is gone, want 6", leastCalls, mostCalls)
	}
	if shrunk < hold-2*interval || shrunk > hold+3*interval {
		t.Errorf("the busiest router went to its static share %v after the store died, want after the hold, %v, within %v", shrunk, hold, hold+3*interval)
	}
	if worst > 1+1e-9 {
		t.Errorf("the shares added up to %v at worst after the store died", worst)
	}
	if src := cs[0].Shares()[0]; src.StoreError == "" {
		t.Errorf("no store error shown after the store died: %+v", src)
	}
}

// TestHeldShareEndsWhenTheCountMoves: two routers split 80/20 hold their
// shares when the store dies, until a third router is counted: it knows no
// epoch and takes its static third, so the two take theirs too, the busiest
// at once.
func TestHeldShareEndsWhenTheCountMoves(t *testing.T) {
	srv := redisserver.ForTest(t)
	ns := []*counter{{}, {}}
	cs, _ := twoRouters(t, srv.URL(), testPool(), func(i int) Options {
		ns[i].n.Store(2)
		return Options{Replicas: ns[i]}
	})
	share := func(i int) float64 { return cs[i].Shares()[0].Share }
	waitFor := func(what string, within time.Duration, ok func() bool) {
		t.Helper()
		waittest.For(t, within, func() string {
			return fmt.Sprintf("%s: not within %v (shares %v and %v; %s)", what, within, share(0), share(1), cs[0].Shares()[0].Source)
		}, ok)
	}
	waitFor("shares follow the 80/20 split", 5*time.Second, func() bool { return math.Abs(share(0)-0.8) < 0.05 })
	srv.Kill()
	waitFor("the busiest holds its share", 2*time.Second, func() bool {
		return strings.HasPrefix(cs[0].Shares()[0].Source, "held")
	})
	if s := share(0); s < 0.7 {
		t.Fatalf("the busiest router holds %v, want about 0.8", s)
	}
	moved := time.Now()
	for _, n := range ns {
		n.n.Store(3)
	}
	cs[0].Changed()
	cs[1].Changed()
	waitFor("the busiest takes its static third", 3*twoInterval, func() bool { return math.Abs(share(0)-1.0/3) < 1e-9 })
	waitFor("the other takes its static third", 6*twoInterval+3*twoInterval, func() bool { return math.Abs(share(1)-1.0/3) < 1e-9 })
	t.Logf("count moved: both on their static third after %v", time.Since(moved))
}

// TestHeldShareOutlastsAFlappingStore: two routers split 80/20 reach the
// store through a link that goes down, comes back for a moment and goes
// down again: the busiest holds its 80% throughout, and the shares add up
// to at most one. The moment is shorter than an exchange interval, so that
// each router exchanges at most once while the store answers: it writes
// into an epoch and reads the one before, which the outage left empty, and
// so lacks itself (the case under test: it must hold, not fall to 1/N).
// Open for longer, a router could write into an epoch, read it closed and
// find the other router missing, which it then reserves at least 1/N for
// (Allocate: it cannot know the other holds less), and take 1 - 1/N: safe,
// and not the case under test.
func TestHeldShareOutlastsAFlappingStore(t *testing.T) {
	srv := redisserver.ForTest(t)
	link := proxytest.Start(t, srv.Addr)
	cs, _ := twoRouters(t, "redis://"+link.Addr()+"/0", testPool(), func(int) Options { return Options{Replicas: Static(2)} })
	share := func(i int) float64 { return cs[i].Shares()[0].Share }
	waittest.For(t, 5*time.Second, func() string {
		return fmt.Sprintf("shares %v and %v after 5s, want about 0.8 and 0.2", share(0), share(1))
	}, func() bool { return math.Abs(share(0)-0.8) <= 0.05 })
	worst, least := 0.0, 1.0
	watch := func(d time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
			worst, least = max(worst, share(0)+share(1)), min(least, share(0))
		}
	}
	link.Shut()
	watch(6 * twoInterval)
	link.Open()
	watch(twoInterval * 9 / 10)
	link.Shut()
	watch(10 * twoInterval)
	t.Logf("the busiest router held at least %.4f (%s); the shares added up to %.4f at worst", least, cs[0].Shares()[0].Source, worst)
	if least < 0.7 {
		t.Errorf("the busiest router's share fell to %v while the store came and went, want its 0.8 held", least)
	}
	if worst > 1+1e-9 {
		t.Errorf("the shares added up to %v", worst)
	}
}

// TestMeterLeavesTheCutOffRouterItsShare: of two routers split 80/20 with
// their request quotas metered in the store, the busiest loses the store
// (its controller stops exchanging, as one the store no longer answers):
// the other's windows in the store then leave it the share it holds.
func TestMeterLeavesTheCutOffRouterItsShare(t *testing.T) {
	srv := redisserver.ForTest(t)
	tp := meterPool(100)
	key := tp.Key()
	ids := []string{"a", "b"}
	cs, stops := twoRouters(t, srv.URL(), tp, func(i int) Options {
		return Options{Replicas: Static(2), Meter: newTestMeter(t, srv.URL(), ids[i])}
	})
	absent := func() *absentReserves { return cs[1].SharedMeter(key).(*poolMeter).absent.Load() }
	// Demand counted over a few epochs: the request quotas are metered in
	// the store, so the shares scale only what the store does not meter.
	time.Sleep(20 * twoInterval)
	if a := absent(); a != nil {
		t.Fatalf("reserves %+v with both routers exchanging, want none", *a)
	}
	stops[0]()
	waittest.For(t, 2*time.Second, "the other router's meter reserves nothing 2s after the busiest left", func() bool { return absent() != nil })
	// The busiest router's share follows the demand it measured over its
	// last epochs, which moves with how the drive loop's ticks fall in its
	// windows: 0.75 on a loaded machine. What the reserve must be is that
	// share, not the static half an absent router is given without one, so
	// the bound is the distance to the static half, not the noise.
	if a := absent(); len(a.shares) != 1 || a.rostered != 1 || math.Abs(a.shares[0]-0.8) > 0.1 {
		t.Errorf("the other router's meter reserves %+v for the busiest, want about its 0.8 (the static share is 0.5)", *a)
	}
}

// TestAbsentRouterKeepsItsReserve has three routers exchange through a real
// Redis server with demand 70/20/10 until their shares follow it; then the
// busiest stops exchanging, as a router the store no longer answers does,
// and holds its last share. For as long as the store's roster keeps that
// share (Keep, well past the four epochs the epochs' own keys live), the
// two others reserve it: their shares and the absent router's add up to at
// most one. Once it has left the roster, they reserve its static third; and
// when the two count only themselves, nothing.
func TestAbsentRouterKeepsItsReserve(t *testing.T) {
	srv := redisserver.ForTest(t)
	ctx := context.Background()
	const epoch = 50 * time.Millisecond
	const keep = 20 * epoch
	var xs []*Exchange
	for _, id := range []string{"a", "b", "c"} {
		x, err := NewExchange(ExchangeOptions{URL: srv.URL(), ID: id, Epoch: epoch, Keep: keep})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = x.Close() })
		xs = append(xs, x)
	}
	const pool = "p/google/m"
	demand := []float64{70, 20, 10}
	share := []float64{0, 0, 0}
	round := func(routers []int, replicas int) [][]Peer {
		out := make([][]Peer, len(xs))
		for _, i := range routers {
			got, err := xs[i].Exchange(ctx, replicas, map[string]Entry{pool: {Demand: demand[i], Share: share[i], Calls: uint64(10 * demand[i])}})
			if err != nil {
				t.Fatal(err)
			}
			out[i] = got[pool]
			if s, ok := Allocate(out[i], xs[i].ID()); ok {
				share[i] = s
			}
		}
		time.Sleep(epoch / 2)
		return out
	}
	for range 12 {
		round([]int{0, 1, 2}, 3)
	}
	held := share[0]
	if math.Abs(held-0.7) > 1e-9 {
		t.Fatalf("the busiest router's share is %v before it leaves, want 0.7", held)
	}
	// a is cut off: b and c go on. The epochs' keys a wrote expire after
	// four epochs; the roster keeps its share for keep.
	start := time.Now()
	for time.Since(start) < keep-4*epoch {
		got := round([]int{1, 2}, 3)
		sum := held
		for _, i := range []int{1, 2} {
			s, ok := Allocate(got[i], xs[i].ID())
			if !ok {
				continue
			}
			sum += s
		}
		if sum > 1+1e-9 {
			t.Fatalf("%v after a left: b and c take %v and %v beside a's %v: %v in all (b read %+v)", time.Since(start), share[1], share[2], held, sum, got[1])
		}
	}
	if share[1] > 0.3/(0.2+0.1)*0.2+1e-9 || share[1] < 0.1 {
		t.Errorf("b's share %v while a's 0.7 is reserved, want its demand's part of the 0.3 left", share[1])
	}
	// Past keep: a's static third is reserved.
	time.Sleep(keep)
	var got [][]Peer
	for range 6 {
		got = round([]int{1, 2}, 3)
	}
	if s := demandShareOf(got[1], "b"); math.Abs(s-(2.0/3)*(20.0/30)) > 1e-9 {
		t.Errorf("b's share %v once a has left the roster, want its demand's part of two thirds (peers %+v)", s, got[1])
	}
	// Counted out: nothing is reserved.
	for range 6 {
		got = round([]int{1, 2}, 2)
	}
	if s := demandShareOf(got[1], "b"); math.Abs(s-20.0/30) > 1e-9 {
		t.Errorf("b's share %v with a counted out, want its demand's part of all (peers %+v)", s, got[1])
	}
}

// twoInterval is the exchange interval of twoRouters: epochs of two.
const twoInterval = 50 * time.Millisecond

// twoRouters starts routers "a" and "b" on pool, exchanging through the
// store at url with the options o gives each, on top of an Apply of its
// own, the store, twoInterval, a MaxAge of three intervals and a GrowDelay
// of six, and counts their demand 80/20 until the test ends. stops[i] stops
// router i, as a router that the store no longer answers.
func twoRouters(t *testing.T, url string, pool table.Pool, o func(i int) Options) (cs []*Controller, stops []context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for i, id := range []string{"a", "b"} {
		x, err := NewExchange(ExchangeOptions{URL: url, ID: id, Epoch: 2 * twoInterval})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = x.Close() })
		opts := o(i)
		opts.Apply, opts.Store = (&applied{}).apply, x
		opts.Interval, opts.MaxAge, opts.GrowDelay = twoInterval, 3*twoInterval, 6*twoInterval
		c := New(opts)
		if err := c.SetTable(&table.Table{Version: table.Version, Pools: []table.Pool{pool}}); err != nil {
			t.Fatal(err)
		}
		run, stop := context.WithCancel(ctx)
		cs, stops = append(cs, c), append(stops, stop)
		wg.Add(1)
		go func() { defer wg.Done(); _ = c.Run(run) }()
	}
	drive(ctx, &wg, pool.Key(), cs, 8, 2)
	return cs, stops
}

// drive counts calls[i] calls of pool key to router cs[i] every 10 ms until
// ctx ends, from one loop, so that a busy machine cannot skew the split.
func drive(ctx context.Context, wg *sync.WaitGroup, key table.Key, cs []*Controller, calls ...int) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C:
				for i, c := range cs {
					for range calls[i] {
						c.Demand(key).Add(now.UnixNano())
					}
				}
			}
		}
	}()
}

// TestBadStoreURLKeepsItsPasswordSecret: an error about the store's URL
// names it without its password, which would otherwise reach the logs.
func TestBadStoreURLKeepsItsPasswordSecret(t *testing.T) {
	for _, u := range []string{
		"redis://router:hunter2@localhost:6379/notadb",
		"redis://:hunter2@localhost:6379/0?dial_timeout=forever",
		"http://router:hunter2@localhost:6379/0",
	} {
		_, xerr := NewExchange(ExchangeOptions{URL: u, ID: "a"})
		_, merr := NewMeter(MeterOptions{URL: u, ID: "a"})
		for _, err := range []error{xerr, merr} {
			if err == nil {
				t.Errorf("%s: accepted", u)
				continue
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the error shows the password: %v", err)
			}
			if !strings.Contains(err.Error(), "localhost:6379") {
				t.Errorf("the error does not name the store: %v", err)
			}
		}
	}
	// A URL that does not parse: url.Parse's own error quotes it whole.
	for _, u := range []string{"redis://:hunter2@local host:6379/0", "redis://router:hunter2@localhost:port/0"} {
		_, xerr := NewExchange(ExchangeOptions{URL: u, ID: "a"})
		_, merr := NewMeter(MeterOptions{URL: u, ID: "a"})
		for _, err := range []error{xerr, merr} {
			if err == nil || strings.Contains(err.Error(), "hunter2") {
				t.Errorf("%s: error %v; want one that does not show the password", u, err)
			}
		}
	}
}

// TestLaterVersionsEntriesAreReadPast: a router of a later version that
// writes a field after the calls (as it would in a rolling upgrade) is read
// by this one: its demand and share count in the epoch, and once it is
// absent the roster reserves the share it published, not its new field.
func TestLaterVersionsEntriesAreReadPast(t *testing.T) {
	srv := redisserver.ForTest(t)
	ctx := context.Background()
	epoch := 200 * time.Millisecond
	old, err := NewExchange(ExchangeOptions{URL: srv.URL(), ID: "old", Epoch: epoch})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = old.Close() })
	const pool = "p/google/m"
	// later writes as a later version would: the script with one more
	// field in its entry.
	later := func() {
		t.Helper()
		args := []any{epoch.Microseconds(), old.keep, "later", 2, pool, "30 0.75 300 9.5,1.25"}
		if err := exchangeScript.Run(ctx, old.rdb, []string{old.prefix}, args...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	var got map[string][]Peer
	// Both publish until the epoch read holds both.
	for range 20 {
		later()
		if got, err = old.Exchange(ctx, 2, map[string]Entry{pool: {Demand: 10}}); err != nil {
			t.Fatalf("an epoch holding a later version's entry: %v", err)
		}
		if len(got[pool]) == 2 {
			break
		}
		time.Sleep(epoch / 2)
	}
	want := Peer{ID: "later", Replicas: 2, Demand: 30, Share: 0.75, Calls: 300, Counted: true}
	if ps := got[pool]; len(ps) != 2 || ps[0] != want {
		t.Fatalf("epoch read %+v, want %+v first", ps, want)
	}
	// The later router stops: once an epoch lacks it, the roster reserves
	// its share.
	for range 20 {
		time.Sleep(epoch / 2)
		if got, err = old.Exchange(ctx, 2, map[string]Entry{pool: {Demand: 10}}); err != nil {
			t.Fatal(err)
		}
		for _, p := range got[pool] {
			if p.ID == "later" && p.Absent {
				if p.Share != 0.75 {
					t.Fatalf("roster holds %+v for the absent later router, want its share 0.75", p)
				}
				return
			}
		}
	}
	t.Fatalf("the later router never showed as absent: %+v", got[pool])
}
