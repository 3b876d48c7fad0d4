package controllers

import (
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	capacityv1alpha1 "github.com/regionwarden/regionwarden/api/v1alpha1"
)

// ProvisionedThroughputControllerName names the controller in logs, metrics
// and as the reporting controller of its events.
const ProvisionedThroughputControllerName = "provisionedthroughput"

// SetupWithManager registers the reconciler with mgr. Only spec and
// annotation changes start a reconcile: the controller's own status writes
// do not, and time-driven work comes from requeues. Annotating an object
// (for example with a timestamp) asks for a verification now.
func (r *ProvisionedThroughputReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(ProvisionedThroughputControllerName).
		For(&capacityv1alpha1.ProvisionedThroughput{}, builder.WithPredicates(
			predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		WithOptions(opts).
		Complete(traced("ProvisionedThroughput", r))
}
