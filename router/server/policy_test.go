package server_test

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/regionwarden/regionwarden/router/policy"
	"github.com/regionwarden/regionwarden/router/table"
	"github.com/regionwarden/regionwarden/router/upstream/upstreamtest"
)

// callEvery sends n requests through the SDK, moving the policy's clock by
// step before each, and returns how many failed.
func (r *router) callEvery(n int, step time.Duration) (failed int) {
	r.t.Helper()
	c := r.client("")
	for range n {
		r.clock.Advance(step)
		if _, err := r.generate(c, "hi"); err != nil {
			failed++
		}
	}
	return failed
}

// TestBurstyProvisionedRegionKeepsItsTraffic replays the outage's shape: the
// provisioned region answers 504 in bursts while most of its calls succeed.
// Under the ejection threshold it must keep taking first attempts (neither
// ejected nor demoted), while the failed calls succeed on retry in a shared
// region.
func TestBurstyProvisionedRegionKeepsItsTraffic(t *testing.T) {
	pt := startRegion(t, "europe-west1", table.TierProvisioned)
	s1 := startRegion(t, "us-central1", table.TierShared)
	s2 := startRegion(t, "asia-northeast1", table.TierShared)
	pt.set(func(b *upstreamtest.Behavior) {
		b.Fault = func(n int64) error {
			if n%10 < 4 { // bursts of four 504s in every ten calls
				return status.Error(codes.DeadlineExceeded, "upstream request timeout")
			}
			return nil
		}
	})
	pol := generous()
	pol.Ejection.MinRequests = 20
	pol.Ejection.FailureRateThreshold = 0.5 // 40% failures: intermittent, not failing
	r := startRouter(t, poolOf(pol, region(pt, 0), region(s1, 0), region(s2, 0)))

	const n = 200
	if failed := r.callEvery(n/2, 20*time.Millisecond); failed != 0 {
		t.Fatalf("%d of %d requests failed; every 504 should have been retried elsewhere", failed, n/2)
	}
	before := pt.calls.Load()
	if failed := r.callEvery(n/2, 20*time.Millisecond); failed != 0 {
		t.Fatalf("%d of %d requests failed", failed, n/2)
	}
	if got := pt.calls.Load() - before; got < n/2 {
		t.Errorf("provisioned region took %d of the last %d first attempts; it must keep its traffic", got, n/2)
	}
	snap := r.snapshotOf("europe-west1")
	if snap.Ejected || snap.TimesEjected != 0 || snap.TimesDemoted != 0 {
		t.Errorf("provisioned region ejected or demoted: %+v", snap)
	}
	if snap.Failing || snap.FailureRate < 0.3 {
		t.Errorf("provisioned region at 40%% failures (threshold 50%%) reported %v failing at %.2f: %+v", snap.Failing, snap.FailureRate, snap)
	}
	failures := r.attempts("europe-west1", "provisioned", policy.Failure)
	retried := r.attempts("us-central1", "shared", policy.Success) + r.attempts("asia-northeast1", "shared", policy.Success)
	if failures == 0 || retried != failures {
		t.Errorf("provisioned failures %v, successful retries in shared regions %v: want equal and non-zero", failures, retried)
	}
}

// TestSharedRegionAnswering429IsThrottledNotEjected: 429 means "no capacity
// now", so the region's share shrinks but it is never ejected.
func TestSharedRegionAnswering429IsThrottledNotEjected(t *testing.T) {
	busy := startRegion(t, "us-central1", table.TierShared)
	s2 := startRegion(t, "europe-west4", table.TierShared)
	s3 := startRegion(t, "asia-northeast1", table.TierShared)
	busy.set(func(b *upstreamtest.Behavior) {
		b.Fault = func(int64) error {
			return status.Error(codes.ResourceExhausted, "Resource exhausted, please try again later.")
		}
	})
	pol := generous()
	pol.Ejection.MinRequests = 5
	r := startRouter(t, poolOf(pol, region(busy, 0), region(s2, 0), region(s3, 0)))

	const n = 200
	if failed := r.callEvery(n, 20*time.Millisecond); failed != 0 {
		t.Fatalf("%d of %d requests failed; 429s should have been retried elsewhere", failed, n)
	}
	snap := r.snapshotOf("us-central1")
	if snap.Ejected || snap.TimesEjected != 0 {
		t.Errorf("a region answering 429 was ejected: %+v", snap)
	}
	if snap.ThrottleProbability < 0.5 {
		t.Errorf("throttle probability %v, want most calls turned away", snap.ThrottleProbability)
	}
	// An even spread would give the busy region a third of the first attempts.
	if got := busy.calls.Load(); got > n/6 {
		t.Errorf("busy region was tried %d times in %d requests; the throttle should turn most away", got, n)
	}
	if got := r.attempts("us-central1", "shared", policy.Failure); got != 0 {
		t.Errorf("429s counted as %v failures", got)
	}
}

// TestHardFailingRegionIsEjectedAndComesBack: a shared region that fails every
// call is ejected, gets nothing while ejected, and takes traffic again once
// its ejection ends and it answers.
func TestHardFailingRegionIsEjectedAndComesBack(t *testing.T) {
	bad, s2, s3, pol := oneOfThreeFailing(t)
	r := startRouter(t, poolOf(pol, region(bad, 0), region(s2, 0), region(s3, 0)))

	if failed := r.callEvery(60, 20*time.Millisecond); failed != 0 {
		t.Fatalf("%d requests failed; failures should have been retried elsewhere", failed)
	}
	snap := r.snapshotOf("us-central1")
	if !snap.Ejected || snap.TimesEjected != 1 {
		t.Fatalf("failing region not ejected: %+v", snap)
	}
	if got := counter(t, r.metrics, "regionwarden_router_region_ejected", map[string]string{"region": "us-central1"}); got != 1 {
		t.Errorf("region_ejected gauge = %v, want 1", got)
	}
	during := bad.calls.Load()
	if failed := r.callEvery(60, 20*time.Millisecond); failed != 0 {
		t.Fatalf("%d requests failed while the region was ejected", failed)
	}
	if got := bad.calls.Load() - during; got != 0 {
		t.Errorf("ejected region got %d calls", got)
	}

	bad.set(func(b *upstreamtest.Behavior) { b.Fault = nil })
	r.clock.Advance(pol.Ejection.BaseEjectionTime.Duration + time.Second)
	healed := bad.calls.Load()
	if failed := r.callEvery(60, 20*time.Millisecond); failed != 0 {
		t.Fatalf("%d requests failed after recovery", failed)
	}
	if got := bad.calls.Load() - healed; got == 0 {
		t.Error("recovered region got no calls after its ejection ended")
	}
	if snap := r.snapshotOf("us-central1"); snap.Ejected {
		t.Errorf("recovered region still ejected: %+v", snap)
	}
}
