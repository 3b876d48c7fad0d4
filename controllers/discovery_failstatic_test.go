package controllers

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capacityv1alpha1 "github.com/regionwarden/regionwarden/api/v1alpha1"
	"github.com/regionwarden/regionwarden/router/table"
)

// TestDiscoveryIsFailStatic reconciles by hand on a fake clock: a GCP outage
// changes nothing in the table, however long it lasts and across an operator
// restart; an ended order keeps its protection until GCP's answers have
// omitted it for longer than the grace period.
func TestDiscoveryIsFailStatic(t *testing.T) {
	e := newDiscoveryEnv(t, discoveryEnvOptions{})
	interval := capacityv1alpha1.DefaultDiscoveryInterval
	grace := capacityv1alpha1.DefaultGracePeriod
	e.gcpShows("europe-west4", 4, 7000)
	e.createPool("flash", discoveryRegions)

	res := e.reconcile("flash")
	if res.RequeueAfter < interval || res.RequeueAfter > interval+time.Duration(VerificationJitter*float64(interval)) {
		t.Errorf("requeue after %v, want the discovery interval %v plus jitter", res.RequeueAfter, interval)
	}
	protected := e.waitTable("flash-routing", "protects europe-west4", protects("europe-west4"))
	if r := protected.region("europe-west4"); r.Source != table.SourceDiscovered {
		t.Fatalf("europe-west4 = %+v, want discovered", r)
	}
	firstSeen := e.pool("flash").Status.Discovered[0].LastSeenTime

	// expectProtected reconciles and checks that the table is the protected
	// one, byte for byte, and that the ConfigMap was not written.
	expectProtected := func(when string) *capacityv1alpha1.RegionPool {
		t.Helper()
		e.reconcile("flash")
		rt, _ := e.readTable("flash-routing")
		if rt.cm.ResourceVersion != protected.cm.ResourceVersion || rt.cm.Data[table.DataKey] != protected.cm.Data[table.DataKey] {
			t.Errorf("%s: the table changed:\n%s", when, rt.cm.Data[table.DataKey])
		}
		p := e.pool("flash")
		if len(p.Status.Discovered) != 1 || p.Status.Discovered[0].Name != "europe-west4" {
			t.Fatalf("%s: discovered = %+v", when, p.Status.Discovered)
		}
		if c := capacityDeclared(p); c == nil || c.Status != metav1.ConditionFalse {
			t.Errorf("%s: CapacityDeclared = %+v, want False", when, c)
		}
		return p
	}

	// GCP goes down. Every call fails; nothing changes, for longer than the
	// grace period.
	e.fake.SetError(testProject, status.Error(codes.Unavailable, "Monitoring is down"))
	calls := e.fake.TotalCalls()
	e.clk.Step(interval)
	res = e.reconcile("flash")
	if e.fake.TotalCalls() == calls {
		t.Fatal("the reconcile after the interval did not ask GCP")
	}
	if res.RequeueAfter > SourceRetryInterval+time.Duration(VerificationJitter*float64(SourceRetryInterval)) {
		t.Errorf("requeue after %v during an outage, want at most %v plus jitter", res.RequeueAfter, SourceRetryInterval)
	}
	expectProtected("during the outage")
	e.clk.Step(2 * grace)
	p := expectProtected("an outage longer than the grace period")
	if !p.Status.Discovered[0].LastSeenTime.Equal(&firstSeen) || p.Status.Discovered[0].MissingSince != nil {
		t.Errorf("an outage counted as an answer: %+v", p.Status.Discovered[0])
	}

	// The operator restarts during the outage: a new reconciler with an empty
	// cache keeps the protection from the pool's status.
	e.r = &RegionPoolReconciler{Client: e.r.Client, Reader: e.r.Reader, Recorder: e.rec, Facts: NewFacts(e.src, 0, e.clk.Now)}
	expectProtected("after a restart during the outage")

	// GCP answers again, still with the order.
	e.fake.SetError(testProject, nil)
	e.clk.Step(interval)
	p = expectProtected("after the outage")
	if !p.Status.Discovered[0].LastSeenTime.After(firstSeen.Time) {
		t.Errorf("lastSeenTime %v did not move past %v", p.Status.Discovered[0].LastSeenTime, firstSeen)
	}

	// The order ends. The region stays protected while GCP's answers have
	// omitted it for up to the grace period; an outage in between does not
	// count, however long.
	e.orderEnds("europe-west4")
	e.clk.Step(interval)
	p = expectProtected("at the first answer without the order")
	missingSince := p.Status.Discovered[0].MissingSince
	if missingSince == nil {
		t.Fatal("missingSince not set")
	}
	// answered steps the clock one interval at a time, GCP answering each
	// reconcile, for as long as d allows.
	answered := func(d time.Duration, when string) {
		for end := e.clk.Now().Add(d); !e.clk.Now().Add(interval).After(end); {
			e.clk.Step(interval)
			expectProtected(when)
		}
	}
	answered(grace/2, "half the grace period later")
	e.fake.SetError(testProject, status.Error(codes.Unavailable, "Monitoring is down"))
	for range 24 { // two hours: longer than the grace period
		e.clk.Step(interval)
		expectProtected("in an outage after the order ended")
	}
	e.fake.SetError(testProject, nil)
	e.clk.Step(interval)
	p = expectProtected("at the first answer after the outage")
	outage := 25*interval - answerGap(interval)
	if got := p.Status.Discovered[0].MissingSince; !got.Equal(stamp(missingSince.Add(outage))) {
		t.Fatalf("missingSince moved from %v to %v, want by the outage, %v", missingSince, got, outage)
	}
	answered(missingSince.Add(outage+grace).Sub(e.clk.Now()), "answered up to the grace period")

	e.clk.Step(interval)
	e.reconcile("flash")
	rt := e.waitTable("flash-routing", "makes europe-west4 shared", sharedOrAbsent("europe-west4"))
	if r := rt.region("europe-west4"); r == nil || !r.Ejectable || r.Source != table.SourceSpec {
		t.Errorf("europe-west4 after the grace period = %+v, want listed, shared and ejectable", r)
	}
	p = e.pool("flash")
	if len(p.Status.Discovered) != 0 || len(p.Status.ProtectedRegions) != 0 {
		t.Errorf("discovered %+v, protected %v after the grace period", p.Status.Discovered, p.Status.ProtectedRegions)
	}
	if c := capacityDeclared(p); c == nil || c.Status != metav1.ConditionTrue || c.Reason != capacityv1alpha1.ReasonDeclared {
		t.Errorf("CapacityDeclared = %+v, want True", c)
	}
	if _, ok := e.discoveredMetric(t, "flash", "europe-west4"); ok {
		t.Error("the undeclared-region series outlives the order")
	}
	if n := e.rec.await(t, "flash", eventWarning, capacityv1alpha1.ReasonUndeclaredProvisionedThroughput, 1); n != 1 {
		t.Errorf("%d undeclared events over the whole life of the order, want 1", n)
	}
}
