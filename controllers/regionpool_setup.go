package controllers

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	capacityv1alpha1 "github.com/regionwarden/regionwarden/api/v1alpha1"
)

// RegionPoolControllerName names the controller in logs, metrics and as the
// reporting controller of its events.
const RegionPoolControllerName = "regionpool"

// Field indexes of the manager's cache. Each maps an object to the key its
// watchers look it up by, so that a change reaches exactly the pools it
// concerns without listing every pool.
const (
	// indexPoolByModel keys a RegionPool by modelKey of its spec.
	indexPoolByModel = "regionpool.spec.modelKey"
	// indexPTByModel keys a ProvisionedThroughput by modelKey of its spec.
	indexPTByModel = "provisionedthroughput.spec.modelKey"
	// indexPoolByConfigMap keys a RegionPool by its output ConfigMap's name.
	indexPoolByConfigMap = "regionpool.spec.output.configMapName"
)

// modelKey is "project/publisher/model": the capacity a PT declares and a
// pool routes is identified by these three, compared exactly.
func modelKey(project, publisher, model string) string {
	return project + "/" + publisher + "/" + model
}

// SetupWithManager registers the field indexes and the reconciler with mgr.
//
// A pool reconciles when its spec changes (its own status writes do not
// count), when a PT of its model that it selects changes in a way the table
// shows (readiness, GSUs, observed tokens, labels, creation or deletion),
// when another pool of its model is created, deleted or changes model (one
// of them may become, or stop being, a duplicate), and when a ConfigMap with
// its output name changes: its own, so a hand edit is reverted, or a foreign
// one, so a Stalled conflict clears when that ConfigMap goes. ConfigMaps are cached as metadata only. Discovery needs no
// watch: each reconcile asks GCP (through the shared cache) and requeues at
// the discovery interval.
func (r *RegionPoolReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if r.Reader == nil {
		r.Reader = mgr.GetAPIReader()
	}
	if err := indexPoolFields(mgr.GetFieldIndexer()); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(RegionPoolControllerName).
		For(&capacityv1alpha1.RegionPool{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&corev1.ConfigMap{}, builder.OnlyMetadata).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.poolsForConfigMap), builder.OnlyMetadata).
		Watches(&capacityv1alpha1.ProvisionedThroughput{}, handler.EnqueueRequestsFromMapFunc(r.poolsForPT),
			builder.WithPredicates(ptRoutingChanged{})).
		Watches(&capacityv1alpha1.RegionPool{}, handler.EnqueueRequestsFromMapFunc(r.poolsOfSameModel),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WithOptions(opts).
		Complete(traced("RegionPool", r))
}

// indexPoolFields registers the field indexes the RegionPool reconciler
// reads through, once per manager.
func indexPoolFields(idx client.FieldIndexer) error {
	ctx := context.Background()
	if err := idx.IndexField(ctx, &capacityv1alpha1.RegionPool{}, indexPoolByModel, func(o client.Object) []string {
		p := o.(*capacityv1alpha1.RegionPool)
		return []string{modelKey(p.Spec.Project, p.GetPublisher(), p.Spec.Model)}
	}); err != nil {
		return err
	}
	if err := idx.IndexField(ctx, &capacityv1alpha1.RegionPool{}, indexPoolByConfigMap, func(o client.Object) []string {
		return []string{o.(*capacityv1alpha1.RegionPool).GetConfigMapName()}
	}); err != nil {
		return err
	}
	if err := idx.IndexField(ctx, &capacityv1alpha1.ProvisionedThroughput{}, indexPTByModel, func(o client.Object) []string {
		pt := o.(*capacityv1alpha1.ProvisionedThroughput)
		return []string{modelKey(pt.Spec.Project, pt.GetPublisher(), pt.Spec.Model)}
	}); err != nil {
		return err
	}
	return nil
}

// poolsForPT maps a PT to the pools of its namespace and model whose selector
// matches its labels. On an update it is called with the old and the new
// object, so a pool that stops selecting a PT hears of it too.
func (r *RegionPoolReconciler) poolsForPT(ctx context.Context, o client.Object) []ctrl.Request {
	pt, ok := o.(*capacityv1alpha1.ProvisionedThroughput)
	if !ok {
		return nil
	}
	return r.requestsOfModel(ctx, pt, pt.Spec.Project, pt.GetPublisher(), pt.Spec.Model, func(p *capacityv1alpha1.RegionPool) bool {
		// A pool with a bad selector is reconciled by its own watch and
		// reports the error there.
		sel, err := poolSelector(p)
		return err == nil && sel.Matches(labels.Set(pt.Labels))
	})
}

// requestsOfModel maps o, a watched object of a project and model, to the
// pools of its namespace and that model that keep holds of. A failed list is
// logged: a watch mapper has no error to return.
func (r *RegionPoolReconciler) requestsOfModel(ctx context.Context, o client.Object, project, publisher, model string, keep func(*capacityv1alpha1.RegionPool) bool) []ctrl.Request {
	pools, err := r.poolsOfModel(ctx, o.GetNamespace(), project, publisher, model)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing the pools of a model", "object", client.ObjectKeyFromObject(o), "model", model)
		return nil
	}
	return requestsFor(pools, keep)
}

// requestsFor is a reconcile request for each of pools that keep holds of.
func requestsFor(pools []capacityv1alpha1.RegionPool, keep func(*capacityv1alpha1.RegionPool) bool) []ctrl.Request {
	var reqs []ctrl.Request
	for i := range pools {
		if keep(&pools[i]) {
			reqs = append(reqs, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&pools[i])})
		}
	}
	return reqs
}

// poolsOfModel lists the RegionPools of namespace that route project,
// publisher and model, through indexPoolByModel.
func (r *RegionPoolReconciler) poolsOfModel(ctx context.Context, namespace, project, publisher, model string) ([]capacityv1alpha1.RegionPool, error) {
	var list capacityv1alpha1.RegionPoolList
	err := r.Client.List(ctx, &list, client.InNamespace(namespace),
		client.MatchingFields{indexPoolByModel: modelKey(project, publisher, model)})
	return list.Items, err
}

// poolsForConfigMap maps a ConfigMap to the pools of its namespace that write
// a ConfigMap of that name, whoever owns it.
func (r *RegionPoolReconciler) poolsForConfigMap(ctx context.Context, o client.Object) []ctrl.Request {
	var pools capacityv1alpha1.RegionPoolList
	if err := r.Client.List(ctx, &pools, client.InNamespace(o.GetNamespace()),
		client.MatchingFields{indexPoolByConfigMap: o.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing the pools of a ConfigMap", "configMap", client.ObjectKeyFromObject(o))
		return nil
	}
	return requestsFor(pools.Items, func(*capacityv1alpha1.RegionPool) bool { return true })
}

// ptRoutingChanged passes PT events that can change a routing table:
// creation, deletion, and updates of labels, spec, readiness or observed
// tokens. The PT controller's routine status writes (lastVerifiedTime,
// utilization) do not reconcile any pool.
type ptRoutingChanged struct {
	predicate.Funcs
}

// Update reports whether the routing view of the PT changed.
func (ptRoutingChanged) Update(e event.UpdateEvent) bool {
	oldPT, ok1 := e.ObjectOld.(*capacityv1alpha1.ProvisionedThroughput)
	newPT, ok2 := e.ObjectNew.(*capacityv1alpha1.ProvisionedThroughput)
	if !ok1 || !ok2 {
		return true
	}
	return oldPT.Generation != newPT.Generation ||
		!equality.Semantic.DeepEqual(oldPT.Labels, newPT.Labels) ||
		oldPT.DeletionTimestamp.IsZero() != newPT.DeletionTimestamp.IsZero() ||
		ptReady(oldPT) != ptReady(newPT) ||
		observedTokens(oldPT) != observedTokens(newPT)
}

// Create passes every creation.
func (ptRoutingChanged) Create(event.CreateEvent) bool { return true }

// Delete passes every deletion.
func (ptRoutingChanged) Delete(event.DeleteEvent) bool { return true }

// Generic passes every generic event.
func (ptRoutingChanged) Generic(event.GenericEvent) bool { return true }

func observedTokens(pt *capacityv1alpha1.ProvisionedThroughput) float64 {
	if pt.Status.Observed == nil {
		return 0
	}
	return pt.Status.Observed.TokensPerSecond
}
