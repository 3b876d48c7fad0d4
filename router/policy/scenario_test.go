package policy

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/regionwarden/regionwarden/router/table"
)

// outagePool is the pool of the outage: one provisioned region and three
// pay-as-you-go regions whose hints match their small quotas.
func outagePool() table.Pool {
	return pool(
		provisioned("europe-west4", table.Capacity{GSUs: 20, RequestsPerSecond: 80}),
		shared("europe-west1", 10), shared("europe-west2", 10), shared("europe-west3", 10),
	)
}

// outageBackend replays the outage: the provisioned region fails 5% of calls
// in bursts (one second in ten fails 40% of calls, the rest 1%; the first
// burst five seconds in, as in an incident that starts while the router
// runs), and the
// shared regions answer 429 to everything beyond 10 requests per second each.
// The same seed gives the same sequence to every policy.
func outageBackend(seed uint64) serveFunc {
	rnd := rand.New(rand.NewPCG(seed, 0))
	quotas := map[string]*quota{}
	var begin time.Time
	return func(region string, now time.Time) Outcome {
		if begin.IsZero() {
			begin = now
		}
		if region == "europe-west4" {
			fail := 0.01
			if (now.Sub(begin)+5*time.Second)%(10*time.Second) < time.Second {
				fail = 0.4
			}
			if rnd.Float64() < fail {
				return Failure
			}
			return Success
		}
		q := quotas[region]
		if q == nil {
			q = &quota{rps: 10}
			quotas[region] = q
		}
		return q.serve(now)
	}
}

// TestOutageReplay runs the outage through the adaptive policy: it serves at
// least 99.5% of calls, and the provisioned region, failing 5% of its calls
// in bursts, is neither ejected nor demoted: it keeps its first attempts. The
// replay (internal/replay) compares the count blocklist on the same shape.
func TestOutageReplay(t *testing.T) {
	const rps, dur = 50, 10 * time.Minute
	clk := newClock()
	p, err := New(outagePool(), Options{Now: clk.Now, Seed: 7, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	s := simulate(p, clk, rps, dur, outageBackend(42), nil)
	rate := float64(s.ok) / float64(s.requests)
	t.Logf("%d requests, success %.4f, attempts/request %.3f, errors %v, attempts by region %v",
		s.requests, rate, float64(s.attempts)/float64(s.requests), s.errs, s.byRegion)
	if rate < 0.995 {
		t.Errorf("success %.4f, want >= 0.995", rate)
	}
	if pt := s.byRegion["europe-west4"]; pt < s.requests*9/10 {
		t.Errorf("the provisioned region took %d attempts of %d calls, want at least nine in ten: it stays first", pt, s.requests)
	}
	for _, rs := range p.Snapshot().Regions {
		if rs.Tier == table.TierProvisioned && (rs.TimesEjected > 0 || rs.TimesDemoted > 0) {
			t.Errorf("provisioned region %s was ejected %d times and demoted %d times, want never", rs.Name, rs.TimesEjected, rs.TimesDemoted)
		}
	}
}

// TestTotalOutage sends 100 requests per second to a pool where every region
// fails every call for a minute, then recovers: in every 10 s window of the
// outage attempts per request stay at most 1.0, whatever maxAttempts and the
// retry budget allow (the throttle, fed by failures, cuts every region's
// share together); the provisioned region is demoted, never ejected; and
// within 10 s of the recovery every call succeeds again.
func TestTotalOutage(t *testing.T) {
	for _, tc := range []struct{ maxAttempts, minRetries int }{{2, 1}, {5, 1}, {3, 5}, {5, 0}} {
		clk := newClock()
		tp := pool(provisioned("europe-west4", table.Capacity{}), shared("europe-west1", 0), shared("europe-west2", 0), shared("europe-west3", 0))
		tp.Policy.Retry = table.Retry{MaxAttempts: tc.maxAttempts, BudgetPercent: new(10), MinRetriesPerSecond: new(tc.minRetries)}
		p := mustNew(t, tp, clk)
		var req, att [6]int
		s := simulate(p, clk, 100, 60*time.Second, func(string, time.Time) Outcome { return Failure }, func(el time.Duration, tried []string) {
			w := int(el / (10 * time.Second))
			req[w]++
			att[w] += len(tried)
		})
		for w := range req {
			ratio := float64(att[w]) / float64(req[w])
			t.Logf("maxAttempts=%d minRetriesPerSecond=%d window %d: %d requests, %.4f attempts/request", tc.maxAttempts, tc.minRetries, w, req[w], ratio)
			if att[w] > req[w] {
				t.Errorf("window %d: %.4f attempts per request, want <= 1", w, ratio)
			}
		}
		if s.ok != 0 {
			t.Errorf("%d successes from regions that always fail", s.ok)
		}
		rs := p.Snapshot().Regions[0]
		if rs.Ejected || rs.Demotion == nil {
			t.Errorf("provisioned region %s: ejected %v, demotion %v; want demoted, never ejected", rs.Name, rs.Ejected, rs.Demotion)
		}
		var ok [15]int
		simulate(p, clk, 100, 15*time.Second, func(string, time.Time) Outcome { return Success }, func(el time.Duration, tried []string) {
			if len(tried) > 0 {
				ok[el/time.Second]++
			}
		})
		back := -1
		for sec := len(ok) - 1; sec >= 0 && ok[sec] == 100; sec-- {
			back = sec
		}
		t.Logf("maxAttempts=%d minRetriesPerSecond=%d: calls answered per second after recovery %v", tc.maxAttempts, tc.minRetries, ok)
		if back < 0 || back > 10 {
			t.Errorf("every call succeeds again from second %d after recovery, want within 10", back)
		}
	}
}

// TestThrottledRegionRecovers throttles a shared region to almost nothing with
// a minute of 429s, then lets it recover: within 30 s it is back to at least
// 90% of the traffic it had before.
func TestThrottledRegionRecovers(t *testing.T) {
	clk := newClock()
	p := mustNew(t, pool(shared("europe-west1", 0), shared("europe-west2", 0), shared("europe-west3", 0)), clk)
	down := false
	serve := func(region string, _ time.Time) Outcome {
		if down && region == "europe-west1" {
			return Capacity
		}
		return Success
	}
	// share is europe-west1's share of attempts over d.
	share := func(d time.Duration) float64 {
		s := simulate(p, clk, 100, d, serve, nil)
		return float64(s.byRegion["europe-west1"]) / float64(s.attempts)
	}
	simulate(p, clk, 100, 20*time.Second, serve, nil)
	before := share(10 * time.Second)
	down = true
	// The throttle judges the region only on minRequests answers in its
	// window, and a region throttled to a trickle hovers about that many:
	// its probability is 0 for a moment each time the trickle falls under
	// them, so it is read each second, not once.
	var most float64
	for range 50 {
		simulate(p, clk, 100, time.Second, serve, nil)
		most = max(most, p.Snapshot().Regions[0].ThrottleProbability)
	}
	throttled := share(10 * time.Second)
	if snap := p.Snapshot(); most < 0.8 || snap.Regions[0].TimesEjected != 0 {
		t.Errorf("a minute of 429s: throttle at most %.2f, ejected %d times; want throttled, never ejected",
			most, snap.Regions[0].TimesEjected)
	}
	down = false
	simulate(p, clk, 100, 25*time.Second, serve, nil)
	after := share(5 * time.Second)
	t.Logf("europe-west1 share: before %.3f, throttled %.3f, 25-30 s after recovery %.3f", before, throttled, after)
	if throttled > 0.1*before {
		t.Errorf("throttled share %.3f, want under a tenth of %.3f", throttled, before)
	}
	if after < 0.9*before {
		t.Errorf("share 25-30 s after recovery %.3f, want >= 90%% of %.3f", after, before)
	}
}
