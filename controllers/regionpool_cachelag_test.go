package controllers

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	capacityv1alpha1 "github.com/regionwarden/regionwarden/api/v1alpha1"
	"github.com/regionwarden/regionwarden/internal/testenv"
	"github.com/regionwarden/regionwarden/internal/waittest"
	"github.com/regionwarden/regionwarden/router/table"
)

// staleClient answers reads of ConfigMaps, whole or as metadata, with what
// stale(key) returns, nil for "not found": what a lagging cache answers, or
// a read made just before someone else's write. Every other read, and every
// write, goes to the wrapped client.
type staleClient struct {
	client.Client
	stale func(types.NamespacedName) *corev1.ConfigMap
}

func (s staleClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		old := s.stale(key)
		if old == nil {
			return apierrors.NewNotFound(corev1.Resource("configmaps"), key.Name)
		}
		old.DeepCopyInto(o)
		return nil
	case *metav1.PartialObjectMetadata:
		if o.Kind != "ConfigMap" {
			break
		}
		old := s.stale(key)
		if old == nil {
			return apierrors.NewNotFound(corev1.Resource("configmaps"), key.Name)
		}
		o.ObjectMeta = *old.ObjectMeta.DeepCopy()
		return nil
	}
	return s.Client.Get(ctx, key, obj, opts...)
}

// createForeignConfigMap creates, in ns, a ConfigMap called name that belongs to
// someone else.
func createForeignConfigMap(t *testing.T, ns, name string) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"team": "web"}},
		Data:       map[string]string{"app.conf": "keep me"},
	}
	if err := testClient.Create(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	return cm
}

// expectUntouched fails when the ConfigMap changed since want was read.
func expectUntouched(t *testing.T, want *corev1.ConfigMap) {
	t.Helper()
	got := &corev1.ConfigMap{}
	if err := testClient.Get(context.Background(), client.ObjectKeyFromObject(want), got); err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != want.ResourceVersion || len(got.OwnerReferences) != 0 || got.Data[table.DataKey] != "" {
		t.Fatalf("the foreign ConfigMap was taken over: owners %+v, labels %v, data keys %d",
			got.OwnerReferences, got.Labels, len(got.Data))
	}
}

// TestRegionPoolDoesNotAdoptAConfigMapCreatedMeanwhile: a ConfigMap of the
// pool's output name that someone else creates after the pool looked (or
// that the manager's cache has not seen yet) is not taken over; nor is one
// created in place of the pool's own ConfigMap after the pool read its own.
// Once the pool reads again, it is Stalled with ConfigMapConflict, as for any
// foreign ConfigMap.
func TestRegionPoolDoesNotAdoptAConfigMapCreatedMeanwhile(t *testing.T) {
	ctx := context.Background()
	// A manager whose cache serves the reconciler's other reads, running
	// no controller: this test runs each reconcile itself.
	e := &poolEnv{t: t, ns: testenv.Namespace(t, testClient), cl: testClient}
	e.mgr = newManager(t, testConfig, e.ns)
	if err := indexPoolFields(e.mgr.GetFieldIndexer()); err != nil {
		t.Fatal(err)
	}
	e.start()
	e.createPool("flash", []string{"europe-west1"})
	key := types.NamespacedName{Namespace: e.ns, Name: "flash"}
	// The reconciles below read the pool from the manager's cache: one that
	// has not seen it yet finds nothing to do and succeeds, whatever the
	// ConfigMap (as a slow machine, or -race, showed).
	_ = waittest.Until(t, poolWait, "the manager's cache to hold the pool",
		func() error { return e.mgr.GetClient().Get(ctx, key, &capacityv1alpha1.RegionPool{}) },
		func(err error) bool { return err == nil })
	cmKey := types.NamespacedName{Namespace: e.ns, Name: "flash-routing"}
	// The reconciler reads through c, both from the cache and past it.
	reconcileWith := func(c client.Client) error {
		r := &RegionPoolReconciler{Client: c, Reader: c}
		_, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: key})
		return err
	}
	fresh := staleClient{Client: e.mgr.GetClient(), stale: func(k types.NamespacedName) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{}
		if err := testClient.Get(ctx, k, cm); err != nil {
			return nil
		}
		return cm
	}}

	t.Run("created after the pool saw none", func(t *testing.T) {
		foreign := createForeignConfigMap(t, e.ns, cmKey.Name)
		sawNone := staleClient{Client: e.mgr.GetClient(), stale: func(types.NamespacedName) *corev1.ConfigMap { return nil }}
		if err := reconcileWith(sawNone); err == nil {
			t.Error("the reconcile succeeded although the ConfigMap it would write belongs to someone else")
		}
		expectUntouched(t, foreign)

		// Read again, the ConfigMap is seen for what it is: the pool stalls.
		if err := reconcileWith(fresh); err != nil {
			t.Fatal(err)
		}
		if c := meta.FindStatusCondition(e.pool("flash").Status.Conditions, capacityv1alpha1.ConditionStalled); c == nil || c.Reason != capacityv1alpha1.ReasonConfigMapConflict {
			t.Errorf("Stalled = %+v, want ConfigMapConflict", c)
		}
		expectUntouched(t, foreign)
		if err := testClient.Delete(ctx, foreign); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("created in place of the pool's own after the pool read it", func(t *testing.T) {
		if err := reconcileWith(fresh); err != nil {
			t.Fatal(err)
		}
		own := &corev1.ConfigMap{}
		if err := testClient.Get(ctx, cmKey, own); err != nil {
			t.Fatalf("the pool did not write its ConfigMap: %v", err)
		}
		// The pool's next read would find its own ConfigMap out of date.
		stale := own.DeepCopy()
		stale.Data[table.DataKey] = "{}"
		if err := testClient.Delete(ctx, own); err != nil {
			t.Fatal(err)
		}
		foreign := createForeignConfigMap(t, e.ns, cmKey.Name)
		sawOwn := staleClient{Client: e.mgr.GetClient(), stale: func(types.NamespacedName) *corev1.ConfigMap { return stale.DeepCopy() }}
		if err := reconcileWith(sawOwn); err == nil {
			t.Error("the reconcile succeeded although the ConfigMap it would write belongs to someone else")
		}
		expectUntouched(t, foreign)
	})
}
