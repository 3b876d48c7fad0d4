package share

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/regionwarden/regionwarden/internal/proxytest"
	"github.com/regionwarden/regionwarden/internal/redisserver"
	"github.com/regionwarden/regionwarden/internal/waittest"
	"github.com/regionwarden/regionwarden/router/policy"
	"github.com/regionwarden/regionwarden/router/table"
)

// meterPool is a pool of a provisioned region and two shared ones (10 and
// 0.5 requests a second) with the cluster share given.
func meterPool(capacityShare int) table.Pool {
	p := table.Pool{Project: "p", Publisher: "google", Model: "m", Regions: []table.Region{
		{Name: "europe-west1", Tier: table.TierProvisioned, Capacity: table.Capacity{GSUs: 2, TokensPerSecond: 5000}},
		{Name: "europe-west4", Tier: table.TierShared, Capacity: table.Capacity{RequestsPerSecond: 10}},
		{Name: "europe-north1", Tier: table.TierShared, Capacity: table.Capacity{RequestsPerSecond: 0.5}},
	}}
	p.Policy.CapacityShare = capacityShare
	return p
}

// newTestMeter is a meter of the store at url for router id, closed with
// the test.
func newTestMeter(t *testing.T, url, id string) *Meter {
	t.Helper()
	return meterWith(t, MeterOptions{URL: url, ID: id})
}

// meterWith is a meter of o, closed with the test, with a timeout of 200 ms
// and no logging unless o says otherwise.
func meterWith(t *testing.T, o MeterOptions) *Meter {
	t.Helper()
	if o.Timeout == 0 {
		o.Timeout = 200 * time.Millisecond
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	m, err := NewMeter(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// poolMeterOf binds m to a pool whose europe-west4 has a quota of 10
// requests a second.
func poolMeterOf(m *Meter) *poolMeter {
	tp := meterPool(100)
	pm := &poolMeter{m: m}
	pm.set(&tp)
	return pm
}

// TestMeterSharesOneQuota has three routers take from one region's quota in
// a real Redis server: together they get the quota, cut to the cluster's
// share, however the requests spread over them; a full quota says how long
// until it has room; a region without a quota of one whole request a second
// is left to each router's share.
func TestMeterSharesOneQuota(t *testing.T) {
	srv := redisserver.ForTest(t)
	tp := meterPool(60) // 60% of 10 requests a second: 6
	var pms []*poolMeter
	for _, id := range []string{"a", "b", "c"} {
		pm := &poolMeter{m: newTestMeter(t, srv.URL(), id)}
		pm.set(&tp)
		pms = append(pms, pm)
	}
	now := time.Now().UnixNano()
	admitted := 0
	// 14 requests, 70/20/10 over the routers.
	for i := range 14 {
		pm := pms[0]
		switch i % 10 {
		case 7, 8:
			pm = pms[1]
		case 9:
			pm = pms[2]
		}
		switch a := pm.TakeShared("europe-west4", now, first(policy.PriorityDefault)); a.Verdict {
		case policy.SharedAdmitted:
			admitted++
		case policy.SharedFull:
			if a.Wait <= 0 || a.Wait > int64(policy.MaxHeadroomWait) {
				t.Errorf("request %d: full, with a wait of %v", i, time.Duration(a.Wait))
			}
		default:
			t.Fatalf("request %d: verdict %d", i, a.Verdict)
		}
	}
	if admitted != 6 {
		t.Errorf("%d requests admitted in one second, want the cluster's 6", admitted)
	}
	for _, region := range []string{"europe-west1", "europe-north1", "nowhere"} {
		if v := pms[0].TakeShared(region, now, first(policy.PriorityDefault)).Verdict; v != policy.SharedUnknown {
			t.Errorf("%s: verdict %d, want SharedUnknown: the router's own meter decides", region, v)
		}
	}
}

// TestWindowLeavesRoomForAbsentRouters: a router the store does not answer
// sends on its share, which the store's windows do not count; the routers
// still metering there leave it the calls their last epoch reserved for it
// (rounded up for a share it holds, down for a static one), and leave the
// region to their own shares when the reserves take all of it.
func TestWindowLeavesRoomForAbsentRouters(t *testing.T) {
	srv := redisserver.ForTest(t)
	tp := meterPool(100) // 10 requests a second
	// At ten times real speed a window is a tenth of a second.
	pm := &poolMeter{m: meterWith(t, MeterOptions{URL: srv.URL(), ID: "b", Scale: claimScale})}
	pm.set(&tp)
	next := func(now int64) int64 {
		time.Sleep(time.Second / claimScale * 11 / 10)
		return now + 2*int64(time.Second)
	}
	admitted := func(now int64) int {
		n := 0
		for range 12 {
			if pm.TakeShared("europe-west4", now, first(policy.PriorityDefault)).Verdict == policy.SharedAdmitted {
				n++
			}
		}
		return n
	}
	now := time.Now().UnixNano()
	// One router held 0.44 (4.4 calls: 5 kept), another is static at 1/4
	// (2.5 calls: 2 kept): 3 of 10 are left.
	pm.setAbsent([]float64{0.44, 0.25}, 1)
	if got := admitted(now); got != 3 {
		t.Errorf("%d requests admitted beside the absent routers' reserves, want 3", got)
	}
	now = next(now)
	pm.setAbsent(nil, 0)
	if got := admitted(now); got != 10 {
		t.Errorf("%d requests admitted with no router absent, want 10", got)
	}
	now = next(now)
	pm.setAbsent([]float64{0.95}, 1)
	if v := pm.TakeShared("europe-west4", now, first(policy.PriorityDefault)).Verdict; v != policy.SharedUnknown {
		t.Errorf("verdict %d with the whole quota reserved, want SharedUnknown: the router's share meters", v)
	}
}

// TestMeterFallsBackAndComesBack cuts the store off: the request that finds
// it gone is left to the router's share, and so is every request of the
// next window, without asking the store even once it is back; then one
// request finds it back, and for two windows the store and the share must
// both admit; after that the store alone decides.
func TestMeterFallsBackAndComesBack(t *testing.T) {
	srv := redisserver.ForTest(t)
	g := proxytest.Start(t, srv.Addr)
	var states []bool
	m := meterWith(t, MeterOptions{URL: "redis://" + g.Addr() + "/0", OnState: func(up bool) { states = append(states, up) }})
	pm := poolMeterOf(m)
	second := int64(time.Second)
	t0 := time.Now().UnixNano()
	take := func(at int64) policy.SharedVerdict {
		v := pm.TakeShared("europe-west4", t0+at, first(policy.PriorityDefault)).Verdict
		return v
	}
	const down = "share: the store does not answer"
	steps := []struct {
		at    int64
		open  bool
		want  policy.SharedVerdict
		state string // as /debug/pools shows it
		why   string
	}{
		{0, true, policy.SharedAdmitted, "store", "the store answers"},
		{second / 100, false, policy.SharedUnknown, down, "the store is cut off"},
		{second / 2, true, policy.SharedUnknown, down, "within the window after a failure, the store is not asked"},
		{second + second/5, true, policy.SharedAdmittedIfLocal, "store and share", "a window later, the store is back: warming up"},
		{3 * second, true, policy.SharedAdmittedIfLocal, "store and share", "still within two windows of its return"},
		{3*second + second/2, true, policy.SharedAdmitted, "store", "two windows after its return"},
	}
	for _, s := range steps {
		if s.open {
			g.Open()
		} else {
			g.Shut()
		}
		if got := take(s.at); got != s.want {
			t.Fatalf("at %v (%s): verdict %d, want %d", time.Duration(s.at), s.why, got, s.want)
		}
		if got := m.state(t0 + s.at); got != s.state {
			t.Errorf("at %v (%s): state %q, want %q", time.Duration(s.at), s.why, got, s.state)
		}
	}
	if len(states) != 2 || states[0] || !states[1] {
		t.Errorf("told %v, want [false true]: down once, back once", states)
	}
}

// TestFullWindowIsKnownUntilItHasRoom: once the store says a region's
// window is full until its oldest request leaves, requests until then are
// refused without asking the store (it is cut off here, and they are still
// refused, not left to the share); the first one after asks again.
func TestFullWindowIsKnownUntilItHasRoom(t *testing.T) {
	srv := redisserver.ForTest(t)
	g := proxytest.Start(t, srv.Addr)
	pm := &poolMeter{m: newTestMeter(t, "redis://"+g.Addr()+"/0", "a")}
	tp := meterPool(20) // 2 requests a second
	pm.set(&tp)
	now := time.Now().UnixNano()
	for range 2 {
		if v := pm.TakeShared("europe-west4", now, first(policy.PriorityDefault)).Verdict; v != policy.SharedAdmitted {
			t.Fatalf("verdict %d, want admitted", v)
		}
	}
	a := pm.TakeShared("europe-west4", now, first(policy.PriorityDefault))
	v, wait := a.Verdict, a.Wait
	if v != policy.SharedFull || wait <= 0 {
		t.Fatalf("verdict %d, wait %v; want full", v, time.Duration(wait))
	}
	g.Shut()
	if a := pm.TakeShared("europe-west4", now+wait/2, first(policy.PriorityDefault)); a.Verdict != policy.SharedFull || a.Wait != wait-wait/2 {
		t.Errorf("within the wait: verdict %d, wait %v; want full, %v, without the store", a.Verdict, time.Duration(a.Wait), time.Duration(wait-wait/2))
	}
	if v := pm.TakeShared("europe-west4", now+wait+1, first(policy.PriorityDefault)).Verdict; v != policy.SharedUnknown {
		t.Errorf("after the wait: verdict %d, want the store asked (cut off: unknown)", v)
	}
	// A larger quota is a new window: not known full.
	g.Open()
	bigger := meterPool(30)
	pm.set(&bigger)
	if got := (*pm.limits.Load())["europe-west4"].full.Load(); got != 0 {
		t.Errorf("a new quota kept the old window's fullness until %d", got)
	}
}

// TestForgottenRequestsLeaveTheStore: requests a region did not count
// (Google refused their callers' credentials) leave the store's window,
// whether the store admitted them or the router's share did while the store
// was slow, so that another router has their room; and a window known full
// here is no longer taken as such, for the room may be back.
func TestForgottenRequestsLeaveTheStore(t *testing.T) {
	srv := redisserver.ForTest(t)
	tp := meterPool(20) // 2 requests a second
	a, b := &poolMeter{m: newTestMeter(t, srv.URL(), "a")}, &poolMeter{m: newTestMeter(t, srv.URL(), "b")}
	a.set(&tp)
	b.set(&tp)
	now := time.Now().UnixNano()
	var tickets []uint64
	for range 2 {
		ans := a.TakeShared("europe-west4", now, first(policy.PriorityDefault))
		if ans.Verdict != policy.SharedAdmitted || ans.Ticket == 0 {
			t.Fatalf("verdict %d, ticket %d; want admitted, named", ans.Verdict, ans.Ticket)
		}
		tickets = append(tickets, ans.Ticket)
	}
	if v := a.TakeShared("europe-west4", now, first(policy.PriorityDefault)).Verdict; v != policy.SharedFull {
		t.Fatalf("verdict %d over the quota, want full", v)
	}
	local := a.AdmittedLocally("europe-west4", now)
	if local == 0 || slices.Contains(tickets, local) {
		t.Fatalf("a request the share admitted was named %d, after %v", local, tickets)
	}
	direct := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = direct.Close() })
	key := (*a.limits.Load())["europe-west4"].key
	count := func(want int64) {
		t.Helper()
		var n int64
		waittest.For(t, time.Second, func() string { return fmt.Sprintf("%d requests in the store's window, want %d", n, want) }, func() bool {
			var err error
			if n, err = direct.ZCard(context.Background(), key).Result(); err != nil {
				t.Fatal(err)
			}
			return n == want
		})
	}
	count(3)
	for _, tk := range append(tickets, local) {
		a.Forget("europe-west4", tk)
	}
	if got := (*a.limits.Load())["europe-west4"].full.Load(); got != 0 {
		t.Errorf("the window is still known full until %d after its requests were forgotten", got)
	}
	count(0)
	for range 2 {
		if v := b.TakeShared("europe-west4", now, first(policy.PriorityDefault)).Verdict; v != policy.SharedAdmitted {
			t.Fatalf("another router: verdict %d, want admitted to the forgotten requests' room", v)
		}
	}
	a.Forget("europe-west4", 1<<40) // a request the store no longer holds
	a.Forget("nowhere", tickets[0]) // a region without a quota in the store
	count(2)
}

// TestAdmittedRequestCountsFromWhenTheRouterHeardBack delays the store's
// answers by 50 ms: a request the store admitted stays in the window from
// when the router heard back, at least 50 ms after the store admitted it.
func TestAdmittedRequestCountsFromWhenTheRouterHeardBack(t *testing.T) {
	srv := redisserver.ForTest(t)
	g := proxytest.Start(t, srv.Addr)
	g.DelayAnswers(50 * time.Millisecond)
	// Connecting takes a few delayed answers: a timeout that allows them.
	m := meterWith(t, MeterOptions{URL: "redis://" + g.Addr() + "/0", Timeout: 5 * time.Second})
	pm := poolMeterOf(m)
	direct := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = direct.Close() })
	ctx := context.Background()
	// Connected, and the script known to the store: the one round trip left
	// is the script's, whose answer comes 50 ms after the store ran it.
	if err := meterScript.Load(ctx, direct).Err(); err != nil {
		t.Fatal(err)
	}
	if err := m.rdb.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	before, err := direct.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if v := pm.TakeShared("europe-west4", time.Now().UnixNano(), first(policy.PriorityDefault)).Verdict; v != policy.SharedAdmitted {
		t.Fatalf("verdict %d", v)
	}
	key := (*pm.limits.Load())["europe-west4"].key
	want := float64(before.Add(50 * time.Millisecond).UnixMicro())
	var last float64
	waittest.For(t, time.Second, func() string {
		return fmt.Sprintf("request counted from %.0f µs, want at least %.0f: 50 ms after the store admitted it", last, want)
	}, func() bool {
		zs, err := direct.ZRangeWithScores(ctx, key, 0, -1).Result()
		if err != nil || len(zs) != 1 {
			t.Fatalf("window %v, %v; want one request", zs, err)
		}
		last = zs[0].Score
		return last >= want
	})
}

// TestShareAdmitsCountInTheStore: a router whose store answers too late
// for the hot path (50 ms, against a timeout of 20) meters by its share, and
// the requests its share admits are counted in the store in the background,
// so that a router still metering in the store admits the rest of the quota
// and no more.
func TestShareAdmitsCountInTheStore(t *testing.T) {
	srv := redisserver.ForTest(t)
	g := proxytest.Start(t, srv.Addr)
	g.DelayAnswers(50 * time.Millisecond)
	slow := poolMeterOf(meterWith(t, MeterOptions{URL: "redis://" + g.Addr() + "/0", ID: "slow", Timeout: 20 * time.Millisecond}))
	fast := poolMeterOf(newTestMeter(t, srv.URL(), "fast"))
	now := time.Now().UnixNano()
	if v := slow.TakeShared("europe-west4", now, first(policy.PriorityDefault)).Verdict; v != policy.SharedUnknown {
		t.Fatalf("verdict %d through a store answering in 50 ms, want unknown (the share decides)", v)
	}
	for range 4 { // what its share admitted
		slow.AdmittedLocally("europe-west4", now)
	}
	slow.AdmittedLocally("europe-north1", now) // no quota in the store: nothing to count
	direct := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = direct.Close() })
	key := (*slow.limits.Load())["europe-west4"].key
	var n int64
	waittest.For(t, time.Second, func() string {
		return fmt.Sprintf("%d requests in the store's window, want the 4 the share admitted", n)
	}, func() bool {
		var err error
		if n, err = direct.ZCard(context.Background(), key).Result(); err != nil {
			t.Fatal(err)
		}
		return n >= 4
	})
	// 5: the store may have run the timed-out request's script too.
	if n != 4 && n != 5 {
		t.Fatalf("%d requests in the store's window, want the 4 the share admitted", n)
	}
	admitted := int64(0)
	for range 10 {
		if v := fast.TakeShared("europe-west4", now, first(policy.PriorityDefault)).Verdict; v == policy.SharedAdmitted {
			admitted++
		}
	}
	if admitted != 10-n {
		t.Errorf("the router metering in the store admitted %d of a quota of 10 with %d counted, want %d", admitted, n, 10-n)
	}
	if keys, _ := direct.Keys(context.Background(), "*europe-north1").Result(); len(keys) != 0 {
		t.Errorf("keys %v for a region without a quota in the store", keys)
	}
}

// TestFallbackIsToldWhatTheStoreLastCounted: the first request the store
// does not answer is told the part of the quota its window held at the
// last answer; the next ones are not, nor is one after an answer a window
// old.
func TestFallbackIsToldWhatTheStoreLastCounted(t *testing.T) {
	srv := redisserver.ForTest(t)
	g := proxytest.Start(t, srv.Addr)
	pm := poolMeterOf(newTestMeter(t, "redis://"+g.Addr()+"/0", "a")) // 10 a second
	now := time.Now().UnixNano()
	for range 3 {
		if v := pm.TakeShared("europe-west4", now, first(policy.PriorityDefault)).Verdict; v != policy.SharedAdmitted {
			t.Fatalf("verdict %d", v)
		}
	}
	g.Shut()
	at := now + int64(10*time.Millisecond)
	if a := pm.TakeShared("europe-west4", at, first(policy.PriorityDefault)); a.Verdict != policy.SharedUnknown || a.Held != 0.3 {
		t.Errorf("first request unanswered: %+v, want unknown, held 0.3 (3 of 10)", a)
	}
	if a := pm.TakeShared("europe-west4", at, first(policy.PriorityDefault)); a.Held != 0 {
		t.Errorf("second request unanswered: held %v, want 0 (told once)", a.Held)
	}

	g.Open()
	pm = poolMeterOf(newTestMeter(t, "redis://"+g.Addr()+"/0", "b"))
	if v := pm.TakeShared("europe-west4", now, first(policy.PriorityDefault)).Verdict; v != policy.SharedAdmitted {
		t.Fatalf("verdict %d", v)
	}
	g.Shut()
	if a := pm.TakeShared("europe-west4", now+int64(time.Second), first(policy.PriorityDefault)); a.Held != 0 {
		t.Errorf("unanswered a window after the last answer: held %v, want 0", a.Held)
	}
}

// TestControllerSharedMeter: a controller with a meter gives each pool of its
// table a shared meter, the same across tables, and none to a pool that
// left the table; without a meter, none.
func TestControllerSharedMeter(t *testing.T) {
	apply := func(*table.Table) error { return nil }
	tp := meterPool(100)
	tbl := &table.Table{Version: table.Version, Pools: []table.Pool{tp}}
	if err := New(Options{Apply: apply}).SetTable(tbl); err != nil {
		t.Fatal(err)
	}
	plain := New(Options{Apply: apply})
	if err := plain.SetTable(tbl); err != nil {
		t.Fatal(err)
	}
	if plain.SharedMeter(tp.Key()) != nil {
		t.Error("a shared meter without a store")
	}
	c := New(Options{Apply: apply, Meter: newTestMeter(t, "redis://127.0.0.1:1/0", "a")})
	if c.SharedMeter(tp.Key()) != nil {
		t.Error("a shared meter before any table")
	}
	if err := c.SetTable(tbl); err != nil {
		t.Fatal(err)
	}
	first := c.SharedMeter(tp.Key())
	if first == nil {
		t.Fatal("no shared meter for the table's pool")
	}
	if err := c.SetTable(&table.Table{Version: table.Version, Pools: []table.Pool{meterPool(50)}}); err != nil {
		t.Fatal(err)
	}
	if c.SharedMeter(tp.Key()) != first {
		t.Error("a new table gave the same pool another shared meter")
	}
	if got := (*first.(*poolMeter).limits.Load())["europe-west4"].limit; got != 5 {
		t.Errorf("limit %d after the cluster share went to 50%%, want 5", got)
	}
	other := meterPool(100)
	other.Model = "other"
	if err := c.SetTable(&table.Table{Version: table.Version, Pools: []table.Pool{other}}); err != nil {
		t.Fatal(err)
	}
	if c.SharedMeter(tp.Key()) != nil {
		t.Error("a pool that left the table kept its shared meter")
	}
}

// claimScale is the pool clock's speed in the claim tests: a window of
// about 100 ms of the store's.
const claimScale = 10

// first is the class of a first attempt of priority pr, retry of a retry.
func first(pr policy.Priority) policy.Class { return policy.ClassOf(pr, false) }
func retry(pr policy.Priority) policy.Class { return policy.ClassOf(pr, true) }

// claimed has router a, whose meter has options o, send a request of class
// c to a full window of 2 requests a second (filled by router b), which
// claims the room that frees next. It returns router b, the pool's clock
// (running claimScale times as fast as the store's) and how long until the
// room frees.
func claimed(t *testing.T, o MeterOptions, c policy.Class) (b *poolMeter, clock func() int64, free int64) {
	t.Helper()
	srv := redisserver.ForTest(t)
	tp := meterPool(20) // 2 requests a second
	o.URL, o.ID, o.Scale = srv.URL(), "a", claimScale
	a := &poolMeter{m: meterWith(t, o)}
	b = &poolMeter{m: meterWith(t, MeterOptions{URL: srv.URL(), ID: "b", Scale: claimScale})}
	a.set(&tp)
	b.set(&tp)
	start := time.Now()
	clock = func() int64 { return start.UnixNano() + int64(time.Since(start))*claimScale }
	now := start.UnixNano()
	for range 2 {
		if v := b.TakeShared("europe-west4", now, first(policy.PriorityDefault)).Verdict; v != policy.SharedAdmitted {
			t.Fatalf("filling: verdict %d", v)
		}
	}
	got := a.TakeShared("europe-west4", now, c)
	if got.Verdict != policy.SharedFull || got.Yielded {
		t.Fatalf("request of class %d to a full window: %+v, want full", c, got)
	}
	return b, clock, got.Wait
}

// TestWaitingPriorityClaimsTheNextRoom: a critical request that a full
// window refuses claims the room that frees next, in the store: while the
// claim stands, default and sheddable requests of every router give way
// (refused without being counted, with the time until the claim ends),
// critical ones do not; once it ends, the room is anyone's.
func TestWaitingPriorityClaimsTheNextRoom(t *testing.T) {
	critical := first(policy.PriorityCritical)
	b, clock, _ := claimed(t, MeterOptions{}, critical)
	now := clock()
	var until int64
	for _, c := range []policy.Class{first(policy.PrioritySheddable), retry(policy.PrioritySheddable), first(policy.PriorityDefault), retry(policy.PriorityDefault)} {
		got := b.TakeShared("europe-west4", now, c)
		if got.Verdict != policy.SharedFull || !got.Yielded || got.Wait <= 0 || got.Claimant != critical {
			t.Fatalf("request of class %d of another router while the critical one waits: %+v, want to give way to class %d", c, got, critical)
		}
		until = max(until, got.Wait)
	}
	for _, c := range []policy.Class{critical, retry(policy.PriorityCritical)} {
		if got := b.TakeShared("europe-west4", now, c); got.Verdict != policy.SharedFull || got.Yielded {
			t.Errorf("request of class %d of another router: %+v, want full, not giving way", c, got)
		}
	}
	time.Sleep(time.Duration(until)/claimScale + 5*time.Millisecond)
	got := b.TakeShared("europe-west4", clock(), first(policy.PrioritySheddable))
	if got.Verdict == policy.SharedFull && !got.Yielded {
		// The claim was worked out from the oldest request's time before
		// the store moved it to when its router heard back (extend): the
		// room frees that much later, and the wait says when.
		time.Sleep(time.Duration(got.Wait)/claimScale + time.Millisecond)
		got = b.TakeShared("europe-west4", clock(), first(policy.PrioritySheddable))
	}
	if got.Verdict != policy.SharedAdmitted {
		t.Errorf("sheddable request after the claim: %+v, want admitted", got)
	}
}

// TestWaitingRetryClaimsBeforeFirstAttempts: a default call's retry that a
// full window refuses claims the next room from default calls' first
// attempts (and every lower class) of every router, not from retries of its
// priority or from critical calls.
func TestWaitingRetryClaimsBeforeFirstAttempts(t *testing.T) {
	claimant := retry(policy.PriorityDefault)
	b, clock, _ := claimed(t, MeterOptions{}, claimant)
	now := clock()
	for _, c := range []policy.Class{first(policy.PrioritySheddable), retry(policy.PrioritySheddable), first(policy.PriorityDefault)} {
		if got := b.TakeShared("europe-west4", now, c); got.Verdict != policy.SharedFull || !got.Yielded || got.Claimant != claimant {
			t.Errorf("class %d while a default retry waits: %+v, want to give way to class %d", c, got, claimant)
		}
	}
	for _, c := range []policy.Class{claimant, first(policy.PriorityCritical)} {
		if got := b.TakeShared("europe-west4", now, c); got.Verdict != policy.SharedFull || got.Yielded {
			t.Errorf("class %d while a default retry waits: %+v, want full, not giving way", c, got)
		}
	}
}

// TestClaimOutlastsTheWaitersRoundTrip: a router whose store answers 10 ms
// late hears of the room it claimed 10 ms after the store worked out when
// it frees, and its request after the wait arrives after it frees by as
// much: the claim it leaves in the store lasts at least that round trip
// past the moment the room frees.
func TestClaimOutlastsTheWaitersRoundTrip(t *testing.T) {
	srv := redisserver.ForTest(t)
	g := proxytest.Start(t, srv.Addr)
	g.DelayAnswers(10 * time.Millisecond)
	tp := meterPool(20) // 2 requests a second
	far := &poolMeter{m: meterWith(t, MeterOptions{URL: "redis://" + g.Addr() + "/0", ID: "far", Scale: claimScale})}
	far.set(&tp)
	now := time.Now().UnixNano()
	for range 2 { // the far router fills the window, and measures its round trip
		if v := far.TakeShared("europe-west4", now, first(policy.PriorityDefault)).Verdict; v != policy.SharedAdmitted {
			t.Fatalf("filling: verdict %d", v)
		}
	}
	if got := far.TakeShared("europe-west4", now, first(policy.PriorityCritical)); got.Verdict != policy.SharedFull || got.Yielded {
		t.Fatalf("critical request to a full window: %+v, want full", got)
	}
	direct := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = direct.Close() })
	ctx := context.Background()
	key := (*far.limits.Load())["europe-west4"].key
	claim, err := direct.HGet(ctx, key+claimsSuffix, strconv.Itoa(int(first(policy.PriorityCritical)))).Int64()
	if err != nil {
		t.Fatal(err)
	}
	oldest, err := direct.ZRangeWithScores(ctx, key, 0, 0).Result()
	if err != nil || len(oldest) != 1 {
		t.Fatalf("window %v, %v", oldest, err)
	}
	// The window's oldest request leaves it (the room frees) window µs
	// after its time; the extension of its time may have landed since.
	free := int64(oldest[0].Score) + far.m.window
	if d := time.Duration(claim-free) * time.Microsecond; d < 10*time.Millisecond {
		t.Errorf("the claim lasts %v past the moment the room frees, want at least the far router's round trip of 10ms", d)
	}
}
