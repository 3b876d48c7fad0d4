package controllers

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capacityv1alpha1 "github.com/regionwarden/regionwarden/api/v1alpha1"
	"github.com/regionwarden/regionwarden/internal/gcp"
)

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
