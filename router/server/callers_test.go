package server_test

import (
	"net/http"
	"testing"

	"github.com/regionwarden/regionwarden/router/auth"
	"github.com/regionwarden/regionwarden/router/server"
	"github.com/regionwarden/regionwarden/router/table"
	"github.com/regionwarden/regionwarden/router/upstream/upstreamtest"
)

const generate = "/v1/projects/" + project + "/locations/europe-west1/publishers/google/models/" + model + ":generateContent"

// TestCallerCannotClaimAbovePoolCeiling: a caller that asks for "critical"
// under a pool whose ceiling is "sheddable" runs, and is shed, as
// sheddable. The pool takes one call at a time; a held call fills it, so the
// next is shed, under the priority it really had.
func TestCallerCannotClaimAbovePoolCeiling(t *testing.T) {
	for _, tc := range []struct {
		ceiling table.Priority
		want    string
	}{
		{table.PrioritySheddable, "sheddable"},
		{table.PriorityCritical, "critical"},
	} {
		t.Run(string(tc.ceiling), func(t *testing.T) {
			a := startRegion(t, "europe-west1", table.TierShared)
			hold := make(chan struct{})
			defer close(hold)
			a.set(func(b *upstreamtest.Behavior) { b.Hold = hold })
			pol := table.DefaultPolicy()
			pol.Concurrency = table.Concurrency{MaxInFlight: 1, RegionInitialLimit: 1, RegionMaxLimit: 1}
			pool := poolOf(pol, region(a, 0))
			pool.Callers = table.Callers{MaxPriority: tc.ceiling}
			authn, err := auth.New(auth.ModeNone, nil)
			if err != nil {
				t.Fatal(err)
			}
			r := startRouterWith(t, func(o *server.Options) { o.Auth = authn }, pool)

			go func() { _, _ = r.post(generate, `{"contents":[{"parts":[{"text":"hold"}]}]}`, nil) }()
			<-a.Started
			resp, body := r.post(generate, `{"contents":[{"parts":[{"text":"hi"}]}]}`, http.Header{"X-Regionwarden-Priority": {"critical"}})
			if resp.StatusCode != http.StatusTooManyRequests {
				t.Fatalf("the second call: %d %s, want 429", resp.StatusCode, body)
			}
			labels := map[string]string{"pool": project + "/google/" + model, "priority": tc.want}
			if n := counter(t, r.metrics, "regionwarden_router_shed_total", labels); n != 1 {
				t.Errorf("shed_total{priority=%q} = %v, want 1: a call asking for critical runs at most at the pool's ceiling %s", tc.want, n, tc.ceiling)
			}
		})
	}
}

// TestRefusedCallerCostsNothing: a caller refused for who it is gets
// Google's error JSON (401 UNAUTHENTICATED) before the call is admitted or
// its body read: the region sees nothing and the refusal is counted.
func TestRefusedCallerCostsNothing(t *testing.T) {
	a := startRegion(t, "europe-west1", table.TierShared)
	authn, err := auth.New(auth.ModeForward, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := startRouterWith(t, func(o *server.Options) { o.Auth = authn }, poolOf(table.DefaultPolicy(), region(a, 0)))
	resp, body := r.post(generate, `{"contents":[{"parts":[{"text":"hi"}]}]}`, nil)
	if code, _, st := googleErr(t, body); resp.StatusCode != http.StatusUnauthorized || code != 401 || st != "UNAUTHENTICATED" {
		t.Fatalf("no token: %d %s", resp.StatusCode, body)
	}
	if a.Calls() != 0 {
		t.Error("a refused call reached the region")
	}
	if n := counter(t, r.metrics, "regionwarden_router_caller_refusals_total", map[string]string{"reason": "unauthenticated"}); n != 1 {
		t.Errorf("caller_refusals_total{reason=unauthenticated} = %v, want 1", n)
	}
	if n := counter(t, r.metrics, "regionwarden_router_in_flight_requests", nil); n != 0 {
		t.Errorf("in flight = %v after a refusal", n)
	}
}
