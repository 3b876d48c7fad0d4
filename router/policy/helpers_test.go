package policy

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/regionwarden/regionwarden/internal/clocktest"
	"github.com/regionwarden/regionwarden/router/table"
)

// TestMain fails the package's tests when goroutines outlive them: a policy
// that left a goroutine behind a pick, a table or a clock would grow in a
// router until it failed.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newClock is the policy tests' clock, which they move by hand.
func newClock() *clocktest.Clock { return clocktest.At(time.Unix(1_700_000_000, 0)) }

// provisioned is a provisioned region with capacity c.
func provisioned(name string, c table.Capacity) table.Region {
	return table.Region{Name: name, Tier: table.TierProvisioned, Capacity: c}
}

// shared is an ejectable shared region with a requests-per-second hint (0: none).
func shared(name string, rps float64) table.Region {
	return table.Region{Name: name, Tier: table.TierShared, Ejectable: true, Capacity: table.Capacity{RequestsPerSecond: rps}}
}

// pool is a pool of the given regions with the default policy.
func pool(regions ...table.Region) table.Pool {
	return table.Pool{Project: "proj", Publisher: "google", Model: "gemini-2.5-flash", Regions: regions, Policy: table.DefaultPolicy()}
}

// quiet is a logger for pools whose demotions the test does not read.
var quiet = slog.New(slog.DiscardHandler)

// limitedRegion is a pool of one shared region of rps calls a second (0:
// no hint) that is never ejected, with in-flight limits starting at initial
// and growing to most, under a pool-wide cap that does not bind.
func limitedRegion(t testing.TB, clk *clocktest.Clock, rps float64, initial, most int) *Pool {
	tp := pool(shared("europe-west1", rps))
	tp.Regions[0].Ejectable = false
	tp.Policy.Concurrency = table.Concurrency{MaxInFlight: 1000, RegionInitialLimit: initial, RegionMaxLimit: most}
	return mustNew(t, tp, clk)
}

// retryAfter starts a call on p whose first attempt must be admitted and ends
// with o, and picks its second attempt.
func retryAfter(t testing.TB, p *Pool, o Outcome) (Attempt, error) {
	t.Helper()
	c, a := pick(t, p, PriorityDefault)
	a.Done(o)
	return c.Pick()
}

// pick starts a call of priority pr and picks its first attempt.
func pick(t testing.TB, p *Pool, pr Priority) (*Call, Attempt) {
	t.Helper()
	c := p.Start(Request{Priority: pr})
	a, err := c.Pick()
	if err != nil {
		t.Fatalf("pick: %v", err)
	}
	return &c, a
}

// mustNew returns the adaptive policy for tp on clk.
func mustNew(t testing.TB, tp table.Pool, clk *clocktest.Clock) *Pool {
	t.Helper()
	p, err := New(tp, Options{Now: clk.Now, Seed: 1, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// once makes one attempt of a new call and reports o; it returns the region.
func once(t testing.TB, r *Pool, o Outcome) string {
	t.Helper()
	c := r.Start(Request{})
	a, err := c.Pick()
	if err != nil {
		t.Fatalf("pick: %v", err)
	}
	a.Done(o)
	return a.Region
}

// serveFunc answers an attempt on a region at a time.
type serveFunc func(region string, now time.Time) Outcome

// simStats is what a simulated run observed.
type simStats struct {
	requests, ok, attempts int
	errs                   map[string]int
	byRegion               map[string]int
}

// simulate sends rps requests per second for d through r, each retried as the
// policy allows, with attempts that complete at once. each, if set, sees every
// request's elapsed time and attempts.
func simulate(r *Pool, clk *clocktest.Clock, rps int, d time.Duration, serve serveFunc, each func(elapsed time.Duration, attempts []string)) simStats {
	s := simStats{errs: map[string]int{}, byRegion: map[string]int{}}
	step := time.Second / time.Duration(rps)
	begin := clk.Now()
	var tried []string
	for clk.Now().Sub(begin) < d {
		s.requests++
		c := r.Start(Request{Deadline: clk.Now().Add(30 * time.Second)})
		tried = tried[:0]
		for {
			a, err := c.Pick()
			if err != nil {
				s.errs[errName(err)]++
				break
			}
			s.attempts++
			s.byRegion[a.Region]++
			tried = append(tried, a.Region)
			o := serve(a.Region, clk.Now())
			a.Done(o)
			if o == Success {
				s.ok++
				break
			}
		}
		if each != nil {
			each(clk.Now().Sub(begin), tried)
		}
		clk.Advance(step)
	}
	return s
}

// errName is a short label for a Pick error, for logs.
func errName(err error) string {
	for _, e := range []error{ErrOverCapacity, ErrShed, ErrBudgetExhausted, ErrAttemptsExhausted, ErrDeadlineExceeded, ErrNotRetryable} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	return err.Error()
}

// quota answers Success up to rps per second (a token bucket with a
// one-second burst) and 429 beyond.
type quota struct {
	rps    float64
	tokens float64
	last   time.Time
}

func (q *quota) serve(now time.Time) Outcome {
	if !q.last.IsZero() {
		q.tokens = min(q.tokens+now.Sub(q.last).Seconds()*q.rps, q.rps)
	} else {
		q.tokens = q.rps
	}
	q.last = now
	if q.tokens >= 1 {
		q.tokens--
		return Success
	}
	return Capacity
}

// report feeds k outcomes o to the pool's i-th region, as if k attempts had
// been picked there, on the capacity its hints meter, and ended.
func report(p *Pool, i int, o Outcome, k int) {
	s := p.st.Load().slots[i]
	for range k {
		s.r.inFlight.Add(1)
		p.inFlight.Add(1)
		s.r.done(Report{Outcome: o, lane: s.hinted})
	}
}

// regionOf is the snapshot of p's region name.
func regionOf(t *testing.T, p *Pool, name string) RegionSnapshot {
	t.Helper()
	rs, ok := p.Snapshot().Region(name)
	if !ok {
		t.Fatalf("%s is not in the snapshot", name)
	}
	return rs
}

// probeWait lets a demoted region's next probe come due: it moves clk by
// the probe interval and starts the pool calls a probe waits for
// (probeCallsOf), which pick nothing.
func probeWait(p *Pool, clk *clocktest.Clock) {
	st := p.st.Load()
	clk.Advance(time.Duration(st.probeEvery))
	startCalls(p, st.probeCalls)
}

// startCalls starts n calls on p that pick nothing: the pool's count of
// calls, which paces a demoted region's probes, moves on by n.
func startCalls(p *Pool, n int64) {
	for range n {
		p.Start(Request{})
	}
}

// restoreNeed is how many successes in a row restore region i of p now,
// demoted or on probation (region.restoreAfter).
func restoreNeed(p *Pool, i int) int64 {
	s := p.st.Load().slots[i]
	return s.r.restoreAfter(s, p.nanos())
}
