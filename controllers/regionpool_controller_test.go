package controllers

import (
	"context"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capacityv1alpha1 "github.com/regionwarden/regionwarden/api/v1alpha1"
	"github.com/regionwarden/regionwarden/router/table"
)

// TestRegionPoolProtectsReadyPT: a pool of four regions with one ready PT
// renders one provisioned, never-ejectable region and three shared ones; the
// PT's expiry (Ready=False) makes the region shared again.
func TestRegionPoolProtectsReadyPT(t *testing.T) {
	e := newPoolEnv(t, true)
	regions := []string{"us-central1", "europe-west1", "europe-west4", "us-east5"}
	e.createPool("flash", regions, poolWithHint("europe-west1", 40), poolWithHint("us-east5", 15))
	createPT(e.t, e.ns, "ew1-order", 4, withLocation("europe-west1"))
	e.setPTReady("ew1-order", true, capacityv1alpha1.ReasonActive, 12000)

	rt := e.waitTable("flash-routing", "protects europe-west1", protects("europe-west1"))
	want := []string{"europe-west1=provisioned", "europe-west4=shared", "us-central1=shared", "us-east5=shared"}
	if got := tiers(rt); !slices.Equal(got, want) {
		t.Errorf("table regions = %v, want %v", got, want)
	}
	ew1 := rt.region("europe-west1")
	if ew1.Ejectable || ew1.Source != table.SourceDeclared ||
		ew1.Capacity != (table.Capacity{GSUs: 4, TokensPerSecond: 12000, RequestsPerSecond: 40}) {
		t.Errorf("europe-west1 = %+v, want never ejectable, declared, 4 GSUs, 12000 tokens/s, 40 requests/s", ew1)
	}
	for _, name := range []string{"europe-west4", "us-central1", "us-east5"} {
		if r := rt.region(name); !r.Ejectable || r.Source != table.SourceSpec || r.Capacity.GSUs != 0 {
			t.Errorf("%s = %+v, want shared, ejectable, from spec", name, r)
		}
	}
	if got := rt.region("us-east5").Capacity.RequestsPerSecond; got != 15 {
		t.Errorf("us-east5 requests/s = %v, want the pool's hint 15", got)
	}
	if p := rt.table.Pools[0]; p.Project != testProject || p.Publisher != "google" || p.Model != testModel || p.Namespace != e.ns || p.Name != "flash" {
		t.Errorf("table pool identity = %s/%s/%s %s/%s", p.Project, p.Publisher, p.Model, p.Namespace, p.Name)
	}
	if rt.cm.Labels[table.LabelRoutingTable] != "true" {
		t.Errorf("labels = %v, want %s=true", rt.cm.Labels, table.LabelRoutingTable)
	}
	hash := table.Hash([]byte(rt.cm.Data[table.DataKey]))
	if rt.cm.Annotations[table.AnnotationHash] != hash {
		t.Errorf("hash annotation = %q, want %q", rt.cm.Annotations[table.AnnotationHash], hash)
	}

	p := e.waitPool("flash", "reports the table it wrote", func(p *capacityv1alpha1.RegionPool) bool {
		return isReconciled(p) && p.Status.TableHash == hash
	})
	if !slices.Equal(p.Status.ProtectedRegions, []string{"europe-west1"}) {
		t.Errorf("protectedRegions = %v", p.Status.ProtectedRegions)
	}
	if p.Status.ConfigMapName != "flash-routing" {
		t.Errorf("configMapName = %q", p.Status.ConfigMapName)
	}
	wantStatus := []capacityv1alpha1.RegionStatus{
		{Name: "europe-west1", Tier: "provisioned", Ejectable: false, Source: "declared", ProvisionedThroughput: "ew1-order"},
		{Name: "europe-west4", Tier: "shared", Ejectable: true, Source: "spec"},
		{Name: "us-central1", Tier: "shared", Ejectable: true, Source: "spec"},
		{Name: "us-east5", Tier: "shared", Ejectable: true, Source: "spec"},
	}
	if !slices.Equal(p.Status.Regions, wantStatus) {
		t.Errorf("status regions = %+v, want %+v", p.Status.Regions, wantStatus)
	}
	ready := meta.FindStatusCondition(p.Status.Conditions, capacityv1alpha1.ConditionReady)
	if ready.Reason != capacityv1alpha1.ReasonRendered || ready.ObservedGeneration != p.Generation || !strings.Contains(ready.Message, "europe-west1") {
		t.Errorf("Ready = %+v", ready)
	}
	for _, c := range []string{capacityv1alpha1.ConditionReconciling, capacityv1alpha1.ConditionStalled} {
		if meta.FindStatusCondition(p.Status.Conditions, c) != nil {
			t.Errorf("a reconciled pool has %s", c)
		}
	}

	// The term ends: the PT controller turns Ready False.
	e.setPTReady("ew1-order", false, capacityv1alpha1.ReasonExpired, 0)
	rt = e.waitTable("flash-routing", "makes europe-west1 shared again", sharedOrAbsent("europe-west1"))
	if r := rt.region("europe-west1"); r == nil || !r.Ejectable || r.Source != table.SourceSpec || r.Capacity != (table.Capacity{RequestsPerSecond: 40}) {
		t.Errorf("expired europe-west1 = %+v, want listed, shared, ejectable, with only its hint", r)
	}
	p = e.waitPool("flash", "protects nothing", func(p *capacityv1alpha1.RegionPool) bool {
		return isReconciled(p) && len(p.Status.ProtectedRegions) == 0 && p.Status.TableHash == table.Hash([]byte(rt.cm.Data[table.DataKey]))
	})
	if p.Status.Regions[0].ProvisionedThroughput != "" {
		t.Errorf("status still names a PT: %+v", p.Status.Regions[0])
	}
}

// TestRegionPoolAddsUndeclaredRegion: a ready PT in a location the pool does
// not list adds that location as provisioned, the pool says so in its Ready
// condition and in one event, and the location leaves when the PT stops
// being ready.
func TestRegionPoolAddsUndeclaredRegion(t *testing.T) {
	e := newPoolEnv(t, true)
	e.createPool("flash", []string{"europe-west1", "europe-west4"})
	e.readyPT("global-order", "global", 1)

	rt := e.waitTable("flash-routing", "protects global", protects("global"))
	if got, want := tiers(rt), []string{"global=provisioned", "europe-west1=shared", "europe-west4=shared"}; !slices.Equal(got, want) {
		t.Errorf("table regions = %v, want %v", got, want)
	}
	if g := rt.region("global"); g.Endpoint != "aiplatform.googleapis.com:443" || g.Capacity.GSUs != 1 || g.Ejectable {
		t.Errorf("global = %+v", g)
	}
	p := e.waitPool("flash", "reports the undeclared region", func(p *capacityv1alpha1.RegionPool) bool {
		return isReconciled(p) && meta.FindStatusCondition(p.Status.Conditions, capacityv1alpha1.ConditionReady).Reason == capacityv1alpha1.ReasonUndeclaredRegions
	})
	msg := meta.FindStatusCondition(p.Status.Conditions, capacityv1alpha1.ConditionReady).Message
	for _, word := range []string{"global", "global-order", "spec.regions"} {
		if !strings.Contains(msg, word) {
			t.Errorf("Ready message %q does not mention %q", msg, word)
		}
	}

	// More reconciles of the same state record no second event: edit the
	// ConfigMap by hand, which reconciles the pool, and wait for the revert.
	edited := rt.cm.DeepCopy()
	edited.Data[table.DataKey] = "{}"
	if err := e.cl.Update(context.Background(), edited); err != nil {
		t.Fatal(err)
	}
	e.waitTable("flash-routing", "is reverted", protects("global"))
	e.waitPool("flash", "is reconciled", isReconciled)
	if n := e.rec.await(t, "flash", eventNormal, capacityv1alpha1.ReasonUndeclaredRegions, 1); n != 1 {
		t.Errorf("%d %s events, want 1", n, capacityv1alpha1.ReasonUndeclaredRegions)
	}

	e.setPTReady("global-order", false, capacityv1alpha1.ReasonNotFound, 0)
	rt = e.waitTable("flash-routing", "drops global", func(rt routingTable) bool { return rt.region("global") == nil })
	if got, want := tiers(rt), []string{"europe-west1=shared", "europe-west4=shared"}; !slices.Equal(got, want) {
		t.Errorf("table regions = %v, want %v", got, want)
	}
	p = e.waitPool("flash", "is back to Rendered", func(p *capacityv1alpha1.RegionPool) bool {
		return isReconciled(p) && meta.FindStatusCondition(p.Status.Conditions, capacityv1alpha1.ConditionReady).Reason == capacityv1alpha1.ReasonRendered
	})
	if len(p.Status.ProtectedRegions) != 0 {
		t.Errorf("protectedRegions = %v", p.Status.ProtectedRegions)
	}
}

// TestRegionPoolOwnsItsConfigMap checks the owner reference that makes the
// garbage collector delete the ConfigMap with the pool. envtest runs no
// garbage collector (it has no kube-controller-manager), so the test checks
// the reference (kind, name, the pool's UID, controller=true) and that the
// pool carries no finalizer that could hold the deletion back; it does not
// wait for the ConfigMap to disappear.
func TestRegionPoolOwnsItsConfigMap(t *testing.T) {
	e := newPoolEnv(t, true)
	created := e.createPool("flash", []string{"europe-west1"})
	rt := e.waitTable("flash-routing", "exists", func(routingTable) bool { return true })

	refs := rt.cm.OwnerReferences
	if len(refs) != 1 {
		t.Fatalf("owner references = %+v, want exactly the pool", refs)
	}
	ref := refs[0]
	if ref.APIVersion != capacityv1alpha1.GroupVersion.String() || ref.Kind != "RegionPool" || ref.Name != "flash" ||
		ref.UID != created.UID || ref.Controller == nil || !*ref.Controller {
		t.Errorf("owner reference = %+v, want RegionPool flash, UID %s, controller", ref, created.UID)
	}
	p := e.waitPool("flash", "is reconciled", isReconciled)
	if len(p.Finalizers) != 0 {
		t.Errorf("pool finalizers = %v, want none", p.Finalizers)
	}
	if err := e.cl.Delete(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	err := e.cl.Get(context.Background(), types.NamespacedName{Namespace: e.ns, Name: "flash"}, &capacityv1alpha1.RegionPool{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("the pool is still there after Delete (err %v): something holds its deletion", err)
	}
}

// TestRegionPoolRevertsHandEdit: a hand edit of the ConfigMap's data, label
// or hash annotation is taken back on the next reconcile, byte for byte.
func TestRegionPoolRevertsHandEdit(t *testing.T) {
	e := newPoolEnv(t, true)
	e.createPool("flash", []string{"europe-west1", "us-east5"})
	e.readyPT("order", "us-east5", 2)
	rt := e.waitTable("flash-routing", "protects us-east5", protects("us-east5"))
	want := rt.cm.Data[table.DataKey]
	e.waitPool("flash", "is reconciled", isReconciled)

	edited := rt.cm.DeepCopy()
	edited.Data[table.DataKey] = strings.Replace(want, `"tier": "shared"`, `"tier": "provisioned"`, 1)
	edited.Labels[table.LabelRoutingTable] = "false"
	edited.Annotations[table.AnnotationHash] = "0000000000000000"
	if err := e.cl.Update(context.Background(), edited); err != nil {
		t.Fatal(err)
	}
	rt = e.waitTable("flash-routing", "is reverted", func(rt routingTable) bool {
		return rt.cm.ResourceVersion != edited.ResourceVersion && rt.cm.Data[table.DataKey] == want &&
			rt.cm.Labels[table.LabelRoutingTable] == "true" && rt.cm.Annotations[table.AnnotationHash] == table.Hash([]byte(want))
	})
	if rt.region("europe-west1").Tier != table.TierShared {
		t.Error("the hand-made provisioned region survived")
	}
}

// TestRegionPoolLeavesForeignConfigMap: a ConfigMap of the output name that
// the pool does not control is left alone and the pool is Stalled; when that
// ConfigMap goes, the pool writes its own without any other change.
func TestRegionPoolLeavesForeignConfigMap(t *testing.T) {
	e := newPoolEnv(t, true)
	foreign := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "flash-routing", Labels: map[string]string{"team": "web"}},
		Data:       map[string]string{"app.conf": "keep me"},
	}
	if err := e.cl.Create(context.Background(), foreign); err != nil {
		t.Fatal(err)
	}
	e.createPool("flash", []string{"europe-west1"})

	p := e.waitPool("flash", "Stalled", func(p *capacityv1alpha1.RegionPool) bool {
		return meta.IsStatusConditionTrue(p.Status.Conditions, capacityv1alpha1.ConditionStalled)
	})
	stalled := meta.FindStatusCondition(p.Status.Conditions, capacityv1alpha1.ConditionStalled)
	ready := meta.FindStatusCondition(p.Status.Conditions, capacityv1alpha1.ConditionReady)
	if stalled.Reason != capacityv1alpha1.ReasonConfigMapConflict || !strings.Contains(stalled.Message, "flash-routing") {
		t.Errorf("Stalled = %+v", stalled)
	}
	if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != capacityv1alpha1.ReasonConfigMapConflict {
		t.Errorf("Ready = %+v, want False %s", ready, capacityv1alpha1.ReasonConfigMapConflict)
	}
	if meta.FindStatusCondition(p.Status.Conditions, capacityv1alpha1.ConditionReconciling) != nil {
		t.Error("a Stalled pool is also Reconciling")
	}
	if n := e.rec.await(t, "flash", eventWarning, capacityv1alpha1.ReasonConfigMapConflict, 1); n != 1 {
		t.Errorf("%d %s events, want 1", n, capacityv1alpha1.ReasonConfigMapConflict)
	}
	got := &corev1.ConfigMap{}
	if err := e.cl.Get(context.Background(), client.ObjectKeyFromObject(foreign), got); err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != foreign.ResourceVersion || len(got.OwnerReferences) != 0 || got.Data[table.DataKey] != "" {
		t.Errorf("the foreign ConfigMap was written: %+v", got)
	}

	// The owner renames their ConfigMap away; the pool takes the name.
	if err := e.cl.Delete(context.Background(), foreign); err != nil {
		t.Fatal(err)
	}
	e.waitTable("flash-routing", "is the pool's", func(rt routingTable) bool { return len(rt.cm.OwnerReferences) == 1 })
	p = e.waitPool("flash", "recovers", isReconciled)
	if meta.FindStatusCondition(p.Status.Conditions, capacityv1alpha1.ConditionStalled) != nil {
		t.Error("the pool is still Stalled")
	}
}

// TestRegionPoolsSeeOnlyTheirModel: two pools of different models in one
// namespace each protect only their own model's PT locations.
func TestRegionPoolsSeeOnlyTheirModel(t *testing.T) {
	e := newPoolEnv(t, true)
	regions := []string{"europe-west1", "europe-west4", "us-east5"}
	e.createPool("flash", regions)
	e.createPool("pro", regions, poolWithModel("gemini-2.5-pro"))
	createPT(e.t, e.ns, "flash-ew1", 2, withLocation("europe-west1"))
	createPT(e.t, e.ns, "pro-ew4", 2, withLocation("europe-west4"), withModel("gemini-2.5-pro"))
	// Same location as the pro pool's, but a versioned model ID: matching is
	// exact, so it protects neither pool.
	createPT(e.t, e.ns, "flash-001-ue5", 2, withLocation("us-east5"), withModel(testModel+"-001"))
	for _, name := range []string{"flash-ew1", "pro-ew4", "flash-001-ue5"} {
		e.setPTReady(name, true, capacityv1alpha1.ReasonActive, 0)
	}

	flash := e.waitTable("flash-routing", "protects europe-west1", protects("europe-west1"))
	pro := e.waitTable("pro-routing", "protects europe-west4", protects("europe-west4"))
	if got, want := tiers(flash), []string{"europe-west1=provisioned", "europe-west4=shared", "us-east5=shared"}; !slices.Equal(got, want) {
		t.Errorf("flash regions = %v, want %v", got, want)
	}
	if got, want := tiers(pro), []string{"europe-west4=provisioned", "europe-west1=shared", "us-east5=shared"}; !slices.Equal(got, want) {
		t.Errorf("pro regions = %v, want %v", got, want)
	}
	if m := pro.table.Pools[0].Model; m != "gemini-2.5-pro" {
		t.Errorf("pro table model = %q", m)
	}
}

// TestRegionPoolSelectorNarrows: a pool's selector picks among the PTs of
// its model by label, a relabelled PT moves in and out of the pool, and
// without a selector the pool takes every PT of its model. (One pool: two
// pools of one model are duplicates.)
func TestRegionPoolSelectorNarrows(t *testing.T) {
	e := newPoolEnv(t, true)
	regions := []string{"europe-west1", "europe-west4"}
	e.createPool("team-a", regions, poolWithSelector(map[string]string{"team": "a"}))
	createPT(e.t, e.ns, "a-ew1", 2, withLocation("europe-west1"), withLabels(map[string]string{"team": "a"}))
	createPT(e.t, e.ns, "b-ew4", 2, withLocation("europe-west4"), withLabels(map[string]string{"team": "b"}))
	// A PT of another model with the right label still does not protect the pool.
	createPT(e.t, e.ns, "a-pro", 2, withLocation("us-east5"), withModel("gemini-2.5-pro"), withLabels(map[string]string{"team": "a"}))
	for _, name := range []string{"a-ew1", "b-ew4", "a-pro"} {
		e.setPTReady(name, true, capacityv1alpha1.ReasonActive, 0)
	}

	a := e.waitTable("team-a-routing", "protects europe-west1", protects("europe-west1"))
	if got, want := tiers(a), []string{"europe-west1=provisioned", "europe-west4=shared"}; !slices.Equal(got, want) {
		t.Errorf("team-a regions = %v, want %v", got, want)
	}

	relabel := func(name, team string) {
		t.Helper()
		pt := &capacityv1alpha1.ProvisionedThroughput{}
		if err := e.cl.Get(context.Background(), types.NamespacedName{Namespace: e.ns, Name: name}, pt); err != nil {
			t.Fatal(err)
		}
		pt.Labels["team"] = team
		if err := e.cl.Update(context.Background(), pt); err != nil {
			t.Fatal(err)
		}
	}
	relabel("b-ew4", "a")
	e.waitTable("team-a-routing", "protects europe-west4 once relabelled", protects("europe-west4"))
	relabel("a-ew1", "c")
	e.waitTable("team-a-routing", "drops europe-west1 once relabelled", sharedOrAbsent("europe-west1"))

	e.editPool("team-a", func(p *capacityv1alpha1.RegionPool) { p.Spec.ProvisionedThroughputSelector = nil })
	all := e.waitTable("team-a-routing", "protects both without a selector", func(rt routingTable) bool {
		return protects("europe-west1")(rt) && protects("europe-west4")(rt)
	})
	if all.region("us-east5") != nil {
		t.Error("a PT of another model reached the pool")
	}
}

// TestRegionPoolPolicy: the pool's policy reaches the table, and what it
// leaves unset takes table.DefaultPolicy's values.
func TestRegionPoolPolicy(t *testing.T) {
	e := newPoolEnv(t, true)
	budget := int32(0)
	e.createPool("flash", []string{"europe-west1"}, func(p *capacityv1alpha1.RegionPool) {
		p.Spec.Policy.Provisioned.RequestType = capacityv1alpha1.RequestTypeDedicated
		p.Spec.Policy.Retry.MaxAttempts = 3
		p.Spec.Policy.Retry.BudgetPercent = &budget
		p.Spec.Policy.Ejection.Interval = &metav1.Duration{Duration: 20e9}
		p.Spec.Policy.Ejection.FailureRateThreshold = 0.3
	})
	rt := e.waitTable("flash-routing", "exists", func(routingTable) bool { return true })
	want := table.DefaultPolicy()
	want.Provisioned.RequestType = table.RequestTypeDedicated
	want.Retry.MaxAttempts = 3
	want.Retry.BudgetPercent = new(0)
	want.Ejection.Interval.Duration = 20e9
	want.Ejection.FailureRateThreshold = 0.3
	if got := rt.table.Pools[0].Policy; !got.Equal(want) {
		t.Errorf("policy = %v, want %v", got, want)
	}
}

// TestRegionPoolPayGoTiers: the tiers a pool lists for its regions and gives
// each priority reach the table as the router reads them, and a region that
// lists none takes the table's default for its tier (standard while shared,
// none while it holds a PT).
func TestRegionPoolPayGoTiers(t *testing.T) {
	e := newPoolEnv(t, true)
	e.readyPT("global-order", "global", 2)
	e.createPool("flash", []string{"global", "europe-west4", "us-central1"}, func(p *capacityv1alpha1.RegionPool) {
		p.Spec.Regions[0].PayGoTiers = []capacityv1alpha1.PayGoTier{capacityv1alpha1.PayGoFlex, capacityv1alpha1.PayGoPriority}
		p.Spec.Regions[1].PayGoTiers = []capacityv1alpha1.PayGoTier{capacityv1alpha1.PayGoStandard, capacityv1alpha1.PayGoFlex}
		p.Spec.Policy.PayGo.Critical = []capacityv1alpha1.PayGoTier{capacityv1alpha1.PayGoPriority}
		p.Spec.Policy.PayGo.Sheddable = []capacityv1alpha1.PayGoTier{capacityv1alpha1.PayGoStandard, capacityv1alpha1.PayGoFlex}
	})
	rt := e.waitTable("flash-routing", "protects global", protects("global"))
	for name, want := range map[string][]table.PayGoTier{
		"global":       {table.PayGoPriority, table.PayGoFlex},
		"europe-west4": {table.PayGoStandard, table.PayGoFlex},
		"us-central1":  {table.PayGoStandard},
	} {
		if got := rt.region(name).PayGoTiers; !slices.Equal(got, want) {
			t.Errorf("%s pay-as-you-go tiers = %v, want %v", name, got, want)
		}
	}
	want := table.PayGo{
		Critical:  []table.PayGoTier{table.PayGoPriority},
		Default:   table.DefaultPayGoDefault,
		Sheddable: []table.PayGoTier{table.PayGoStandard, table.PayGoFlex},
	}
	if got := rt.table.Pools[0].Policy.PayGo; !reflect.DeepEqual(got, want) {
		t.Errorf("payGo = %+v, want %+v (the order of each list is the preference)", got, want)
	}

	// Without tiers listed, global holds its PT alone: the pool's change
	// reaches the table.
	e.editPool("flash", func(p *capacityv1alpha1.RegionPool) { p.Spec.Regions[0].PayGoTiers = nil })
	e.waitTable("flash-routing", "lists no tier for global", func(rt routingTable) bool {
		return len(rt.region("global").PayGoTiers) == 0
	})
}

// TestOmittedMeansTheSameEverywhere: a RegionPool that sets only what it must
// (project, model, region names), defaulted by the API server from the CRD's
// markers and rendered by the controller, routes exactly as a hand-written
// table that sets only the same: the same policy (the table's defaults), the
// same regions. Defaults live in router/table; the CRD's markers restate
// them for kubectl, and this test fails when any of the three drifts.
func TestOmittedMeansTheSameEverywhere(t *testing.T) {
	e := newPoolEnv(t, true)
	bare := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": capacityv1alpha1.GroupVersion.String(),
		"kind":       "RegionPool",
		"metadata":   map[string]any{"namespace": e.ns, "name": "bare"},
		"spec": map[string]any{
			"project": testProject,
			"model":   testModel,
			"regions": []any{map[string]any{"name": "europe-west1"}, map[string]any{"name": "us-central1"}},
		},
	}}
	if err := e.cl.Create(context.Background(), bare); err != nil {
		t.Fatal(err)
	}
	if p := e.pool("bare"); p.Spec.Policy.Ejection.FailureRateThreshold == 0 || p.Spec.Policy.Retry.BudgetPercent == nil {
		t.Fatalf("the API server did not default spec.policy: %+v", p.Spec.Policy)
	}
	rendered := e.waitTable("bare-routing", "exists", func(routingTable) bool { return true }).table.Pools[0]

	handWritten, err := table.Parse([]byte(`{"version": 1, "pools": [{"project": "` + testProject + `", "model": "` + testModel + `",
		"regions": [{"name": "europe-west1"}, {"name": "us-central1"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	hand := handWritten.Pools[0]

	if !rendered.Policy.Equal(hand.Policy) {
		t.Errorf("a RegionPool that omits its policy renders %v; a table that omits it parses to %v", rendered.Policy, hand.Policy)
	}
	if !hand.Policy.Equal(table.DefaultPolicy()) {
		t.Errorf("a table that omits its policy parses to %v, not table.DefaultPolicy %v", hand.Policy, table.DefaultPolicy())
	}
	// The rest of the pool too, but for the RegionPool's name, which only a
	// rendered table carries.
	rendered.Namespace, rendered.Name = "", ""
	if !reflect.DeepEqual(rendered, hand) {
		t.Errorf("the bare RegionPool renders\n%+v\nthe bare table parses to\n%+v", rendered, hand)
	}
}

// TestRegionPoolRenamedOutput: a new spec.output.configMapName moves the
// table, and the ConfigMap under the old name, which the pool controls, goes.
func TestRegionPoolRenamedOutput(t *testing.T) {
	e := newPoolEnv(t, true)
	e.createPool("flash", []string{"europe-west1"})
	e.waitTable("flash-routing", "exists", func(routingTable) bool { return true })
	e.waitPool("flash", "is reconciled", isReconciled)

	e.editPool("flash", func(p *capacityv1alpha1.RegionPool) { p.Spec.Output.ConfigMapName = "llm-routes" })
	e.waitTable("llm-routes", "exists", func(routingTable) bool { return true })
	e.waitPool("flash", "reports the new name", func(p *capacityv1alpha1.RegionPool) bool {
		return isReconciled(p) && p.Status.ConfigMapName == "llm-routes"
	})
	if _, found := e.readTable("flash-routing"); found {
		t.Error("the ConfigMap under the old name is still there")
	}
}

// TestRegionPoolStallsOnWhatOnlyAPersonFixes: a selector the API server
// accepts but that does not parse, and PT locations that push the pool past
// table.MaxRegions, stall the pool with RenderFailed instead of retrying.
func TestRegionPoolStallsOnWhatOnlyAPersonFixes(t *testing.T) {
	e := newPoolEnv(t, true)
	// Another model than "full"'s: two pools of one model are duplicates.
	e.createPool("bad-selector", []string{"europe-west1"}, poolWithModel("gemini-2.5-pro"), func(p *capacityv1alpha1.RegionPool) {
		p.Spec.ProvisionedThroughputSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "team", Operator: "Near", Values: []string{"a"}},
		}}
	})
	var full []string
	for i := 1; i <= table.MaxRegions; i++ {
		full = append(full, "europe-west"+strconv.Itoa(i))
	}
	e.readyPT("one-too-many", "us-east5", 2)
	e.createPool("full", full)

	for _, tc := range []struct{ pool, detail string }{
		{"bad-selector", "spec.provisionedThroughputSelector"},
		{"full", "at most 32"},
	} {
		p := e.waitPool(tc.pool, "Stalled", func(p *capacityv1alpha1.RegionPool) bool {
			return meta.IsStatusConditionTrue(p.Status.Conditions, capacityv1alpha1.ConditionStalled)
		})
		s := meta.FindStatusCondition(p.Status.Conditions, capacityv1alpha1.ConditionStalled)
		if s.Reason != capacityv1alpha1.ReasonRenderFailed || !strings.Contains(s.Message, tc.detail) {
			t.Errorf("%s: Stalled = %+v, want %s naming %q", tc.pool, s, capacityv1alpha1.ReasonRenderFailed, tc.detail)
		}
		if meta.IsStatusConditionTrue(p.Status.Conditions, capacityv1alpha1.ConditionReady) {
			t.Errorf("%s is Ready", tc.pool)
		}
	}
	if _, found := e.readTable("full-routing"); found {
		t.Error("a table was written for a pool that cannot be rendered")
	}
}
