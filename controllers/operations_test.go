package controllers

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	testingclock "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	capacityv1alpha1 "github.com/regionwarden/regionwarden/api/v1alpha1"
	"github.com/regionwarden/regionwarden/internal/gcp/gcpfake"
	"github.com/regionwarden/regionwarden/internal/testenv"
	"github.com/regionwarden/regionwarden/internal/waittest"
	"github.com/regionwarden/regionwarden/router/source"
	"github.com/regionwarden/regionwarden/router/table"
)

// The tests of docs/operations.md: what upgrades, restarts and uninstalls do,
// against the real API server.

// operator is one run of the operator's two controllers in namespace ns, as
// cmd/manager runs them, until stop.
type operator struct {
	mgr  ctrl.Manager
	stop func()
}

// startOperator runs both controllers, reading GCP through facts, with wrap
// (when not nil) around the client each reconciler writes through.
func startOperator(t *testing.T, ns string, facts FactsSource, wrap func(client.Client) client.Client) *operator {
	t.Helper()
	mgr := newManager(t, testConfig, ns)
	direct, err := client.New(testConfig, client.Options{Scheme: testScheme})
	if err != nil {
		t.Fatal(err)
	}
	ptClient, poolClient := direct, mgr.GetClient()
	if wrap != nil {
		ptClient, poolClient = wrap(ptClient), wrap(poolClient)
	}
	skip := true
	pts := &ProvisionedThroughputReconciler{Client: ptClient, Facts: facts, Recorder: mgr.GetEventRecorder("provisionedthroughput-controller")}
	if err := pts.SetupWithManager(mgr, controller.Options{SkipNameValidation: &skip}); err != nil {
		t.Fatal(err)
	}
	pools := &RegionPoolReconciler{Client: poolClient, Facts: facts, Recorder: mgr.GetEventRecorder(RegionPoolControllerName)}
	if err := pools.SetupWithManager(mgr, controller.Options{SkipNameValidation: &skip}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	o := &operator{mgr: mgr}
	stopped := false
	o.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}
	t.Cleanup(o.stop)
	return o
}

// dyingClient is the client of an operator killed at its status writes: a
// status patch waits until the process dies (its context ends) and never
// reaches the API server. Everything else goes through.
type dyingClient struct {
	client.Client
	// reached receives once per status write that waits.
	reached chan<- string
}

func (c dyingClient) Status() client.SubResourceWriter {
	return dyingStatus{SubResourceWriter: c.Client.Status(), reached: c.reached}
}

type dyingStatus struct {
	client.SubResourceWriter
	reached chan<- string
}

func (s dyingStatus) Patch(ctx context.Context, obj client.Object, _ client.Patch, _ ...client.SubResourcePatchOption) error {
	select {
	case s.reached <- fmt.Sprintf("%T/%s", obj, obj.GetName()):
	default:
	}
	<-ctx.Done()
	return ctx.Err()
}

// eventCount is how many times events with reason were recorded about the
// object called name in ns, as the API server keeps them (an event repeated
// by one recorder is one Event with a series count).
func eventCount(t *testing.T, ns, name, reason string) int {
	t.Helper()
	var list eventsv1.EventList
	if err := testClient.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range list.Items {
		if e.Regarding.Name != name || e.Reason != reason {
			continue
		}
		if e.Series != nil {
			n += int(e.Series.Count)
		} else {
			n++
		}
	}
	return n
}

// TestOperatorKilledMidReconcileConverges kills the operator while its
// reconciles of a ProvisionedThroughput and a RegionPool wait at their
// status writes, after the work before them (GCP asked, the routing table
// written), and starts it again: the restarted operator converges to the
// same table, and each change is announced by one event, not one per run.
func TestOperatorKilledMidReconcileConverges(t *testing.T) {
	ns := testenv.Namespace(t, testClient)
	clk := testingclock.NewFakeClock(ptT0)
	fake := gcpfake.NewMetricServer()
	fake.SetNow(clk.Now)
	fake.SetPT(gcpfake.PT{Project: testProject, Location: testLocation, Publisher: "google", Model: testModel + "-001", GSUs: 4, TokensPerSecond: 1000})
	facts := NewFacts(startMonitoring(t, fake, clk.Now), 0, clk.Now)
	ctx := context.Background()

	reached := make(chan string, 16)
	first := startOperator(t, ns, facts, func(c client.Client) client.Client { return dyingClient{Client: c, reached: reached} })
	pt := &capacityv1alpha1.ProvisionedThroughput{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ew1"},
		Spec:       capacityv1alpha1.ProvisionedThroughputSpec{Project: testProject, Location: testLocation, Model: testModel, GSUs: 4},
	}
	// The pool serves another model than the PT's, so that each is
	// reconciled to one state, announced once.
	pool := &capacityv1alpha1.RegionPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "flash"},
		Spec: capacityv1alpha1.RegionPoolSpec{Project: testProject, Model: "gemini-2.5-pro", Regions: []capacityv1alpha1.PoolRegion{
			{Name: testLocation}, {Name: "us-central1"},
		}},
	}
	for _, o := range []client.Object{pt, pool} {
		if err := testClient.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// Both reconciles reach their status writes: the PT was verified and
	// the pool's table written.
	waiting := map[string]bool{}
	for deadline := time.After(poolWait); len(waiting) < 2; {
		select {
		case key := <-reached:
			waiting[key] = true
		case <-deadline:
			t.Fatalf("the reconciles never reached their status writes; reached: %v", waiting)
		}
	}
	var written corev1.ConfigMap
	if err := testClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: "flash-routing"}, &written); err != nil {
		t.Fatalf("the killed run did not write the table before its status: %v", err)
	}
	// Give the killed run's event recorder time to send what it has.
	time.Sleep(time.Second)
	first.stop()

	second := startOperator(t, ns, facts, nil)
	defer second.stop()
	got := waittest.Until(t, poolWait, "converged after the restart", func() *capacityv1alpha1.RegionPool {
		return mustGet(t, testClient, pool.Namespace, pool.Name, &capacityv1alpha1.RegionPool{})
	}, func(p *capacityv1alpha1.RegionPool) bool {
		return isReconciled(p) && p.Status.TableHash == written.Annotations[table.AnnotationHash]
	})
	var gotPT capacityv1alpha1.ProvisionedThroughput
	if err := testClient.Get(ctx, client.ObjectKeyFromObject(pt), &gotPT); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(gotPT.Status.Conditions, capacityv1alpha1.ConditionVerified); c == nil || c.Reason != capacityv1alpha1.ReasonObserved {
		t.Errorf("PT Verified = %+v, want Observed", c)
	}
	var cm corev1.ConfigMap
	if err := testClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: "flash-routing"}, &cm); err != nil {
		t.Fatal(err)
	}
	if cm.Annotations[table.AnnotationHash] != got.Status.TableHash {
		t.Errorf("table hash %s, status says %s", cm.Annotations[table.AnnotationHash], got.Status.TableHash)
	}

	// Each change once: waited for, then given time to be joined by a
	// duplicate that a second announcement would bring.
	for _, want := range []struct{ name, reason string }{{"ew1", capacityv1alpha1.ReasonObserved}, {"flash", capacityv1alpha1.ReasonRendered}} {
		waittest.Until(t, poolWait, "a "+want.reason+" event about "+want.name,
			func() int { return eventCount(t, ns, want.name, want.reason) }, func(n int) bool { return n > 0 })
	}
	time.Sleep(time.Second)
	for _, want := range []struct{ name, reason string }{{"ew1", capacityv1alpha1.ReasonObserved}, {"flash", capacityv1alpha1.ReasonRendered}} {
		if n := eventCount(t, ns, want.name, want.reason); n != 1 {
			t.Errorf("%s events about %s: %d, want 1", want.reason, want.name, n)
		}
	}
}

// routerSource runs the router's table source (what `router
// --table-configmaps` runs) on ns until the test ends.
func routerSource(t *testing.T, ns string) *source.ConfigMapSource {
	t.Helper()
	cs, err := kubernetes.NewForConfig(testConfig)
	if err != nil {
		t.Fatal(err)
	}
	src := source.NewConfigMapSource(cs, ns, source.ConfigMapOptions{Endpoints: table.AllowHosts()})
	testenv.Go(t, "router source", src.Run)
	return src
}

// waitServing waits until src serves a table for which ok holds.
func waitServing(t *testing.T, src *source.ConfigMapSource, what string, ok func(*table.Table) bool) *table.Table {
	t.Helper()
	return waittest.Until(t, poolWait, "the router served "+what, src.Current,
		func(cur *table.Table) bool { return cur != nil && ok(cur) })
}

func regionNames(tb *table.Table) []string {
	var out []string
	for _, p := range tb.Pools {
		for _, r := range p.Regions {
			out = append(out, r.Name)
		}
	}
	slices.Sort(out)
	return out
}

// TestRoutersKeepTheirTablesWithoutTheOperator removes the operator: the
// routing tables stay, and routers go on serving them; a pool changed
// meanwhile changes nothing until an operator runs again, which renders it.
func TestRoutersKeepTheirTablesWithoutTheOperator(t *testing.T) {
	ns := testenv.Namespace(t, testClient)
	ctx := context.Background()
	op := startOperator(t, ns, nil, nil)
	pool := &capacityv1alpha1.RegionPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "flash"},
		Spec: capacityv1alpha1.RegionPoolSpec{Project: testProject, Model: testModel, Regions: []capacityv1alpha1.PoolRegion{
			{Name: "europe-west1"}, {Name: "us-central1"},
		}},
	}
	if err := testClient.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	src := routerSource(t, ns)
	before := waitServing(t, src, "the pool's table", func(tb *table.Table) bool { return len(tb.Pools) == 1 })
	hash := src.Hash()

	op.stop()
	var cm corev1.ConfigMap
	if err := testClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: "flash-routing"}, &cm); err != nil {
		t.Fatalf("the table went with the operator: %v", err)
	}
	if err := testClient.Get(ctx, client.ObjectKeyFromObject(pool), pool); err != nil {
		t.Fatal(err)
	}
	pool.Spec.Regions = append(pool.Spec.Regions, capacityv1alpha1.PoolRegion{Name: "us-east5"})
	if err := testClient.Update(ctx, pool); err != nil {
		t.Fatal(err)
	}
	// Nothing renders the change: the router keeps the table it has.
	time.Sleep(time.Second)
	if src.Hash() != hash || !slices.Equal(regionNames(src.Current()), regionNames(before)) {
		t.Fatalf("without the operator the router's table changed: %v", regionNames(src.Current()))
	}

	startOperator(t, ns, nil, nil)
	waitServing(t, src, "the changed pool", func(tb *table.Table) bool { return slices.Contains(regionNames(tb), "us-east5") })
}

// TestDeletingAPoolRemovesItsTable checks what makes a pool's table go with
// the pool: the table's ConfigMap names the pool as its controller, so the
// garbage collector deletes it once the pool is gone. The test control plane
// runs no garbage collector (it is part of kube-controller-manager), so the
// test checks the reference and then does what the collector does, deleting
// the ConfigMap: routers stop serving the pool, and the operator, which no
// longer has the pool, does not write it again.
func TestDeletingAPoolRemovesItsTable(t *testing.T) {
	ns := testenv.Namespace(t, testClient)
	ctx := context.Background()
	startOperator(t, ns, nil, nil)
	pool := &capacityv1alpha1.RegionPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "flash"},
		Spec:       capacityv1alpha1.RegionPoolSpec{Project: testProject, Model: testModel, Regions: []capacityv1alpha1.PoolRegion{{Name: "europe-west1"}}},
	}
	if err := testClient.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	src := routerSource(t, ns)
	waitServing(t, src, "the pool's table", func(tb *table.Table) bool { return len(tb.Pools) == 1 })

	var cm corev1.ConfigMap
	if err := testClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: "flash-routing"}, &cm); err != nil {
		t.Fatal(err)
	}
	ref := metav1.GetControllerOf(&cm)
	switch {
	case ref == nil:
		t.Fatalf("the table's ConfigMap has no controller: %+v", cm.OwnerReferences)
	case ref.APIVersion != capacityv1alpha1.GroupVersion.String() || ref.Kind != "RegionPool" || ref.Name != pool.Name || ref.UID != pool.UID:
		t.Errorf("the table's controller is %+v, want RegionPool %s (uid %s)", ref, pool.Name, pool.UID)
	case len(cm.OwnerReferences) != 1:
		t.Errorf("the table has other owners, which would keep it after the pool: %+v", cm.OwnerReferences)
	case ref.BlockOwnerDeletion != nil && *ref.BlockOwnerDeletion:
		// docs/operations.md says a foreground deletion of a pool does not
		// wait for its table; blocking it needs update on regionpools/finalizers.
		t.Errorf("the reference blocks the pool's deletion, which docs/operations.md says it does not")
	}

	if err := testClient.Delete(ctx, pool); err != nil {
		t.Fatal(err)
	}
	// What the garbage collector does once the owner is gone: it deletes
	// the table, and any table written after the pool's deletion that names
	// the gone pool as its controller. An operator whose cache has not yet
	// seen the deletion may write one such table; a second is long enough
	// for it to see the deletion, so the table is deleted after that
	// second, the first one or the rewrite.
	time.Sleep(time.Second)
	var written corev1.ConfigMap
	if err := testClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: "flash-routing"}, &written); err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(&written); ref == nil || ref.UID != pool.UID {
		t.Fatalf("the table after the pool's deletion is controlled by %+v, want the gone pool (uid %s)", ref, pool.UID)
	}
	if err := testClient.Delete(ctx, &written); err != nil {
		t.Fatal(err)
	}
	waitServing(t, src, "no pool", func(tb *table.Table) bool { return len(tb.Pools) == 0 })
	// The operator has seen the deletion by now: it writes the table no more.
	time.Sleep(time.Second)
	if err := testClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: "flash-routing"}, &cm); err == nil {
		t.Errorf("the operator wrote the deleted pool's table again")
	}
}
