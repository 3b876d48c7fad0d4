package controllers

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capacityv1alpha1 "github.com/regionwarden/regionwarden/api/v1alpha1"
)

// TestPTTermEnds walks a PT through its term: Expiring turns True 14 days
// before the end with one Warning, the reconciler asks to come back exactly at
// the end, and Ready turns False/Expired there with one Warning.
func TestPTTermEnds(t *testing.T) {
	end := ptT0.Add(capacityv1alpha1.ExpiringWindow + 2*time.Hour)
	e := newPTEnv(t, ptEnvOptions{})
	e.gcpShows(4, 3000, nil)
	e.create("pt", 4, withTermEnd(end))
	pt := e.waitReconciled("pt")
	expectCond(t, pt, capacityv1alpha1.ConditionExpiring, metav1.ConditionFalse, capacityv1alpha1.ReasonActive)
	expectCond(t, pt, capacityv1alpha1.ConditionReady, metav1.ConditionTrue, capacityv1alpha1.ReasonActive)
	if pt.Status.ExpiresAt == nil || !pt.Status.ExpiresAt.Time.Equal(end) {
		t.Errorf("expiresAt = %v, want %v", pt.Status.ExpiresAt, end)
	}

	// Two hours before the Expiring window opens the interval is shorter than
	// the wait; one minute before, the requeue lands on the window's start.
	e.clk.Step(2*time.Hour - time.Minute)
	if res := e.reconcile("pt"); res.RequeueAfter != time.Minute {
		t.Errorf("requeue after %v one minute before the Expiring window, want exactly 1m", res.RequeueAfter)
	}
	e.clk.Step(time.Minute)
	for range 3 { // the same state, reconciled again, says nothing new
		e.reconcile("pt")
	}
	pt = e.get("pt")
	expectCond(t, pt, capacityv1alpha1.ConditionExpiring, metav1.ConditionTrue, capacityv1alpha1.ReasonExpiring)
	expectCond(t, pt, capacityv1alpha1.ConditionReady, metav1.ConditionTrue, capacityv1alpha1.ReasonActive)
	if n := e.rec.await(t, "pt", eventWarning, capacityv1alpha1.ReasonExpiring, 1); n != 1 {
		t.Errorf("Expiring events = %d, want 1: %+v", n, e.rec.all("pt"))
	}

	// Three minutes before the end, the requeue is the end itself, not the
	// next interval.
	e.clk.Step(capacityv1alpha1.ExpiringWindow - 3*time.Minute)
	if res := e.reconcile("pt"); res.RequeueAfter != 3*time.Minute {
		t.Errorf("requeue after %v three minutes before the end, want exactly 3m", res.RequeueAfter)
	}
	expectCond(t, e.get("pt"), capacityv1alpha1.ConditionReady, metav1.ConditionTrue, capacityv1alpha1.ReasonActive)

	e.clk.Step(3 * time.Minute)
	for range 3 {
		e.reconcile("pt")
	}
	pt = e.get("pt")
	expectCond(t, pt, capacityv1alpha1.ConditionReady, metav1.ConditionFalse, capacityv1alpha1.ReasonExpired)
	expectCond(t, pt, capacityv1alpha1.ConditionExpiring, metav1.ConditionFalse, capacityv1alpha1.ReasonExpired)
	// GCP still shows the PT (it may lag the term): verification goes on, but
	// the declaration's end decides routing.
	expectCond(t, pt, capacityv1alpha1.ConditionVerified, metav1.ConditionTrue, capacityv1alpha1.ReasonObserved)
	if n := e.rec.await(t, "pt", eventWarning, capacityv1alpha1.ReasonExpired, 1); n != 1 {
		t.Errorf("Expired events = %d, want 1: %+v", n, e.rec.all("pt"))
	}
	if n := e.rec.await(t, "pt", eventWarning, capacityv1alpha1.ReasonExpiring, 1); n != 1 {
		t.Errorf("Expiring events = %d after the end, want still 1", n)
	}
	// Only a person can route the location as provisioned again: the object
	// is Stalled, and the Warning says what to do.
	stalled := expectCond(t, pt, capacityv1alpha1.ConditionStalled, metav1.ConditionTrue, capacityv1alpha1.ReasonExpired)
	for _, e := range e.rec.all("pt") {
		if e.Reason == capacityv1alpha1.ReasonExpired && (!strings.Contains(e.Message, "move spec.term.end") || e.Message != stalled.Message) {
			t.Errorf("Expired event %q does not say what to do, or differs from Stalled's message %q", e.Message, stalled.Message)
		}
	}
}
