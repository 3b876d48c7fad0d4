package controllers

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capacityv1alpha1 "github.com/regionwarden/regionwarden/api/v1alpha1"
	"github.com/regionwarden/regionwarden/internal/gcp"
	"github.com/regionwarden/regionwarden/router/table"
)

// TestDiscoveryModes runs a pool over four regions where GCP reports PT in
// europe-west4 and no ProvisionedThroughput object exists, under each mode.
func TestDiscoveryModes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		mode     capacityv1alpha1.DiscoveryMode
		noSource bool
		// protected: europe-west4 is provisioned in the table.
		protected bool
		// asks: GCP is asked.
		asks bool
		// status and reason of CapacityDeclared.
		status metav1.ConditionStatus
		reason string
		// message holds these.
		message []string
	}{
		{name: "protect", mode: capacityv1alpha1.DiscoveryProtect, protected: true, asks: true,
			status: metav1.ConditionFalse, reason: capacityv1alpha1.ReasonUndeclaredProvisionedThroughput,
			message: []string{"europe-west4 (4 GSUs)", "routed as provisioned", "kind: ProvisionedThroughput", "location: europe-west4", "gsus: 4"}},
		{name: "default is protect", protected: true, asks: true,
			status: metav1.ConditionFalse, reason: capacityv1alpha1.ReasonUndeclaredProvisionedThroughput,
			message: []string{"europe-west4 (4 GSUs)"}},
		{name: "warn", mode: capacityv1alpha1.DiscoveryWarn, asks: true,
			status: metav1.ConditionFalse, reason: capacityv1alpha1.ReasonUndeclaredProvisionedThroughput,
			message: []string{"europe-west4 (4 GSUs)", "Warn", "kind: ProvisionedThroughput"}},
		{name: "off", mode: capacityv1alpha1.DiscoveryOff,
			status: metav1.ConditionUnknown, reason: capacityv1alpha1.ReasonDiscoveryOff, message: []string{"Off"}},
		{name: "manager without GCP", mode: capacityv1alpha1.DiscoveryProtect, noSource: true,
			status: metav1.ConditionUnknown, reason: capacityv1alpha1.ReasonDiscoveryOff, message: []string{"--gcp-verify=false"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newDiscoveryEnv(t, discoveryEnvOptions{runPools: true, noSource: tc.noSource})
			e.gcpShows("europe-west4", 4, 7000)
			var opts []poolOption
			if tc.mode != "" {
				opts = append(opts, poolWithDiscovery(tc.mode))
			}
			e.createPool("flash", discoveryRegions, opts...)

			p := e.waitPool("flash", "reconciled with CapacityDeclared", func(p *capacityv1alpha1.RegionPool) bool {
				return isReconciled(p) && capacityDeclared(p) != nil && capacityDeclared(p).Status == tc.status
			})
			c := capacityDeclared(p)
			if c.Reason != tc.reason || c.ObservedGeneration != p.Generation {
				t.Errorf("CapacityDeclared = %+v, want reason %s", c, tc.reason)
			}
			for _, m := range tc.message {
				if !strings.Contains(c.Message, m) {
					t.Errorf("CapacityDeclared message lacks %q:\n%s", m, c.Message)
				}
			}

			rt, _ := e.readTable("flash-routing")
			if rt.table == nil {
				t.Fatal("no routing table")
			}
			wantTiers := []string{"europe-west1=shared", "europe-west4=shared", "us-central1=shared", "us-east5=shared"}
			if tc.protected {
				wantTiers = []string{"europe-west4=provisioned", "europe-west1=shared", "us-central1=shared", "us-east5=shared"}
			}
			if got := tiers(rt); !slices.Equal(got, wantTiers) {
				t.Errorf("tiers = %v, want %v", got, wantTiers)
			}
			ew4 := rt.region("europe-west4")
			st := p.Status.Regions[slices.IndexFunc(p.Status.Regions, func(r capacityv1alpha1.RegionStatus) bool { return r.Name == "europe-west4" })]
			if tc.protected {
				if ew4.Ejectable || ew4.Source != table.SourceDiscovered || ew4.Capacity.GSUs != 4 || ew4.Capacity.TokensPerSecond != 7000 {
					t.Errorf("europe-west4 = %+v, want never ejectable, discovered, 4 GSUs and 7000 tokens/s", ew4)
				}
				if st.Source != string(table.SourceDiscovered) || st.Tier != string(table.TierProvisioned) || st.Ejectable {
					t.Errorf("status region = %+v", st)
				}
				if !slices.Equal(p.Status.ProtectedRegions, []string{"europe-west4"}) {
					t.Errorf("protectedRegions = %v", p.Status.ProtectedRegions)
				}
			} else if !ew4.Ejectable || ew4.Source != table.SourceSpec || st.Source != string(table.SourceSpec) {
				t.Errorf("europe-west4 = %+v (status %+v), want ejectable from the spec", ew4, st)
			}

			events := e.rec.count("flash", eventWarning, capacityv1alpha1.ReasonUndeclaredProvisionedThroughput)
			value, hasMetric := e.discoveredMetric(t, "flash", "europe-west4")
			if tc.asks {
				if len(p.Status.Discovered) != 1 || p.Status.Discovered[0].Name != "europe-west4" || p.Status.Discovered[0].GSUs != 4 ||
					p.Status.Discovered[0].ProvisionedThroughput != "" || p.Status.LastDiscoveryTime == nil {
					t.Errorf("discovered = %+v, lastDiscoveryTime %v", p.Status.Discovered, p.Status.LastDiscoveryTime)
				}
				if events != 1 {
					t.Errorf("%d %s events, want 1", events, capacityv1alpha1.ReasonUndeclaredProvisionedThroughput)
				}
				if !hasMetric || value != 1 {
					t.Errorf("metric = %v (present %v), want 1", value, hasMetric)
				}
				if e.fake.TotalCalls() == 0 {
					t.Error("GCP was never asked")
				}
			} else {
				if calls := e.fake.TotalCalls(); calls != 0 {
					t.Errorf("GCP was asked %d times with discovery off", calls)
				}
				if len(p.Status.Discovered) != 0 || events != 0 || hasMetric {
					t.Errorf("discovery off left discovered %+v, %d events, metric %v", p.Status.Discovered, events, hasMetric)
				}
			}
			if !meta.IsStatusConditionTrue(p.Status.Conditions, capacityv1alpha1.ConditionReady) {
				t.Errorf("Ready is not True: %+v", p.Status.Conditions)
			}
		})
	}
}

// TestDiscoveryDeclaringKeepsTheRegionProvisioned runs both controllers on one
// GCP cache: a discovered region is declared by creating its PT object, and a
// router watching the ConfigMap never sees the region leave the provisioned
// tier on its way from discovered to declared.
func TestDiscoveryDeclaringKeepsTheRegionProvisioned(t *testing.T) {
	e := newDiscoveryEnv(t, discoveryEnvOptions{runPools: true, runPTs: true})
	e.gcpShows("europe-west4", 4, 7000)
	e.createPool("flash", discoveryRegions)
	e.waitTable("flash-routing", "protects the discovered europe-west4", func(rt routingTable) bool {
		r := rt.region("europe-west4")
		return r != nil && r.Tier == table.TierProvisioned && r.Source == table.SourceDiscovered
	})
	e.waitPool("flash", "warns of undeclared capacity", func(p *capacityv1alpha1.RegionPool) bool {
		c := capacityDeclared(p)
		return c != nil && c.Status == metav1.ConditionFalse
	})
	callsBefore := e.fake.TotalCalls()

	tw := e.watchTable("flash-routing")
	// The team applies the object the condition's message shows.
	createPT(e.t, e.ns, "ew4-order", 4, withLocation("europe-west4"))
	e.waitTable("flash-routing", "routes europe-west4 as declared", func(rt routingTable) bool {
		r := rt.region("europe-west4")
		return r != nil && r.Tier == table.TierProvisioned && r.Source == table.SourceDeclared
	})
	p := e.waitPool("flash", "has its capacity declared", func(p *capacityv1alpha1.RegionPool) bool {
		return meta.IsStatusConditionTrue(p.Status.Conditions, capacityv1alpha1.ConditionCapacityDeclared)
	})
	versions := tw.stop()

	if len(versions) < 2 {
		t.Fatalf("the watch saw %d versions, want the discovered one and the declared one", len(versions))
	}
	for i, v := range versions {
		if v.table == nil {
			t.Fatalf("version %d of the ConfigMap holds no table", i)
		}
		if r := v.region("europe-west4"); r == nil || r.Tier != table.TierProvisioned || r.Ejectable {
			t.Errorf("version %d (resourceVersion %s): europe-west4 = %+v, want provisioned and never ejectable", i, v.cm.ResourceVersion, r)
		}
	}
	if r := versions[len(versions)-1].region("europe-west4"); r.Source != table.SourceDeclared || r.Capacity.GSUs != 4 {
		t.Errorf("last version's europe-west4 = %+v, want declared with 4 GSUs", r)
	}

	c := capacityDeclared(p)
	if c.Reason != capacityv1alpha1.ReasonDeclared || !strings.Contains(c.Message, "ew4-order") {
		t.Errorf("CapacityDeclared = %+v", c)
	}
	if len(p.Status.Discovered) != 1 || p.Status.Discovered[0].ProvisionedThroughput != "ew4-order" {
		t.Errorf("discovered = %+v, want europe-west4 declared by ew4-order", p.Status.Discovered)
	}
	if _, ok := e.discoveredMetric(t, "flash", "europe-west4"); ok {
		t.Error("the undeclared-region series outlives the declaration")
	}
	// Verification of the new object and every discovery since came from the
	// same cached answer: the PT controller and the pool share one call per
	// project and interval.
	if calls := e.fake.TotalCalls(); calls != callsBefore {
		t.Errorf("declaring made %d more Monitoring calls, want 0: the controllers do not share the cache", calls-callsBefore)
	}
	if n := e.rec.await(t, "flash", eventWarning, capacityv1alpha1.ReasonUndeclaredProvisionedThroughput, 1); n != 1 {
		t.Errorf("%d undeclared events, want 1", n)
	}

	// Deleting the object makes the capacity undeclared again, and the region
	// stays provisioned on GCP's word.
	if err := e.cl.Delete(context.Background(), &capacityv1alpha1.ProvisionedThroughput{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "ew4-order"}}); err != nil {
		t.Fatal(err)
	}
	tw = e.watchTable("flash-routing")
	e.waitTable("flash-routing", "routes europe-west4 as discovered again", func(rt routingTable) bool {
		r := rt.region("europe-west4")
		return r != nil && r.Source == table.SourceDiscovered
	})
	e.waitPool("flash", "warns again", func(p *capacityv1alpha1.RegionPool) bool {
		c := capacityDeclared(p)
		return c != nil && c.Status == metav1.ConditionFalse
	})
	for i, v := range tw.stop() {
		if r := v.region("europe-west4"); v.table == nil || r == nil || r.Tier != table.TierProvisioned {
			t.Errorf("after deletion, version %d: europe-west4 = %+v, want provisioned", i, r)
		}
	}
	if n := e.rec.await(t, "flash", eventWarning, capacityv1alpha1.ReasonUndeclaredProvisionedThroughput, 2); n != 2 {
		t.Errorf("%d undeclared events, want 2: one more for the region undeclared again", n)
	}
}

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

// TestCapacitySaturated feeds a pool GCP's answers every 5 minutes: its
// provisioned region's utilization shows in status.discovered, and
// CapacitySaturated turns True only once the answers have shown it at or over
// 90% for 15 minutes, and False at the first answer under it.
func TestCapacitySaturated(t *testing.T) {
	pool := testPool("europe-west1", "europe-west4")
	r := &RegionPoolReconciler{}
	answer := func(at time.Duration, dedicated float64) *metav1.Condition {
		t.Helper()
		facts := &gcp.ProjectFacts{Project: testProject, FetchedAt: ptT0.Add(at), Entries: []gcp.Facts{{
			Location: "europe-west1", Publisher: "google", Model: testModel, GSUs: 6, TokensPerSecond: 15000,
			Consumed: map[string]float64{gcp.RequestTypeDedicated: dedicated},
		}}}
		pool.Status.Discovered = mergeDiscovered(pool, pool.Status.Discovered, facts, pool.Status.LastDiscoveryTime, capacityv1alpha1.DefaultDiscoveryInterval)
		pool.Status.LastDiscoveryTime = stamp(facts.FetchedAt)
		r.setCapacitySaturated(pool)
		return meta.FindStatusCondition(pool.Status.Conditions, capacityv1alpha1.ConditionCapacitySaturated)
	}
	steps := []struct {
		at        time.Duration
		dedicated float64
		want      metav1.ConditionStatus
	}{
		{0, 9000, metav1.ConditionFalse},                 // 60%
		{5 * time.Minute, 14000, metav1.ConditionFalse},  // 93%: saturated since 5m
		{10 * time.Minute, 13600, metav1.ConditionFalse}, // 91%
		{15 * time.Minute, 14500, metav1.ConditionFalse}, // 97%, for 10 minutes
		{20 * time.Minute, 14500, metav1.ConditionTrue},  // for 15 minutes
		{25 * time.Minute, 12000, metav1.ConditionFalse}, // 80%
	}
	for _, s := range steps {
		c := answer(s.at, s.dedicated)
		if c == nil || c.Status != s.want {
			t.Fatalf("at %s with %v tokens/s: CapacitySaturated %+v, want %s", s.at, s.dedicated, c, s.want)
		}
		d := pool.Status.Discovered[0]
		if d.Utilization != s.dedicated/15000 {
			t.Errorf("at %s: utilization %v, want %v", s.at, d.Utilization, s.dedicated/15000)
		}
		if s.at == 20*time.Minute && (d.SaturatedSince == nil || !d.SaturatedSince.Time.Equal(ptT0.Add(5*time.Minute))) {
			t.Errorf("saturatedSince = %v, want the 5m answer", d.SaturatedSince)
		}
	}
	if pool.Status.Discovered[0].SaturatedSince != nil {
		t.Error("saturatedSince kept after an answer under the threshold")
	}
}
