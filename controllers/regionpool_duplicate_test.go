package controllers

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	capacityv1alpha1 "github.com/regionwarden/regionwarden/api/v1alpha1"
	"github.com/regionwarden/regionwarden/internal/waittest"
)

// isDuplicate reports whether the pool says it stands down for an older one.
func isDuplicate(p *capacityv1alpha1.RegionPool) bool {
	ready := meta.FindStatusCondition(p.Status.Conditions, capacityv1alpha1.ConditionReady)
	stalled := meta.FindStatusCondition(p.Status.Conditions, capacityv1alpha1.ConditionStalled)
	return ready != nil && ready.Status == metav1.ConditionFalse && ready.Reason == capacityv1alpha1.ReasonDuplicatePool &&
		stalled != nil && stalled.Reason == capacityv1alpha1.ReasonDuplicatePool && p.Status.ObservedGeneration == p.Generation
}

// TestRegionPoolDuplicateRendersOnlyTheOlder: of two pools of one namespace
// with the same project, publisher and model, the younger is Ready=False
// with reason DuplicatePool and renders nothing (the ConfigMap it had is
// deleted), while the older keeps routing; once the older goes, the younger
// renders.
func TestRegionPoolDuplicateRendersOnlyTheOlder(t *testing.T) {
	ctx := context.Background()
	e := newPoolEnv(t, true)
	e.createPool("older", []string{"europe-west1"})
	e.waitPool("older", "is reconciled", isReconciled)
	e.waitTable("older-routing", "exists", func(routingTable) bool { return true })

	// The younger pool starts on another model, renders, then moves onto
	// the older pool's model.
	e.createPool("younger", []string{"us-east5"}, poolWithModel("gemini-2.5-pro"))
	e.waitPool("younger", "is reconciled", isReconciled)
	e.waitTable("younger-routing", "exists", func(routingTable) bool { return true })
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p := e.pool("younger")
		p.Spec.Model = testModel
		return e.cl.Update(ctx, p)
	}); err != nil {
		t.Fatal(err)
	}

	p := e.waitPool("younger", "is a DuplicatePool", isDuplicate)
	if c := meta.FindStatusCondition(p.Status.Conditions, capacityv1alpha1.ConditionReady); c == nil || !strings.Contains(c.Message, "RegionPool older") {
		t.Errorf("Ready = %+v, want a message naming the older pool", c)
	}
	if p.Status.ConfigMapName != "" || p.Status.TableHash != "" {
		t.Errorf("status still shows a table: %+v", p.Status)
	}
	waitGone(t, e, "younger-routing")
	if n := e.rec.count("younger", eventWarning, capacityv1alpha1.ReasonDuplicatePool); n != 1 {
		t.Errorf("%d %s events, want 1", n, capacityv1alpha1.ReasonDuplicatePool)
	}
	if rt, ok := e.readTable("older-routing"); !ok || rt.table == nil {
		t.Error("the older pool's table is gone")
	}
	if !isReconciled(e.pool("older")) {
		t.Errorf("the older pool is not Ready: %+v", e.pool("older").Status.Conditions)
	}

	// The older pool goes: the younger routes the model.
	if err := e.cl.Delete(ctx, e.pool("older")); err != nil {
		t.Fatal(err)
	}
	e.waitPool("younger", "renders once the older is gone", isReconciled)
	e.waitTable("younger-routing", "routes the model", func(rt routingTable) bool {
		return rt.table.Pools[0].Model == testModel
	})
}

// TestOlderThan checks the order that decides which of two pools renders:
// creation time, then name.
func TestOlderThan(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Second))
	pool := func(name string, at metav1.Time) *capacityv1alpha1.RegionPool {
		return &capacityv1alpha1.RegionPool{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: at}}
	}
	for _, tc := range []struct {
		a, b *capacityv1alpha1.RegionPool
		want bool
	}{
		{pool("z", t0), pool("a", t1), true},
		{pool("a", t1), pool("z", t0), false},
		{pool("a", t0), pool("b", t0), true},
		{pool("b", t0), pool("a", t0), false},
	} {
		if got := olderThan(tc.a, tc.b); got != tc.want {
			t.Errorf("olderThan(%s@%s, %s@%s) = %v", tc.a.Name, tc.a.CreationTimestamp.Format(time.TimeOnly), tc.b.Name, tc.b.CreationTimestamp.Format(time.TimeOnly), got)
		}
	}
}

// waitGone waits until ConfigMap name no longer exists.
func waitGone(t *testing.T, e *poolEnv, name string) {
	t.Helper()
	waittest.Until(t, poolWait, "ConfigMap "+name+" to be deleted",
		func() bool { _, found := e.readTable(name); return found },
		func(found bool) bool { return !found })
}
