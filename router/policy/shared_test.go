package policy

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/regionwarden/regionwarden/router/table"
)

// scriptedMeter is a SharedMeter that answers what the test sets, and
// counts what it was asked.
type scriptedMeter struct {
	v     SharedVerdict
	wait  int64
	held  float64 // told once with SharedUnknown, then 0
	asked map[string]int
	local int // requests it was told the router's own meter admitted
	// tickets names the requests it counted; forgot holds those it was
	// told to forget.
	tickets uint64
	forgot  []uint64
	// claimant, when set, is the class of a claim every request of a lower
	// class gives way to (SharedFull, Yielded).
	claimant *Class
	class    Class // the class of the last request asked
}

func (m *scriptedMeter) TakeShared(region string, now int64, c Class) SharedAnswer {
	m.asked[region]++
	m.class = c
	if m.claimant != nil && c < *m.claimant {
		return SharedAnswer{Verdict: SharedFull, Wait: m.wait, Yielded: true, Claimant: *m.claimant}
	}
	a := SharedAnswer{Verdict: m.v, Wait: m.wait}
	switch m.v {
	case SharedUnknown:
		a.Held, m.held = m.held, 0
	case SharedAdmitted, SharedAdmittedIfLocal:
		m.tickets++
		a.Ticket = m.tickets
	}
	return a
}

func (m *scriptedMeter) AdmittedLocally(region string, now int64) uint64 {
	m.local++
	m.tickets++
	return m.tickets
}

func (m *scriptedMeter) Forget(region string, ticket uint64) { m.forgot = append(m.forgot, ticket) }

// admitted picks one call's first attempt on p and ends it: whether it was
// admitted, and the error when not.
func admitted(p *Pool) (bool, error) {
	c := p.Start(Request{})
	a, err := c.Pick()
	if err != nil {
		return false, err
	}
	a.Done(Success)
	return true, nil
}

// TestSharedMeterDecidesRequestQuotas: a shared meter's verdict is final
// when it admits or refuses, whatever the router's own share; the router's
// own meter decides when the shared one cannot say, and when it is warming
// up; and every request the shared meter admitted counts on the router's own
// meter, so that a router falling back to its share does not send the region
// more in that second.
func TestSharedMeterDecidesRequestQuotas(t *testing.T) {
	clk := newClock()
	p := mustNew(t, pool(shared("europe-west4", 2)), clk) // this router's share: 2 calls a second
	m := &scriptedMeter{asked: map[string]int{}}
	p.SetSharedMeter(m)

	for _, step := range []struct {
		v       SharedVerdict
		advance time.Duration // before the calls
		calls   int
		want    int // admitted
		local   int // of them, told to the shared meter as admitted by the share
		why     string
	}{
		{SharedAdmitted, 0, 5, 5, 0, "the store admits five calls in one second, past the share of 2"},
		{SharedUnknown, 0, 1, 0, 0, "the store stops answering within the same second: the five calls fill the share"},
		{SharedUnknown, 1100 * time.Millisecond, 3, 2, 2, "a second later, the share alone: 2, told to the store"},
		{SharedAdmittedIfLocal, 1100 * time.Millisecond, 3, 2, 0, "warming up: the store counted the calls, the share must admit them too"},
	} {
		clk.Advance(step.advance)
		m.v = step.v
		m.local = 0
		got := 0
		for range step.calls {
			if ok, _ := admitted(p); ok {
				got++
			}
		}
		if got != step.want {
			t.Errorf("%s: %d of %d calls admitted, want %d", step.why, got, step.calls, step.want)
		}
		if m.local != step.local {
			t.Errorf("%s: the shared meter was told of %d calls admitted by the share, want %d", step.why, m.local, step.local)
		}
	}
	if m.asked["europe-west4"] != 5+1+3+3 {
		t.Errorf("shared meter asked %d times, want every call's", m.asked["europe-west4"])
	}

	// The store's quota is full: refused with its wait, although the share
	// has room.
	clk.Advance(1100 * time.Millisecond)
	m.v, m.wait = SharedFull, int64(300*time.Millisecond)
	_, err := admitted(p)
	var ce *CapacityError
	if !errors.As(err, &ce) || !errors.Is(err, ErrOverCapacity) || ce.Headroom != 300*time.Millisecond {
		t.Fatalf("refusal %v, want over capacity with 300ms of headroom wait", err)
	}

	// Without a shared meter, the share alone.
	p.SetSharedMeter(nil)
	asked := m.asked["europe-west4"]
	for range 3 {
		_, _ = admitted(p)
	}
	if m.asked["europe-west4"] != asked {
		t.Error("a removed shared meter was asked")
	}
}

// TestSharedMeterIsNotAskedForTokens: a PT's capacity is tokens over its
// window, which the shared meter does not meter.
func TestSharedMeterIsNotAskedForTokens(t *testing.T) {
	clk := newClock()
	p := mustNew(t, pool(provisioned("europe-west1", table.Capacity{TokensPerSecond: 1000})), clk)
	m := &scriptedMeter{v: SharedFull, wait: 1, asked: map[string]int{}}
	p.SetSharedMeter(m)
	if ok, err := admitted(p); !ok {
		t.Fatalf("PT call refused: %v", err)
	}
	if len(m.asked) != 0 {
		t.Errorf("shared meter asked %v for a PT", m.asked)
	}
}

// TestFallbackHoldsWhatTheStoreLastCounted: when the shared meter stops
// answering, the router's own meter holds its share of what the store last
// counted in the region's window (less what it already holds) for one
// window: a router that sent little does not admit its whole share on top
// of what the others sent.
func TestFallbackHoldsWhatTheStoreLastCounted(t *testing.T) {
	for _, c := range []struct {
		held float64
		want int // admitted in the window after the store stopped answering
		why  string
	}{
		{0, 3, "nothing told: the share of 4, less the call the store admitted"},
		{0.75, 1, "the window held 3/4 of the quota: 3 of the share of 4 held, of which the router's own call is one"},
		{0.1, 3, "less than the router's own call: nothing more held"},
		{1, 0, "the window was full: nothing until it has room"},
	} {
		clk := newClock()
		p := mustNew(t, pool(shared("europe-west4", 4)), clk)
		m := &scriptedMeter{v: SharedAdmitted, asked: map[string]int{}}
		p.SetSharedMeter(m)
		if ok, err := admitted(p); !ok {
			t.Fatal(err)
		}
		clk.Advance(10 * time.Millisecond)
		m.v, m.held = SharedUnknown, c.held
		got := 0
		for range 5 {
			if ok, _ := admitted(p); ok {
				got++
			}
		}
		if got != c.want {
			t.Errorf("%s: %d admitted, want %d", c.why, got, c.want)
		}
		clk.Advance(1100 * time.Millisecond)
		got = 0
		for range 5 {
			if ok, _ := admitted(p); ok {
				got++
			}
		}
		if got != 4 {
			t.Errorf("%s: a window later, %d admitted, want the share of 4", c.why, got)
		}
	}
}

// endOne starts a call in p, picks its attempt and finishes it with rep.
func endOne(p *Pool, rep Report) error {
	c := p.Start(Request{})
	a, err := c.Pick()
	if err != nil {
		return err
	}
	a.Finish(rep)
	return nil
}

// requestMeters are the two meters of a region's requests: a one-second
// meter, and the pacer of a quota under one call a second.
var requestMeters = []struct {
	name string
	rps  float64
}{{"one-second meter", 2}, {"pacer", 0.5}}

// TestUncountedRequestsLeaveTheMeters: a request the region did not count
// (Report.Uncounted: Google refused its caller's credentials) is taken back
// from the request meters that admitted it, the router's own (a one-second
// meter, or the pacer of a quota under one call a second) and the shared
// one; a caller's fault the region counted stays counted.
func TestUncountedRequestsLeaveTheMeters(t *testing.T) {
	refused := Report{Outcome: CallerFault, Uncounted: true}
	for _, tc := range requestMeters {
		t.Run(tc.name, func(t *testing.T) {
			p := mustNew(t, pool(shared("europe-west4", tc.rps)), newClock())
			for i := range 10 {
				if err := endOne(p, refused); err != nil {
					t.Fatalf("uncounted request %d: %v", i+1, err)
				}
			}
			quota := max(int(tc.rps), 1)
			for i := range quota {
				if err := endOne(p, Report{Outcome: CallerFault}); err != nil {
					t.Fatalf("counted request %d of %d: %v", i+1, quota, err)
				}
			}
			if err := endOne(p, Report{Outcome: CallerFault}); err == nil {
				t.Fatal("the quota admitted a request over it: the counted caller's faults were given back")
			}
		})
	}
	t.Run("shared meter", func(t *testing.T) {
		clk := newClock()
		p := mustNew(t, pool(shared("europe-west4", 2)), clk)
		m := &scriptedMeter{asked: map[string]int{}, v: SharedAdmitted}
		p.SetSharedMeter(m)
		for range 5 {
			if err := endOne(p, refused); err != nil {
				t.Fatal(err)
			}
		}
		m.v = SharedUnknown // the store does not answer: the router's share decides, and tells it
		if err := endOne(p, refused); err != nil {
			t.Fatalf("the router's own meter kept the shared meter's requests: %v", err)
		}
		if err := endOne(p, Report{Outcome: Success}); err != nil {
			t.Fatal(err)
		}
		if want := []uint64{1, 2, 3, 4, 5, 6}; !slices.Equal(m.forgot, want) {
			t.Errorf("the shared meter was told to forget %v, want %v (not the request that succeeded)", m.forgot, want)
		}
	})
}

// TestRefusedRequestsStayInTheMeters: a request the region refused with a
// 429 took none of its quota in Google's count, but it stays in the
// router's meters: a hint bounds the calls the router sends a region
// (table.Capacity.RequestsPerSecond), 429s among them, so a region that
// refuses half its calls is not sent twice its quota (the replay target of
// shared-quota-contention: given back, the quotas were sent more than
// their rate for 12 and 14 s in a row).
func TestRefusedRequestsStayInTheMeters(t *testing.T) {
	for _, tc := range requestMeters {
		t.Run(tc.name, func(t *testing.T) {
			p := mustNew(t, pool(shared("europe-west4", tc.rps)), newClock())
			quota := max(int(tc.rps), 1)
			// Fewer 429s than the throttle's minRequests: the throttle
			// turns nothing away, the meters alone decide.
			for i := range quota {
				if err := endOne(p, Report{Outcome: Capacity}); err != nil {
					t.Fatalf("request %d of %d, refused with a 429: %v", i+1, quota, err)
				}
			}
			if err := endOne(p, Report{Outcome: Success}); err == nil {
				t.Fatal("the quota's 429s were given back: a request over the hint was sent")
			}
		})
	}
	t.Run("shared meter", func(t *testing.T) {
		p := mustNew(t, pool(shared("europe-west4", 2)), newClock())
		m := &scriptedMeter{asked: map[string]int{}, v: SharedAdmitted}
		p.SetSharedMeter(m)
		for _, o := range []Outcome{Capacity, Success} {
			if err := endOne(p, Report{Outcome: o}); err != nil {
				t.Fatal(err)
			}
		}
		if len(m.forgot) != 0 {
			t.Errorf("the shared meter was told to forget %v, want none (a 429 counts among what the routers send)", m.forgot)
		}
	})
}

// TestUncountedCallsEarnNoRetries: calls whose credentials Google refused
// do not count among the retry budget's requests, so a flood of them does
// not let other calls retry more: after 100 of them, of two failed calls
// only one may retry on a budget of 10% of requests; after 100 counted
// calls both may.
func TestUncountedCallsEarnNoRetries(t *testing.T) {
	// secondRetry is whether, after 100 calls reported rep, the second of
	// two failed calls may retry.
	secondRetry := func(rep Report) error {
		tp := pool(shared("europe-west4", 0), shared("europe-north1", 0))
		tp.Policy.Retry = table.Retry{MaxAttempts: 2, BudgetPercent: new(10), MinRetriesPerSecond: new(0)}
		p := mustNew(t, tp, newClock())
		for range 100 {
			c := p.Start(Request{})
			a, err := c.Pick()
			if err != nil {
				t.Fatal(err)
			}
			a.Finish(rep)
		}
		a, err := retryAfter(t, p, Failure)
		if err != nil {
			t.Fatalf("the first retry: %v", err)
		}
		a.Done(Success)
		_, err = retryAfter(t, p, Failure)
		return err
	}
	if err := secondRetry(Report{Outcome: CallerFault, Uncounted: true}); !errors.Is(err, ErrBudgetExhausted) {
		t.Errorf("a second retry after 100 uncounted calls: %v; want ErrBudgetExhausted", err)
	}
	if err := secondRetry(Report{Outcome: CallerFault}); err != nil {
		t.Errorf("a second retry after 100 counted calls: %v; want allowed", err)
	}
}
