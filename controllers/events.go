package controllers

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
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

// eventBuffer holds the events of one reconcile until its status is written.
// An event announces a change of status; recorded before the write, it would
// be recorded again by the reconcile that makes the same change after one
// that died before its write (the operator killed or restarted, a conflict),
// since the status it reads back does not have the change yet. Recorded after
// the write, each change is announced once: a reconcile whose write fails
// records nothing, and the one that writes the change records it.
type eventBuffer struct {
	events []bufferedEvent
}

type bufferedEvent struct {
	regarding, related                 runtime.Object
	eventtype, reason, action, message string
}

// Eventf keeps the event; the message is formatted now, from the values the
// reconcile has at this point.
func (b *eventBuffer) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	b.events = append(b.events, bufferedEvent{regarding, related, eventtype, reason, action, fmt.Sprintf(note, args...)})
}

// flush records the kept events on rec, in order; a nil rec records none.
func (b *eventBuffer) flush(rec events.EventRecorder) {
	if rec == nil {
		return
	}
	for _, e := range b.events {
		rec.Eventf(e.regarding, e.related, e.eventtype, e.reason, e.action, "%s", e.message)
	}
	b.events = nil
}
