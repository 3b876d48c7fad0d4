package controllers

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capacityv1alpha1 "github.com/regionwarden/regionwarden/api/v1alpha1"
)

// Two RegionPools of one namespace with the same project, publisher and
// model would each render a table for the same pool key, and a router serves
// only one of them (the ConfigMap whose name sorts first), whatever their
// owners meant. So the older pool renders, and the younger renders nothing,
// deletes the ConfigMap it may have written, and says why: Ready=False and
// Stalled with reason DuplicatePool, until the older goes or one of them
// changes model. Age is the creation time, then the name: the same answer
// from every reconcile of either pool.

// olderPool returns the oldest other pool of pool's namespace that routes
// the same project, publisher and model and is not being deleted, or nil
// when pool is the oldest.
func (r *RegionPoolReconciler) olderPool(ctx context.Context, pool *capacityv1alpha1.RegionPool) (*capacityv1alpha1.RegionPool, error) {
	pools, err := r.poolsOfModel(ctx, pool.Namespace, pool.Spec.Project, pool.GetPublisher(), pool.Spec.Model)
	if err != nil {
		return nil, err
	}
	oldest := pool
	for i := range pools {
		p := &pools[i]
		if p.UID == pool.UID || !p.DeletionTimestamp.IsZero() || !samePoolKey(p, pool) {
			continue
		}
		if olderThan(p, oldest) {
			oldest = p
		}
	}
	if oldest == pool {
		return nil, nil
	}
	return oldest, nil
}

// samePoolKey reports whether a and b route the same pool key. The cache's
// index may be a step behind a spec change, so the spec decides.
func samePoolKey(a, b *capacityv1alpha1.RegionPool) bool {
	return a.Spec.Project == b.Spec.Project && a.GetPublisher() == b.GetPublisher() && a.Spec.Model == b.Spec.Model
}

// olderThan orders pools by creation time, then by name.
func olderThan(a, b *capacityv1alpha1.RegionPool) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}

// standDown makes pool, the younger of two pools of one key, render
// nothing: its ConfigMap (under its current or previous name) is deleted
// and its status says which pool routes the key. A person must delete one
// pool or change its model: the pool is Stalled, and reconciled again when
// a pool of its model changes.
func (r *RegionPoolReconciler) standDown(ctx context.Context, pool, older *capacityv1alpha1.RegionPool) (ctrl.Result, error) {
	for _, name := range []string{pool.GetConfigMapName(), pool.Status.ConfigMapName} {
		if name == "" {
			continue
		}
		if err := r.deleteOwnConfigMap(ctx, pool, name); err != nil {
			markReconciling(pool, capacityv1alpha1.ReasonProgressing, fmt.Sprintf("deleting ConfigMap %s: %v", name, err))
			return ctrl.Result{}, err
		}
	}
	pool.Status.ConfigMapName, pool.Status.TableHash = "", ""
	setTableRegions(pool, nil)
	msg := fmt.Sprintf("RegionPool %s, created earlier, routes %s/%s/%s in this namespace: a router serves one table per model, "+
		"so this pool renders none; delete one of the two pools, or change this one's project or model",
		older.Name, pool.Spec.Project, pool.GetPublisher(), pool.Spec.Model)
	r.setReady(pool, metav1.ConditionFalse, capacityv1alpha1.ReasonDuplicatePool, msg)
	markStalled(pool, capacityv1alpha1.ReasonDuplicatePool, msg)
	return ctrl.Result{}, nil
}

// poolsOfSameModel maps a pool to the other pools of its namespace and
// model: the creation, deletion or model change of one can make another the
// oldest of its model, or a duplicate. On an update it is called with the
// old and the new object, so the pools of the model left hear of it too.
func (r *RegionPoolReconciler) poolsOfSameModel(ctx context.Context, o client.Object) []ctrl.Request {
	pool, ok := o.(*capacityv1alpha1.RegionPool)
	if !ok {
		return nil
	}
	return r.requestsOfModel(ctx, pool, pool.Spec.Project, pool.GetPublisher(), pool.Spec.Model,
		func(p *capacityv1alpha1.RegionPool) bool { return p.Name != pool.Name })
}
