package controllers

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capacityv1alpha1 "github.com/regionwarden/regionwarden/api/v1alpha1"
)

// conditionObject is an API object whose status carries metav1.Conditions
// and status.observedGeneration.
type conditionObject interface {
	client.Object
	GetConditions() []metav1.Condition
	SetConditions([]metav1.Condition)
	SetObservedGeneration(int64)
}

// setCondition sets the condition of type t on obj, stamped with the object's
// generation; meta.SetStatusCondition keeps lastTransitionTime, which moves
// only when the status does. It reports whether the condition is new or its
// status, reason or message changed: a new observedGeneration alone is not a
// change anyone needs to hear about, so callers emit events on this result.
func setCondition(obj conditionObject, t string, status metav1.ConditionStatus, reason, message string) (changed bool) {
	conds := obj.GetConditions()
	if old := meta.FindStatusCondition(conds, t); old == nil || old.Status != status || old.Reason != reason || old.Message != message {
		changed = true
	}
	meta.SetStatusCondition(&conds, metav1.Condition{
		Type:               t,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: obj.GetGeneration(),
	})
	obj.SetConditions(conds)
	return changed
}

// removeCondition drops the condition of type t from obj, if it is there.
func removeCondition(obj conditionObject, t string) {
	conds := obj.GetConditions()
	if meta.RemoveStatusCondition(&conds, t) {
		obj.SetConditions(conds)
	}
}

// conditionReason is the reason of obj's condition of type t, empty when the
// object has none.
func conditionReason(obj conditionObject, t string) string {
	if c := meta.FindStatusCondition(obj.GetConditions(), t); c != nil {
		return c.Reason
	}
	return ""
}

// The kstatus conditions (sigs.k8s.io/cli-utils/pkg/kstatus) are
// "abnormal-true": present and True only while the object is not yet current
// (Reconciling) or cannot become current without a person (Stalled), and
// absent otherwise. At most one of the two is present at a time.
//
// status.observedGeneration moves when the controller reaches a conclusion
// about the generation: reconciled, or stalled on it. kstatus (Flux) reads
// the generation first and takes an object whose observedGeneration lags
// for one in progress, whatever its conditions: a stalled object that did
// not move it would wait out Flux's timeout instead of failing fast.

// markReconciling says the controller is working toward the spec.
func markReconciling(obj conditionObject, reason, message string) {
	removeCondition(obj, capacityv1alpha1.ConditionStalled)
	setCondition(obj, capacityv1alpha1.ConditionReconciling, metav1.ConditionTrue, reason, message)
}

// markStalled says the controller cannot progress on this generation until
// someone changes something: a bad spec or a resource owned by another.
func markStalled(obj conditionObject, reason, message string) {
	removeCondition(obj, capacityv1alpha1.ConditionReconciling)
	setCondition(obj, capacityv1alpha1.ConditionStalled, metav1.ConditionTrue, reason, message)
	obj.SetObservedGeneration(obj.GetGeneration())
}

// markReconciled says the object is current: neither Reconciling nor
// Stalled, this generation reconciled in full.
func markReconciled(obj conditionObject) {
	removeCondition(obj, capacityv1alpha1.ConditionReconciling)
	removeCondition(obj, capacityv1alpha1.ConditionStalled)
	obj.SetObservedGeneration(obj.GetGeneration())
}
