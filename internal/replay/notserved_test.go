package replay

import (
	"testing"
	"time"

	"github.com/regionwarden/regionwarden/internal/emulator"
	"github.com/regionwarden/regionwarden/router/policy"
)

// TestModelNotServedInARegion replays a pay-as-you-go region that stops
// serving the pool's model (Google's 404 "Publisher Model ... was not found
// or your project does not have access to it", the model withdrawn from
// that location first) for a minute, in a pool whose PT and other quota can
// carry the whole load and a quarter without it: regionwarden retries
// those calls elsewhere, ejects the region, and serves at least 97% of what
// the others can carry (this build: all of it). A router that took the 404
// for the caller's fault (never retried, counted against no region) served
// 85.6% in the same replay: every call routed to that region was lost.
func TestModelNotServedInARegion(t *testing.T) {
	if testing.Short() {
		t.Skip("replays 100 s of scenario time in about 17 seconds")
	}
	sc := shortScenario(t, "shared-region-down", 30*time.Second, 100*time.Second)
	f := &sc.Regions[1].Faults[0]
	f.Code, f.To = 404, emulator.D(90*time.Second)
	sc.Regions[2].Capacity.RequestsPerSecond = 30 // the PT and this quota carry the load and a quarter
	sc = valid(t, sc)
	var pool *policy.Pool
	pol := InProcess(NameRegionwarden, func(env *Env) (Selector, error) {
		p, err := policy.New(env.Pool, policy.Options{Now: env.Now, Seed: env.Seed, Logger: env.logger()})
		pool = p
		return adaptive{p, env.Clock.Sleep}, err
	})
	rep, err := runOnSchedule(t, sc, []Policy{pol}, Options{Seed: 3, Scale: 6, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	r, fault := rep.Results[0], rep.Results[0].Fault
	t.Logf("%d calls, %.2f%% success, errors %v; during the fault: %d calls, %.2f%% success (%.2f%% can be carried), %.3f attempts/call",
		r.Requests, 100*r.SuccessRate(), r.Errors, fault.Requests, 100*fault.Success, 100*rep.FaultCarry, fault.AttemptsPerRequest)
	if want := 0.97 * rep.FaultCarry; fault.Success < want {
		t.Errorf("%.2f%% served while a region did not serve the model, want at least %.2f%%", 100*fault.Success, 100*want)
	}
	if fault.AttemptsPerRequest > 1.1 {
		t.Errorf("%.3f attempts per call, want at most 1.1", fault.AttemptsPerRequest)
	}
	name := sc.Regions[1].Name
	for _, rs := range pool.Snapshot().Regions {
		if rs.Name == name && rs.TimesEjected == 0 {
			t.Errorf("region %+v, want it ejected for answering that it does not serve the model", rs)
		}
	}
}
