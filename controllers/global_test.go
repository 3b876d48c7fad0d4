package controllers

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	capacityv1alpha1 "github.com/regionwarden/regionwarden/api/v1alpha1"
	"github.com/regionwarden/regionwarden/internal/gcp/gcpfake"
	"github.com/regionwarden/regionwarden/internal/waittest"
	"github.com/regionwarden/regionwarden/router/table"
)

// TestGlobalIsALocationOfItsOwn: a PT bought on global serves only calls to
// the global endpoint (aiplatform.googleapis.com), and a regional PT only
// calls to its region, so the operator never lets one stand for the other.
// Against the fake Cloud Monitoring read by the real client: a PT declared on
// global is verified by the series GCP labels location=global and by no
// other; a regional PT is not verified by global's series, nor a global PT by
// a region's; and an order GCP reports on global, declared nowhere, is
// discovered in a pool that lists global, called at the global endpoint,
// and leaves the pool's regions shared.
func TestGlobalIsALocationOfItsOwn(t *testing.T) {
	const (
		modelB = "gemini-b" // bought in europe-west4 alone
		modelC = "gemini-c" // bought on global, declared nowhere
	)
	e := newDiscoveryEnv(t, discoveryEnvOptions{runPools: true, runPTs: true})
	for _, pt := range []gcpfake.PT{
		{Project: testProject, Location: "global", Publisher: "google", Model: gcpModel, GSUs: 2, TokensPerSecond: 1000},
		{Project: testProject, Location: "europe-west4", Publisher: "google", Model: modelB + "-001", GSUs: 3, TokensPerSecond: 1500},
		{Project: testProject, Location: "global", Publisher: "google", Model: modelC + "-001", GSUs: 4, TokensPerSecond: 2000},
	} {
		e.fake.SetPT(pt)
	}

	createPT(t, e.ns, "global-order", 2, withLocation("global"))
	createPT(t, e.ns, "ew4-order", 2, withLocation("europe-west4"))
	createPT(t, e.ns, "b-global", 3, withLocation("global"), withModel(modelB))
	for _, tc := range []struct {
		pt     string
		status metav1.ConditionStatus
		reason string
		gsus   int64 // observed; 0: none
	}{
		{"global-order", metav1.ConditionTrue, capacityv1alpha1.ReasonObserved, 2},
		{"ew4-order", metav1.ConditionFalse, capacityv1alpha1.ReasonNotFound, 0},
		{"b-global", metav1.ConditionFalse, capacityv1alpha1.ReasonNotFound, 0},
	} {
		pt := waittest.Until(t, poolWait, tc.pt+" verified", func() *capacityv1alpha1.ProvisionedThroughput {
			pt := &capacityv1alpha1.ProvisionedThroughput{}
			if err := e.cl.Get(t.Context(), types.NamespacedName{Namespace: e.ns, Name: tc.pt}, pt); err != nil {
				t.Fatal(err)
			}
			return pt
		}, func(pt *capacityv1alpha1.ProvisionedThroughput) bool {
			return pt.Status.LastVerifiedTime != nil
		})
		expectCond(t, pt, capacityv1alpha1.ConditionVerified, tc.status, tc.reason)
		var got int64
		if pt.Status.Observed != nil {
			got = pt.Status.Observed.GSUs
		}
		if got != tc.gsus {
			t.Errorf("%s (%s): observed %d GSUs, want %d", tc.pt, pt.Spec.Location, got, tc.gsus)
		}
	}

	e.createPool("c", []string{"global", "europe-west4", "us-central1"}, poolWithModel(modelC))
	rt := e.waitTable("c-routing", "protects the discovered global", protects("global"))
	g := rt.region("global")
	if g.Source != table.SourceDiscovered || g.Capacity.GSUs != 4 || g.Endpoint != "aiplatform.googleapis.com:443" {
		t.Errorf("global = %+v, want discovered, 4 GSUs, at aiplatform.googleapis.com:443", g)
	}
	for _, name := range []string{"europe-west4", "us-central1"} {
		r := rt.region(name)
		if r == nil || r.Tier != table.TierShared || r.Endpoint != name+"-aiplatform.googleapis.com:443" {
			t.Errorf("%s = %+v, want shared at %s-aiplatform.googleapis.com:443: global's PT is not its", name, r, name)
		}
	}
}
