package controllers

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capacityv1alpha1 "github.com/regionwarden/regionwarden/api/v1alpha1"
	"github.com/regionwarden/regionwarden/router/table"
)

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
