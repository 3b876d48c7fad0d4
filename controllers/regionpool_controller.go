package controllers

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	capacityv1alpha1 "github.com/regionwarden/regionwarden/api/v1alpha1"
	"github.com/regionwarden/regionwarden/router/table"
)

// RegionPoolFieldOwner is the server-side apply field manager of every
// routing-table ConfigMap: the one writer of those objects.
const RegionPoolFieldOwner = "regionwarden-regionpool"

// RegionPoolReconciler renders each RegionPool, with the ready
// ProvisionedThroughputs that select it and the Provisioned Throughput GCP
// reports that none declares (discovery), into the pool's routing-table
// ConfigMap, and writes only the pool's status and that ConfigMap.
//
// A PT selects a pool when both are in one namespace and have the same
// project, publisher and model (exact strings, see ptMatchesPool). A pool's
// provisionedThroughputSelector narrows that set by labels; it never widens it
// to PTs of another model, whose capacity this pool's calls cannot use.
//
// The ConfigMap is owned by the pool (controller reference), so the garbage
// collector deletes it with the pool, and it is written by server-side apply
// under RegionPoolFieldOwner with forced ownership, so a hand edit is
// reverted on the next reconcile. A ConfigMap of the same name that the pool
// does not control is never written, even one the manager's cache has not
// seen yet (see writeConfigMap): the pool is Stalled until a person renames
// one of them.
type RegionPoolReconciler struct {
	// Client reads PTs from the manager's cache, reads ConfigMaps as
	// metadata only, and writes ConfigMaps and pool status.
	Client client.Client
	// Reader reads the pool itself from the API server, not the cache: the
	// reconcile that follows a status write must see that write, or it would
	// take the old conditions for current and announce the same change twice.
	// SetupWithManager sets it to the manager's API reader when nil.
	Reader client.Reader
	// Recorder records events; nil records none.
	Recorder events.EventRecorder
	// Facts tells what Provisioned Throughput GCP reports, for discovery. It
	// is the ProvisionedThroughputReconciler's (NewFacts), so discovery and
	// verification share one GCP call per project and interval. Nil means the manager runs
	// without GCP: discovery is off and CapacityDeclared says so.
	Facts FactsSource
	// DiscoveryInterval, when positive, replaces every pool's
	// spec.discovery.interval, which cannot go under 30s: for emulated
	// regions and benchmarks, where GCP's answers change in seconds. Zero
	// uses each pool's interval.
	DiscoveryInterval time.Duration
}

// +kubebuilder:rbac:groups=capacity.regionwarden.io,resources=regionpools,verbs=get;list;watch
// +kubebuilder:rbac:groups=capacity.regionwarden.io,resources=regionpools/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=capacity.regionwarden.io,resources=provisionedthroughputs,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=system,resources=configmaps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,namespace=system,resources=events,verbs=create;patch

// Reconcile renders one RegionPool and writes its status, once, on the way out.
func (r *RegionPoolReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pool := &capacityv1alpha1.RegionPool{}
	return reconcileObject(ctx, r.reader(), r.Client, r.Recorder, req, pool, forgetDiscoveryMetrics, poolStatus, func(buf events.EventRecorder) (ctrl.Result, error) {
		work := *r
		work.Recorder = buf
		return work.reconcile(ctx, pool)
	})
}

// poolStatus is the part of a RegionPool that a reconcile writes.
func poolStatus(pool *capacityv1alpha1.RegionPool) any { return pool.Status }

func (r *RegionPoolReconciler) reader() client.Reader {
	if r.Reader != nil {
		return r.Reader
	}
	return r.Client
}

// reconcile asks GCP what it reports (discovery), renders the table, checks
// that the ConfigMap is the pool's to write, writes it and fills in the
// status. A pool whose discovery is on is reconciled again at its discovery
// interval.
func (r *RegionPoolReconciler) reconcile(ctx context.Context, pool *capacityv1alpha1.RegionPool) (ctrl.Result, error) {
	// A selector the API server accepted but that does not parse, or a
	// table that does not validate (more than table.MaxRegions with the
	// PTs' locations), is for a person to fix: retrying the same inputs gives
	// the same error, and a change to the pool or its PTs reconciles again.
	stall := func(err error) (ctrl.Result, error) {
		msg := "the routing table cannot be rendered: " + err.Error() +
			"; change the pool, or the ProvisionedThroughputs that add locations to it, so that it is valid (routers keep the last table written)"
		r.setReady(pool, metav1.ConditionFalse, capacityv1alpha1.ReasonRenderFailed, msg)
		markStalled(pool, capacityv1alpha1.ReasonRenderFailed, msg)
		return ctrl.Result{}, reconcile.TerminalError(err)
	}
	if older, err := r.olderPool(ctx, pool); err != nil {
		markReconciling(pool, capacityv1alpha1.ReasonProgressing, "listing the pools of the same model: "+err.Error())
		return ctrl.Result{}, err
	} else if older != nil {
		return r.standDown(ctx, pool, older)
	}
	sel, err := poolSelector(pool)
	if err != nil {
		return stall(err)
	}
	pts, err := r.selectPTs(ctx, pool, sel)
	if err != nil {
		markReconciling(pool, capacityv1alpha1.ReasonProgressing, "listing ProvisionedThroughputs: "+err.Error())
		return ctrl.Result{}, err
	}
	disc := r.discover(ctx, pool, pts)
	out := renderPool(pool, pts, disc.protect)
	data, err := table.Render(&table.Table{Version: table.Version, Pools: []table.Pool{out.pool}})
	if err != nil {
		return stall(err)
	}
	hash := table.Hash(data)
	name := pool.GetConfigMapName()

	if foreign, err := r.writeConfigMap(ctx, pool, name, data, hash); err != nil {
		msg := fmt.Sprintf("writing ConfigMap %s/%s: %v; retrying (routers keep the last table written). If it lasts, check that the operator may write ConfigMaps in this namespace (its Role, a ResourceQuota)", pool.Namespace, name, err)
		r.setReady(pool, metav1.ConditionFalse, capacityv1alpha1.ReasonWriteFailed, msg)
		markReconciling(pool, capacityv1alpha1.ReasonWriteFailed, msg)
		return ctrl.Result{}, err
	} else if foreign {
		// Terminal: the ConfigMap watch brings the pool back when that
		// ConfigMap changes or goes away.
		msg := fmt.Sprintf("ConfigMap %s/%s exists and is not controlled by this RegionPool: it is left alone; delete it, or set spec.output.configMapName to another name", pool.Namespace, name)
		r.setReady(pool, metav1.ConditionFalse, capacityv1alpha1.ReasonConfigMapConflict, msg)
		markStalled(pool, capacityv1alpha1.ReasonConfigMapConflict, msg)
		return ctrl.Result{}, nil
	}
	if err := r.deleteRenamedConfigMap(ctx, pool, name); err != nil {
		markReconciling(pool, capacityv1alpha1.ReasonProgressing, err.Error())
		return ctrl.Result{}, err
	}

	pool.Status.ConfigMapName = name
	pool.Status.TableHash = hash
	setTableRegions(pool, out.regions)
	reason, msg := readyMessage(pool, name, out)
	r.setReady(pool, metav1.ConditionTrue, reason, msg)
	markReconciled(pool)
	return ctrl.Result{RequeueAfter: disc.requeue}, nil
}

// setReady sets Ready and records an event when it changes: a Warning for
// False, a Normal one for True, each with the condition's reason.
func (r *RegionPoolReconciler) setReady(pool *capacityv1alpha1.RegionPool, status metav1.ConditionStatus, reason, msg string) {
	eventtype := eventNormal
	if status != metav1.ConditionTrue {
		eventtype = eventWarning
	}
	setConditionWithEvent(r.Recorder, pool, eventtype, ActionRender, capacityv1alpha1.ConditionReady, status, reason, msg)
}

// readyMessage says what the table protects. When a ready PT added a location
// that spec.regions does not list, the reason is UndeclaredRegionsAdded and
// the message names the location and its PTs: the region is protected, and
// the spec should say so too.
func readyMessage(pool *capacityv1alpha1.RegionPool, name string, out rendered) (reason, msg string) {
	var b strings.Builder
	fmt.Fprintf(&b, "routing table written to ConfigMap %s: ", name)
	if len(out.protected) == 0 {
		fmt.Fprintf(&b, "no provisioned regions, %d shared", len(out.regions))
	} else {
		fmt.Fprintf(&b, "provisioned (never ejected): %s; %d shared", strings.Join(out.protected, ", "), len(out.regions)-len(out.protected))
	}
	if len(out.undeclared) == 0 {
		return capacityv1alpha1.ReasonRendered, b.String()
	}
	for _, u := range out.undeclared {
		fmt.Fprintf(&b, "; %s is routed as provisioned because ProvisionedThroughput %s declares capacity there, although spec.regions does not list it",
			u.name, strings.Join(u.pts, ", "))
	}
	b.WriteString(": add it to spec.regions of RegionPool " + pool.Name)
	return capacityv1alpha1.ReasonUndeclaredRegions, b.String()
}

// selectPTs lists the PTs of the pool's project, publisher and model in its
// namespace (through the field index), narrowed by the pool's selector.
func (r *RegionPoolReconciler) selectPTs(ctx context.Context, pool *capacityv1alpha1.RegionPool, sel labels.Selector) ([]capacityv1alpha1.ProvisionedThroughput, error) {
	var list capacityv1alpha1.ProvisionedThroughputList
	if err := r.Client.List(ctx, &list, client.InNamespace(pool.Namespace),
		client.MatchingFields{indexPTByModel: modelKey(pool.Spec.Project, pool.GetPublisher(), pool.Spec.Model)},
		client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// poolSelector is the pool's PT selector; an empty or absent one selects
// everything (of the pool's model).
func poolSelector(pool *capacityv1alpha1.RegionPool) (labels.Selector, error) {
	if pool.Spec.ProvisionedThroughputSelector == nil {
		return labels.Everything(), nil
	}
	sel, err := metav1.LabelSelectorAsSelector(pool.Spec.ProvisionedThroughputSelector)
	if err != nil {
		return nil, fmt.Errorf("spec.provisionedThroughputSelector: %w", err)
	}
	return sel, nil
}

// configMapMeta is an empty metadata-only ConfigMap: the controller caches
// ConfigMaps as metadata, never their data.
func configMapMeta() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	return m
}

// writeConfigMap writes the table to the pool's ConfigMap, and reports
// foreign, writing nothing, when a ConfigMap of that name exists that the
// pool does not control.
//
// The ConfigMap is read from the API server, not the manager's cache, which
// may not have seen one created a moment ago; and since another can still
// be created between that read and the write, the write itself must fail
// rather than take such a ConfigMap over: an absent ConfigMap is created (the
// API server refuses if one exists by then), and an existing one is applied
// to with the resourceVersion read as a precondition (the API server refuses
// if it changed, or was deleted and created again, since). Either refusal is
// retried, and the next read sees the ConfigMap as it is. A ConfigMap that
// already holds the table is not written at all.
func (r *RegionPoolReconciler) writeConfigMap(ctx context.Context, pool *capacityv1alpha1.RegionPool, name string, data []byte, hash string) (foreign bool, err error) {
	want := routingConfigMap(pool, name, data, hash)
	seen := &corev1.ConfigMap{}
	if err := r.reader().Get(ctx, client.ObjectKeyFromObject(want), seen); err != nil {
		if !apierrors.IsNotFound(err) {
			return false, err
		}
		err := r.Client.Create(ctx, want, client.FieldOwner(RegionPoolFieldOwner))
		if apierrors.IsAlreadyExists(err) {
			return false, fmt.Errorf("a ConfigMap %s appeared before this pool created it; it is checked again: %w", name, err)
		}
		return false, err
	}
	switch {
	case !controlledBy(seen, pool):
		return true, nil
	case holds(seen, want):
		return false, nil
	}
	return false, r.applyConfigMap(ctx, want, seen.ResourceVersion)
}

// holds reports whether the ConfigMap seen already has every field want
// sets; fields others added are theirs, as server-side apply leaves them.
func holds(seen, want *corev1.ConfigMap) bool {
	for k, v := range want.Labels {
		if seen.Labels[k] != v {
			return false
		}
	}
	for k, v := range want.Annotations {
		if seen.Annotations[k] != v {
			return false
		}
	}
	for k, v := range want.Data {
		if d, ok := seen.Data[k]; !ok || d != v {
			return false
		}
	}
	return true
}

// controlledBy reports whether obj's controller reference is pool (by UID,
// so a pool deleted and created again with the same name is another owner).
func controlledBy(obj metav1.Object, pool *capacityv1alpha1.RegionPool) bool {
	ref := metav1.GetControllerOf(obj)
	return ref != nil && ref.UID == pool.UID
}

// routingConfigMap is the pool's ConfigMap holding the table: labeled for
// routers, annotated with the table's hash and controlled by the pool, so
// the garbage collector deletes it with the pool. The reference does not
// block the owner's deletion, which would need update rights on
// regionpools/finalizers where OwnerReferencesPermissionEnforcement is on.
func routingConfigMap(pool *capacityv1alpha1.RegionPool, name string, data []byte, hash string) *corev1.ConfigMap {
	gvk := capacityv1alpha1.GroupVersion.WithKind("RegionPool")
	owner := metav1.NewControllerRef(pool, gvk)
	owner.BlockOwnerDeletion = nil
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       pool.Namespace,
			Name:            name,
			Labels:          map[string]string{table.LabelRoutingTable: "true"},
			Annotations:     map[string]string{table.AnnotationHash: hash},
			OwnerReferences: []metav1.OwnerReference{*owner},
		},
		Data: map[string]string{table.DataKey: string(data)},
	}
}

// applyConfigMap writes cm over the pool's own ConfigMap, last read at
// resourceVersion, with server-side apply. Forced ownership takes the fields
// back from whoever edited them by hand. The resourceVersion is a
// precondition: the API server refuses the apply if the ConfigMap is no
// longer the one this pool was seen to control.
func (r *RegionPoolReconciler) applyConfigMap(ctx context.Context, cm *corev1.ConfigMap, resourceVersion string) error {
	cm = cm.DeepCopy()
	cm.ResourceVersion = resourceVersion
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cm)
	if err != nil {
		return err
	}
	ac := client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: u})
	return r.Client.Apply(ctx, ac, client.FieldOwner(RegionPoolFieldOwner), client.ForceOwnership)
}

// deleteRenamedConfigMap deletes the ConfigMap the pool wrote under its
// previous spec.output.configMapName, once the table is under the new name:
// routers reading the old name would otherwise follow a table that no longer
// changes. Only a ConfigMap this pool controls is deleted.
func (r *RegionPoolReconciler) deleteRenamedConfigMap(ctx context.Context, pool *capacityv1alpha1.RegionPool, name string) error {
	old := pool.Status.ConfigMapName
	if old == "" || old == name {
		return nil
	}
	if err := r.deleteOwnConfigMap(ctx, pool, old); err != nil {
		return fmt.Errorf("deleting the previous ConfigMap %s: %w", old, err)
	}
	return nil
}

// deleteOwnConfigMap deletes ConfigMap name if this pool controls it.
func (r *RegionPoolReconciler) deleteOwnConfigMap(ctx context.Context, pool *capacityv1alpha1.RegionPool, name string) error {
	cm := configMapMeta()
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: pool.Namespace, Name: name}, cm); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !controlledBy(cm, pool) {
		return nil
	}
	return client.IgnoreNotFound(r.Client.Delete(ctx, cm, client.Preconditions{UID: &cm.UID}))
}
