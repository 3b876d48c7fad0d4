package controllers

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	capacityv1alpha1 "github.com/regionwarden/regionwarden/api/v1alpha1"
)

// TestSetConditionChanged checks what counts as a change worth an event: a
// new condition, status, reason or message; never a new generation alone.
func TestSetConditionChanged(t *testing.T) {
	type set struct {
		generation      int64
		status          metav1.ConditionStatus
		reason, message string
	}
	first := set{1, metav1.ConditionFalse, "Mismatch", "4 declared, 2 shown"}
	for _, tc := range []struct {
		name           string
		then           set
		wantChanged    bool
		wantTransition bool
	}{
		{"same again", first, false, false},
		{"new generation only", set{2, metav1.ConditionFalse, "Mismatch", "4 declared, 2 shown"}, false, false},
		{"new message", set{1, metav1.ConditionFalse, "Mismatch", "4 declared, 3 shown"}, true, false},
		{"new reason", set{1, metav1.ConditionFalse, "NotFound", "none shown"}, true, false},
		{"new status", set{1, metav1.ConditionTrue, "Observed", "4 shown"}, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pt := &capacityv1alpha1.ProvisionedThroughput{}
			pt.Generation = first.generation
			if !setCondition(pt, "Verified", first.status, first.reason, first.message) {
				t.Fatal("a new condition is not reported as changed")
			}
			before := cond(t, pt, "Verified")
			before.LastTransitionTime = metav1.NewTime(before.LastTransitionTime.Add(-60e9))
			pt.Status.Conditions[0].LastTransitionTime = before.LastTransitionTime

			pt.Generation = tc.then.generation
			if got := setCondition(pt, "Verified", tc.then.status, tc.then.reason, tc.then.message); got != tc.wantChanged {
				t.Errorf("changed = %v, want %v", got, tc.wantChanged)
			}
			after := cond(t, pt, "Verified") // also checks observedGeneration
			if moved := !after.LastTransitionTime.Equal(&before.LastTransitionTime); moved != tc.wantTransition {
				t.Errorf("lastTransitionTime moved = %v, want %v", moved, tc.wantTransition)
			}
		})
	}
}

// TestKStatusConditions checks that Reconciling and Stalled are never both
// present and that a reconciled object has neither.
func TestKStatusConditions(t *testing.T) {
	pt := &capacityv1alpha1.ProvisionedThroughput{}
	present := func() (reconciling, stalled bool) {
		return conditionStatus(pt, capacityv1alpha1.ConditionReconciling) == metav1.ConditionTrue,
			conditionStatus(pt, capacityv1alpha1.ConditionStalled) == metav1.ConditionTrue
	}
	markReconciling(pt, "Progressing", "working")
	if r, s := present(); !r || s {
		t.Errorf("after markReconciling: reconciling %v, stalled %v", r, s)
	}
	markStalled(pt, "SourceUnavailable", "denied")
	if r, s := present(); r || !s {
		t.Errorf("after markStalled: reconciling %v, stalled %v", r, s)
	}
	markReconciling(pt, "Progressing", "working")
	if r, s := present(); !r || s {
		t.Errorf("after markReconciling again: reconciling %v, stalled %v", r, s)
	}
	markReconciled(pt)
	if len(pt.Status.Conditions) != 0 {
		t.Errorf("after markReconciled: %+v", pt.Status.Conditions)
	}
}

// TestSetConditionWithEvent checks that an event follows a change only, with
// the condition's reason.
func TestSetConditionWithEvent(t *testing.T) {
	rec := events.NewFakeRecorder(10)
	pt := &capacityv1alpha1.ProvisionedThroughput{}
	for range 3 {
		setConditionWithEvent(rec, pt, eventWarning, ActionVerify, "Verified", metav1.ConditionFalse, "Mismatch", "4 declared, 2 shown")
	}
	setConditionWithEvent(rec, pt, eventWarning, ActionVerify, "Verified", metav1.ConditionFalse, "NotFound", "none shown")
	close(rec.Events)
	var got []string
	for ev := range rec.Events {
		got = append(got, ev)
	}
	want := []string{"Warning Mismatch 4 declared, 2 shown", "Warning NotFound none shown"}
	if len(got) != len(want) {
		t.Fatalf("events = %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d = %q, want %q", i, got[i], want[i])
		}
	}
	// A nil recorder records nothing and does not fail.
	setConditionWithEvent(nil, pt, eventWarning, ActionVerify, "Verified", metav1.ConditionTrue, "Observed", "4 shown")
}

// conditionStatus is the status of obj's condition of type t, Unknown when
// the object has none.
func conditionStatus(obj conditionObject, t string) metav1.ConditionStatus {
	if c := meta.FindStatusCondition(obj.GetConditions(), t); c != nil {
		return c.Status
	}
	return metav1.ConditionUnknown
}
