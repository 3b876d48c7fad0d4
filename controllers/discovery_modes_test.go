package controllers

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capacityv1alpha1 "github.com/regionwarden/regionwarden/api/v1alpha1"
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
