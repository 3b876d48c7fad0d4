package controllers

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
)

// Event actions: what the controller was doing when it recorded an event.
const (
	// ActionVerify is checking a declaration against GCP.
	ActionVerify = "Verify"
	// ActionRender is rendering and writing a routing table.
	ActionRender = "Render"
	// ActionReconcile is anything else a reconcile does.
	ActionReconcile = "Reconcile"
)

// recordEvent records one events.k8s.io/v1 Event about obj. A Warning event
// reports a condition and carries the same reason as that condition, so
// `kubectl get events` and the object's status name a problem alike. The
// message is taken as is, never as a format. A nil recorder records nothing.
func recordEvent(rec events.EventRecorder, obj conditionObject, eventtype, reason, action, message string) {
	if rec == nil {
		return
	}
	rec.Eventf(obj, nil, eventtype, reason, action, "%s", message)
}

// setConditionWithEvent sets the condition of type t like setCondition and,
// only when it changed (status, reason or message), records an event of
// eventtype with the condition's reason and message. An unchanged condition
// records nothing, so reconciling the same state again and again never
// repeats an event. It reports whether the condition changed.
func setConditionWithEvent(rec events.EventRecorder, obj conditionObject, eventtype, action, t string, status metav1.ConditionStatus, reason, message string) bool {
	changed := setCondition(obj, t, status, reason, message)
	if changed {
		recordEvent(rec, obj, eventtype, reason, action, message)
	}
	return changed
}

// Event types, re-exported so that callers need not import core/v1 for them.
const (
	eventNormal  = corev1.EventTypeNormal
	eventWarning = corev1.EventTypeWarning
)
