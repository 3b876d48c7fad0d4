package server_test

import (
	"net/http"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/regionwarden/regionwarden/router/policy"
	"github.com/regionwarden/regionwarden/router/upstream/upstreamtest"
)

// team and neighbor are two callers of one pool, by their credentials.
const team, neighbor = "Bearer " + callerTok, "Bearer neighbor-token"

// neighborsPool starts a PT and a shared region behind a router that
// forwards its callers' credentials, has the PT (and the shared region, with
// sharedToo) fail the neighbor's calls (500 INTERNAL on what they carry),
// and gives the regions a history of 40 of the team's calls. call sends a
// generateContent with credentials auth and returns its status; shared is
// the shared region.
func neighborsPool(t *testing.T, sharedToo bool) (shared *fakeRegion, r *router, call func(auth string) int) {
	t.Helper()
	pt, shared, r := forwardingRouter(t)
	failing := []*fakeRegion{pt}
	if sharedToo {
		failing = append(failing, shared)
	}
	for _, region := range failing {
		region.set(func(b *upstreamtest.Behavior) { b.Refuse = map[string]codes.Code{neighbor: codes.Internal} })
	}
	body := `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`
	path := "/v1/projects/" + project + "/locations/europe-west1/publishers/google/models/" + model + ":generateContent"
	call = func(auth string) int {
		resp, _ := r.post(path, body, http.Header{"Authorization": {auth}})
		return resp.StatusCode
	}
	for range 40 {
		if code := call(team); code != http.StatusOK {
			t.Fatalf("the team's call: %d", code)
		}
	}
	return shared, r, call
}

// TestANeighborsFailingCallsDemoteNothing: in a pool that serves one team,
// a neighbor starts sending calls that Google's servers fail wherever they
// go (500 INTERNAL on what they carry). The router tells the neighbor by
// its credentials: after its first few failures, its calls get their 500
// at once, without a retry, and count toward nothing, so the PT is not
// demoted and the team's calls stay on it, all served. Before the change
// the neighbor's failures, half the PT's answers and retried to the
// shared region, demoted the PT and sent the team to pay-as-you-go.
func TestANeighborsFailingCallsDemoteNothing(t *testing.T) {
	shared, r, call := neighborsPool(t, true)
	neighborFailed := 0
	for range 60 {
		if code := call(neighbor); code == http.StatusInternalServerError {
			neighborFailed++
		}
		if code := call(team); code != http.StatusOK {
			t.Errorf("the team's call: %d", code)
		}
	}
	if neighborFailed != 60 {
		t.Errorf("%d of the neighbor's 60 calls got Google's 500, want all", neighborFailed)
	}
	for _, p := range r.srv.Snapshots() {
		for _, reg := range p.Regions {
			if reg.TimesDemoted > 0 || reg.TimesEjected > 0 {
				t.Errorf("%s demoted %d times, ejected %d times by the neighbor's calls", reg.Name, reg.TimesDemoted, reg.TimesEjected)
			}
		}
	}
	team2shared := 0
	for _, c := range shared.Seen() {
		if len(c.Auth) == 1 && c.Auth[0] == team {
			team2shared++
		}
	}
	if team2shared != 0 {
		t.Errorf("the shared region served %d of the team's calls, want none: the PT serves them", team2shared)
	}
	if own := r.attempts("europe-west1", "provisioned", policy.CallerFault); own < 50 {
		t.Errorf("the PT's attempts of the neighbor counted its own fault: %v of 60, want nearly all", own)
	}
	if retried := shared.Calls(); retried > 10 {
		t.Errorf("the shared region got %d of the neighbor's calls, want a few retries at most", retried)
	}
}

// TestANeighborFailingInThePTAloneDemotesNothing: a team's calls are served
// by the PT when a neighbor starts sending three calls for each of the
// team's that Google's servers fail in the PT alone (500 INTERNAL on what
// they carry) and serve in the shared region. The neighbor fails alone in
// the PT, which serves the team: its failures there are retried, and count
// toward nothing of the PT's, so the PT is never demoted and keeps the
// team's calls; and the neighbor's calls go to the shared region first.
// Before, its failures, three to each of the team's successes, demoted the
// PT and sent the team to pay-as-you-go.
func TestANeighborFailingInThePTAloneDemotesNothing(t *testing.T) {
	shared, r, call := neighborsPool(t, false)
	const calls = 120
	for i := range calls {
		if code := call(neighbor); code != http.StatusOK {
			t.Errorf("the neighbor's call: %d, want it served by the shared region", code)
		}
		if i%3 == 2 {
			if code := call(team); code != http.StatusOK {
				t.Errorf("the team's call: %d", code)
			}
		}
	}
	for _, p := range r.srv.Snapshots() {
		for _, reg := range p.Regions {
			if reg.TimesDemoted > 0 || reg.TimesEjected > 0 {
				t.Errorf("%s demoted %d times, ejected %d times by the neighbor's calls", reg.Name, reg.TimesDemoted, reg.TimesEjected)
			}
		}
	}
	for _, c := range shared.Seen() {
		if len(c.Auth) != 1 || c.Auth[0] != neighbor {
			t.Fatalf("the shared region served a call of the team's: the PT must keep them")
		}
	}
	// The neighbor fails alone once it has failed in the PT as often as a
	// region is judged on (the ejection's minRequests, 20); its calls go to
	// the shared region first from then on.
	if failed := r.attempts("europe-west1", "provisioned", policy.Failure); failed > 22 {
		t.Errorf("the PT failed %v of the neighbor's calls, want its calls elsewhere after about 20", failed)
	}
}
