package controllers

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	capacityv1alpha1 "github.com/regionwarden/regionwarden/api/v1alpha1"
	"github.com/regionwarden/regionwarden/internal/waittest"
)

// TestRegionPoolWatchMapsExactly checks the watch mapping through the
// manager's real cache and field indexes: a PT change reaches exactly the
// pools of its namespace and model whose selector it matches (before or after
// the change), and a ConfigMap change reaches exactly the pools writing that
// name.
func TestRegionPoolWatchMapsExactly(t *testing.T) {
	e := newPoolEnv(t, true)
	regions := []string{"europe-west1"}
	e.createPool("flash", regions)
	e.createPool("flash-team-a", regions, poolWithSelector(map[string]string{"team": "a"}))
	e.createPool("pro", regions, poolWithModel("gemini-2.5-pro"))
	e.createPool("shared-name", regions, poolWithModel("gemini-2.0-flash"), poolWithOutput("flash-routing"))
	e.waitPool("shared-name", "is seen", func(*capacityv1alpha1.RegionPool) bool { return true })
	// The cache may lag the API server; wait until it holds all four pools.
	waittest.Until(t, poolWait, "the cache to hold the four pools", func() int {
		var l capacityv1alpha1.RegionPoolList
		if err := e.mgr.GetClient().List(context.Background(), &l, client.InNamespace(e.ns)); err != nil {
			return -1
		}
		return len(l.Items)
	}, func(n int) bool { return n == 4 })

	pt := func(model string, labels map[string]string) *capacityv1alpha1.ProvisionedThroughput {
		return &capacityv1alpha1.ProvisionedThroughput{
			ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "x", Labels: labels},
			Spec:       capacityv1alpha1.ProvisionedThroughputSpec{Project: testProject, Location: "europe-west1", Model: model, GSUs: 1},
		}
	}
	otherNS := pt(testModel, nil)
	otherNS.Namespace = "elsewhere"
	otherProject := pt(testModel, nil)
	otherProject.Spec.Project = "acme-test"
	otherPublisher := pt(testModel, nil)
	otherPublisher.Spec.Publisher = "anthropic"

	for _, tc := range []struct {
		name string
		obj  client.Object
		want []string
	}{
		{"unlabelled flash PT", pt(testModel, nil), []string{"flash"}},
		{"team-a flash PT", pt(testModel, map[string]string{"team": "a"}), []string{"flash", "flash-team-a"}},
		{"team-b flash PT", pt(testModel, map[string]string{"team": "b"}), []string{"flash"}},
		{"pro PT", pt("gemini-2.5-pro", map[string]string{"team": "a"}), []string{"pro"}},
		{"versioned model ID", pt(testModel+"-001", nil), nil},
		{"other namespace", otherNS, nil},
		{"other project", otherProject, nil},
		{"other publisher", otherPublisher, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, req := range e.r.poolsForPT(context.Background(), tc.obj) {
				got = append(got, req.Name)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("pools = %v, want %v", got, tc.want)
			}
		})
	}

	for _, tc := range []struct {
		cm   string
		want []string
	}{
		{"flash-routing", []string{"flash", "shared-name"}},
		{"pro-routing", []string{"pro"}},
		{"flash-team-a-routing", []string{"flash-team-a"}},
		{"shared-name-routing", nil},
		{"kube-root-ca.crt", nil},
	} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: tc.cm}}
		var got []string
		for _, req := range e.r.poolsForConfigMap(context.Background(), cm) {
			got = append(got, req.Name)
		}
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("ConfigMap %s: pools = %v, want %v", tc.cm, got, tc.want)
		}
	}
}

// TestPTRoutingChanged: only PT updates that can change a table pass.
func TestPTRoutingChanged(t *testing.T) {
	base := &capacityv1alpha1.ProvisionedThroughput{
		ObjectMeta: metav1.ObjectMeta{Name: "pt", Generation: 1, Labels: map[string]string{"team": "a"}},
		Status: capacityv1alpha1.ProvisionedThroughputStatus{
			Conditions: []metav1.Condition{{Type: capacityv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Active"}},
			Observed:   &capacityv1alpha1.ObservedCapacity{GSUs: 1, TokensPerSecond: 3000, Utilization: 0.2},
		},
	}
	for _, tc := range []struct {
		name   string
		change func(*capacityv1alpha1.ProvisionedThroughput)
		want   bool
	}{
		{"nothing", func(*capacityv1alpha1.ProvisionedThroughput) {}, false},
		{"utilization", func(p *capacityv1alpha1.ProvisionedThroughput) { p.Status.Observed.Utilization = 0.9 }, false},
		{"verified time", func(p *capacityv1alpha1.ProvisionedThroughput) { p.Status.LastVerifiedTime = &metav1.Time{} }, false},
		{"ready message", func(p *capacityv1alpha1.ProvisionedThroughput) { p.Status.Conditions[0].Message = "again" }, false},
		{"ready false", func(p *capacityv1alpha1.ProvisionedThroughput) { p.Status.Conditions[0].Status = metav1.ConditionFalse }, true},
		{"tokens", func(p *capacityv1alpha1.ProvisionedThroughput) { p.Status.Observed.TokensPerSecond = 6000 }, true},
		{"observed gone", func(p *capacityv1alpha1.ProvisionedThroughput) { p.Status.Observed = nil }, true},
		{"spec", func(p *capacityv1alpha1.ProvisionedThroughput) { p.Generation = 2 }, true},
		{"labels", func(p *capacityv1alpha1.ProvisionedThroughput) { p.Labels = map[string]string{"team": "b"} }, true},
		{"deleting", func(p *capacityv1alpha1.ProvisionedThroughput) {
			p.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			changed := base.DeepCopy()
			tc.change(changed)
			if got := (ptRoutingChanged{}).Update(eventUpdate(base, changed)); got != tc.want {
				t.Errorf("Update passes = %v, want %v", got, tc.want)
			}
		})
	}
}

func eventUpdate(oldObj, newObj client.Object) event.UpdateEvent {
	return event.UpdateEvent{ObjectOld: oldObj, ObjectNew: newObj}
}
