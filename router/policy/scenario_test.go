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
// in bursts (one second in ten fails 40% of calls, the rest 1%), and the
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
			if now.Sub(begin)%(10*time.Second) < time.Second {
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

// TestOutageReplay runs the outage through the adaptive policy and the
// baselines: the adaptive policy serves at least 99.5% and never answers "no
// regions"; the count blocklist fails most calls.
func TestOutageReplay(t *testing.T) {
	const rps, dur = 50, 10 * time.Minute
	for _, tc := range []struct {
		name   string
		new    func(table.Pool, Options) (Router, error)
		assert func(t *testing.T, rate float64, s simStats)
	}{
		{"adaptive", newAdaptive, func(t *testing.T, rate float64, s simStats) {
			if rate < 0.995 {
				t.Errorf("success %.4f, want >= 0.995", rate)
			}
			if s.noRegions != 0 {
				t.Errorf("%d calls failed with %q", s.noRegions, ErrNoRegions)
			}
		}},
		{"blocklist", newBlocklistRouter, func(t *testing.T, rate float64, s simStats) {
			if rate >= 0.5 {
				t.Errorf("blocklist success %.4f, want the outage (< 0.5)", rate)
			}
			if s.noRegions == 0 {
				t.Errorf("blocklist never ran out of regions")
			}
		}},
		{"allowlist", func(tp table.Pool, o Options) (Router, error) { return NewAllowlist(tp, o) }, func(t *testing.T, rate float64, s simStats) {
			if s.noRegions != 0 {
				t.Errorf("allowlist ran out of regions %d times with a provisioned region it never removes", s.noRegions)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			r, err := tc.new(outagePool(), Options{Now: clk.Now, Seed: 7})
			if err != nil {
				t.Fatal(err)
			}
			s := simulate(r, clk, rps, dur, outageBackend(42), nil)
			rate := float64(s.ok) / float64(s.requests)
			t.Logf("%s: %d requests, success %.4f, attempts/request %.3f, errors %v, attempts by region %v",
				tc.name, s.requests, rate, float64(s.attempts)/float64(s.requests), s.errs, s.byRegion)
			tc.assert(t, rate, s)
			for _, rs := range r.Snapshot().Regions {
				if rs.Tier == table.TierProvisioned && rs.TimesEjected > 0 && tc.name != "blocklist" {
					t.Errorf("provisioned region %s was ejected %d times", rs.Name, rs.TimesEjected)
				}
			}
		})
	}
}

// TestAllFailRetryBudget sends 100 requests per second to a pool where every
// region fails every call: in every 10 s window, attempts per request stay
// within 1.1 + minRetriesPerSecond/100, whatever maxAttempts allows.
func TestAllFailRetryBudget(t *testing.T) {
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
		floor := int64(tc.minRetries)
		for w := range req {
			ratio := float64(att[w]) / float64(req[w])
			bound := 1.1 + float64(floor)/100
			t.Logf("maxAttempts=%d minRetriesPerSecond=%d window %d: %d requests, %.4f attempts/request (bound %.2f)", tc.maxAttempts, floor, w, req[w], ratio, bound)
			if int64(att[w])*100 > (110+floor)*int64(req[w]) {
				t.Errorf("window %d: %.4f attempts per request, want <= %.2f", w, ratio, bound)
			}
		}
		if s.ok != 0 {
			t.Errorf("%d successes from regions that always fail", s.ok)
		}
		for _, rs := range p.Snapshot().Regions {
			if rs.Tier == table.TierProvisioned && rs.Ejected {
				t.Errorf("provisioned region %s is ejected", rs.Name)
			}
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
	simulate(p, clk, 100, 50*time.Second, serve, nil)
	throttled := share(10 * time.Second)
	if snap := p.Snapshot(); snap.Regions[0].ThrottleProbability < 0.8 || snap.Regions[0].TimesEjected != 0 {
		t.Errorf("after a minute of 429s: throttle %.2f, ejected %d times; want throttled, never ejected",
			snap.Regions[0].ThrottleProbability, snap.Regions[0].TimesEjected)
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
