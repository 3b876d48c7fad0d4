package controllers

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	capacityv1alpha1 "github.com/regionwarden/regionwarden/api/v1alpha1"
	"github.com/regionwarden/regionwarden/internal/testenv"
	"github.com/regionwarden/regionwarden/internal/waittest"
	"github.com/regionwarden/regionwarden/router/table"
)

// poolWait bounds how long a test waits for the controller to reach a state.
// It is a deadline against a hung test, never a measurement.
const poolWait = 30 * time.Second

// poolEnv is one RegionPool test's world: a namespace of its own and a
// manager, scoped to it, that runs the RegionPool controller (and no PT
// controller: tests write PT status themselves).
type poolEnv struct {
	t   testing.TB
	ns  string
	cl  client.Client // direct, so every read sees the last write
	mgr ctrl.Manager
	r   *RegionPoolReconciler
	rec *eventSpy
}

// newPoolEnv starts the controller in a new namespace, with the concurrency
// cmd/manager gives it. With start false the
// manager is built but not started (the caller starts it with env.start).
func newPoolEnv(t testing.TB, start bool) *poolEnv {
	t.Helper()
	return newPoolEnvAs(t, testConfig, start, testenv.Namespace(t, testClient))
}

// newPoolEnvAs is newPoolEnv with the manager's identity cfg, watching
// namespaces; the env's own namespace is the first. env.in gives the env of
// another of them.
func newPoolEnvAs(t testing.TB, cfg *rest.Config, start bool, namespaces ...string) *poolEnv {
	t.Helper()
	e := &poolEnv{t: t, ns: namespaces[0], cl: testClient}
	mgr := newManager(t, cfg, namespaces...)
	e.mgr = mgr
	e.rec = &eventSpy{next: mgr.GetEventRecorder(RegionPoolControllerName)}
	e.r = &RegionPoolReconciler{Client: mgr.GetClient(), Recorder: e.rec}
	skip := true
	if err := e.r.SetupWithManager(mgr, controller.Options{SkipNameValidation: &skip, MaxConcurrentReconciles: 4}); err != nil {
		t.Fatal(err)
	}
	if start {
		e.start()
	}
	return e
}

// in is the env for namespace ns, one of those its manager watches.
func (e *poolEnv) in(ns string) *poolEnv {
	c := *e
	c.ns = ns
	return &c
}

// start runs the manager until the test ends and waits for its cache.
func (e *poolEnv) start() {
	startManager(e.t, e.mgr)
}

// poolOption changes a RegionPool before it is created.
type poolOption func(*capacityv1alpha1.RegionPool)

func poolWithModel(m string) poolOption {
	return func(p *capacityv1alpha1.RegionPool) { p.Spec.Model = m }
}

func poolWithHint(region string, rps int32) poolOption {
	return func(p *capacityv1alpha1.RegionPool) {
		for i := range p.Spec.Regions {
			if p.Spec.Regions[i].Name == region {
				p.Spec.Regions[i].RequestsPerSecond = &rps
			}
		}
	}
}

func poolWithSelector(labels map[string]string) poolOption {
	return func(p *capacityv1alpha1.RegionPool) {
		p.Spec.ProvisionedThroughputSelector = &metav1.LabelSelector{MatchLabels: labels}
	}
}

func poolWithProject(project string) poolOption {
	return func(p *capacityv1alpha1.RegionPool) { p.Spec.Project = project }
}

func poolWithOutput(name string) poolOption {
	return func(p *capacityv1alpha1.RegionPool) { p.Spec.Output.ConfigMapName = name }
}

// createPool creates a pool of testProject and testModel over regions in
// namespace ns, changed by opts: the one way the controller tests create a
// RegionPool.
func createPool(t testing.TB, ns, name string, regions []string, opts ...poolOption) *capacityv1alpha1.RegionPool {
	t.Helper()
	p := &capacityv1alpha1.RegionPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       capacityv1alpha1.RegionPoolSpec{Project: testProject, Model: testModel},
	}
	for _, r := range regions {
		p.Spec.Regions = append(p.Spec.Regions, capacityv1alpha1.PoolRegion{Name: r})
	}
	for _, o := range opts {
		o(p)
	}
	if err := testClient.Create(context.Background(), p); err != nil {
		t.Fatalf("creating pool %s: %v", name, err)
	}
	return p
}

// createPool creates a pool in the env's namespace (createPool).
func (e *poolEnv) createPool(name string, regions []string, opts ...poolOption) *capacityv1alpha1.RegionPool {
	e.t.Helper()
	return createPool(e.t, e.ns, name, regions, opts...)
}

// readyPT creates a PT of gsus in location and makes it ready, as the PT
// controller would once GCP confirmed it.
func (e *poolEnv) readyPT(name, location string, gsus int64) {
	e.t.Helper()
	createPT(e.t, e.ns, name, gsus, withLocation(location))
	e.setPTReady(name, true, capacityv1alpha1.ReasonActive, 0)
}

// editPool changes pool name's spec by edit and updates it, afresh on a
// conflict: the controller writes the pool's status meanwhile, which moves
// its resourceVersion.
func (e *poolEnv) editPool(name string, edit func(*capacityv1alpha1.RegionPool)) {
	e.t.Helper()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p := e.pool(name)
		edit(p)
		return e.cl.Update(context.Background(), p)
	}); err != nil {
		e.t.Fatalf("updating pool %s: %v", name, err)
	}
}

// setPTReady writes the PT's Ready condition (and observed tokens per second
// when tokens > 0) through the status subresource, as the PT controller would.
func (e *poolEnv) setPTReady(name string, ready bool, reason string, tokens float64) {
	e.t.Helper()
	if err := setPTReadyStatus(context.Background(), e.cl, types.NamespacedName{Namespace: e.ns, Name: name}, ready, reason, tokens); err != nil {
		e.t.Fatalf("setting the status of PT %s: %v", name, err)
	}
}

func setPTReadyStatus(ctx context.Context, cl client.Client, key types.NamespacedName, ready bool, reason string, tokens float64) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pt := &capacityv1alpha1.ProvisionedThroughput{}
		if err := cl.Get(ctx, key, pt); err != nil {
			return err
		}
		status := metav1.ConditionFalse
		if ready {
			status = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&pt.Status.Conditions, metav1.Condition{
			Type: capacityv1alpha1.ConditionReady, Status: status, Reason: reason,
			Message: "set by the test", ObservedGeneration: pt.Generation,
		})
		if tokens > 0 {
			pt.Status.Observed = &capacityv1alpha1.ObservedCapacity{GSUs: pt.Spec.GSUs, TokensPerSecond: tokens}
		}
		return cl.Status().Update(ctx, pt)
	})
}

// pool reads a pool from the API server.
func (e *poolEnv) pool(name string) *capacityv1alpha1.RegionPool {
	e.t.Helper()
	return mustGet(e.t, e.cl, e.ns, name, &capacityv1alpha1.RegionPool{})
}

// waitPool waits until ok holds of the pool.
func (e *poolEnv) waitPool(name, what string, ok func(*capacityv1alpha1.RegionPool) bool) *capacityv1alpha1.RegionPool {
	e.t.Helper()
	return waittest.Until(e.t, poolWait, "pool "+name+" "+what, func() *capacityv1alpha1.RegionPool { return e.pool(name) }, ok)
}

// routingTable is a routing-table ConfigMap and the table it holds.
type routingTable struct {
	cm    *corev1.ConfigMap
	table *table.Table
}

// region is the table's region called name, or nil.
func (rt routingTable) region(name string) *table.Region {
	for i := range rt.table.Pools[0].Regions {
		if rt.table.Pools[0].Regions[i].Name == name {
			return &rt.table.Pools[0].Regions[i]
		}
	}
	return nil
}

// readTable reads and parses ConfigMap name; ok is false while it is absent.
func (e *poolEnv) readTable(name string) (routingTable, bool) {
	e.t.Helper()
	cm := &corev1.ConfigMap{}
	if err := e.cl.Get(context.Background(), types.NamespacedName{Namespace: e.ns, Name: name}, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return routingTable{}, false
		}
		e.t.Fatalf("reading ConfigMap %s: %v", name, err)
	}
	tb, err := table.Parse([]byte(cm.Data[table.DataKey]))
	if err != nil {
		return routingTable{cm: cm}, true
	}
	return routingTable{cm: cm, table: tb}, true
}

// waitTable waits until ConfigMap name holds a table for which ok holds.
func (e *poolEnv) waitTable(name, what string, ok func(routingTable) bool) routingTable {
	e.t.Helper()
	return waittest.Until(e.t, poolWait, "ConfigMap "+name+" "+what,
		func() routingTable { rt, _ := e.readTable(name); return rt },
		func(rt routingTable) bool { return rt.table != nil && ok(rt) })
}

// isReconciled reports whether the pool's status describes its current spec.
func isReconciled(p *capacityv1alpha1.RegionPool) bool {
	return p.Status.ObservedGeneration == p.Generation &&
		meta.IsStatusConditionTrue(p.Status.Conditions, capacityv1alpha1.ConditionReady)
}

// tiers is the table's regions as "name=tier" in table order.
func tiers(rt routingTable) []string {
	var out []string
	for _, r := range rt.table.Pools[0].Regions {
		out = append(out, r.Name+"="+string(r.Tier))
	}
	return out
}

func protects(region string) func(routingTable) bool {
	return func(rt routingTable) bool {
		r := rt.region(region)
		return r != nil && r.Tier == table.TierProvisioned
	}
}

func sharedOrAbsent(region string) func(routingTable) bool {
	return func(rt routingTable) bool {
		r := rt.region(region)
		return r == nil || r.Tier == table.TierShared
	}
}
