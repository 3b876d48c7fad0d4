package controllers

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capacityv1alpha1 "github.com/regionwarden/regionwarden/api/v1alpha1"
)

// TestPTSourceUnavailable checks static stability: when GCP cannot be asked,
// Verified turns Unknown with the error code, Ready keeps what GCP last said,
// what GCP last said stays in the status, and the object is Stalled (a person
// must fix permissions) or Reconciling (it will retry).
func TestPTSourceUnavailable(t *testing.T) {
	const interval = time.Minute
	for _, tc := range []struct {
		code      codes.Code
		wantKStat string
	}{
		{codes.PermissionDenied, capacityv1alpha1.ConditionStalled},
		{codes.Unavailable, capacityv1alpha1.ConditionReconciling},
		{codes.DeadlineExceeded, capacityv1alpha1.ConditionReconciling},
	} {
		t.Run(tc.code.String(), func(t *testing.T) {
			e := newPTEnv(t, ptEnvOptions{})
			e.gcpShows(4, 3000, nil)
			e.create("pt", 4, withInterval(interval))
			before := e.waitReconciled("pt")
			expectCond(t, before, capacityv1alpha1.ConditionVerified, metav1.ConditionTrue, capacityv1alpha1.ReasonObserved)

			e.fake.SetError(testProject, status.Error(tc.code, "injected"))
			e.clk.Step(interval)
			res := e.reconcile("pt")
			pt := e.get("pt")

			v := expectCond(t, pt, capacityv1alpha1.ConditionVerified, metav1.ConditionUnknown, capacityv1alpha1.ReasonSourceUnavailable)
			if !strings.Contains(v.Message, tc.code.String()) {
				t.Errorf("Verified message %q lacks the code %s", v.Message, tc.code)
			}
			expectCond(t, pt, capacityv1alpha1.ConditionReady, metav1.ConditionTrue, capacityv1alpha1.ReasonActive)
			expectCond(t, pt, tc.wantKStat, metav1.ConditionTrue, capacityv1alpha1.ReasonSourceUnavailable)
			if pt.Status.Observed == nil || pt.Status.Observed.GSUs != 4 {
				t.Errorf("observed = %+v, want the last answer (4 GSUs)", pt.Status.Observed)
			}
			if !pt.Status.LastVerifiedTime.Equal(before.Status.LastVerifiedTime) {
				t.Errorf("lastVerifiedTime moved to %v without an answer", pt.Status.LastVerifiedTime)
			}
			if res.RequeueAfter <= 0 || res.RequeueAfter > SourceRetryInterval+time.Duration(VerificationJitter*float64(SourceRetryInterval)) {
				t.Errorf("requeue after %v, want a retry within %v", res.RequeueAfter, SourceRetryInterval)
			}
			labels := map[string]string{"namespace": e.ns, "name": "pt", "code": tc.code.String()}
			if n, _ := metricValue(t, "regionwarden_provisionedthroughput_verification_errors_total", labels); n != 1 {
				t.Errorf("verification_errors_total{code=%s} = %v, want 1", tc.code, n)
			}
			if gsus, _ := metricValue(t, "regionwarden_provisionedthroughput_observed_gsus", map[string]string{"namespace": e.ns, "name": "pt"}); gsus != 4 {
				t.Errorf("observed_gsus = %v during the outage, want the last answer 4", gsus)
			}

			// GCP answers again: verified, no kstatus conditions, and no second
			// "verified" event, since GCP's answer did not change.
			e.fake.SetError(testProject, nil)
			e.clk.Step(interval)
			e.reconcile("pt")
			pt = e.get("pt")
			expectCond(t, pt, capacityv1alpha1.ConditionVerified, metav1.ConditionTrue, capacityv1alpha1.ReasonObserved)
			if s := conditionStatus(pt, tc.wantKStat); s != metav1.ConditionUnknown {
				t.Errorf("%s still present after GCP answered: %+v", tc.wantKStat, pt.Status.Conditions)
			}
			if n := e.rec.count("pt", eventNormal, capacityv1alpha1.ReasonObserved); n != 1 {
				t.Errorf("Observed events = %d, want 1: %+v", n, e.rec.all("pt"))
			}
		})
	}
}

// TestPTOutageNeverCountsTowardGrace checks that under Enforce, time without
// answers from GCP does not count toward the grace period: Ready stays True
// through an outage longer than the grace period.
func TestPTOutageNeverCountsTowardGrace(t *testing.T) {
	const (
		interval = time.Minute
		grace    = 10 * time.Minute
	)
	e := newPTEnv(t, ptEnvOptions{})
	e.create("pt", 4, withPolicy(capacityv1alpha1.VerificationEnforce), withInterval(interval), withGrace(grace))
	e.waitReconciled("pt") // NotFound at t0

	e.fake.SetError(testProject, status.Error(codes.Unavailable, "injected"))
	for range 3 * grace / interval {
		e.clk.Step(interval)
		e.reconcile("pt")
	}
	pt := e.get("pt")
	expectCond(t, pt, capacityv1alpha1.ConditionVerified, metav1.ConditionUnknown, capacityv1alpha1.ReasonSourceUnavailable)
	expectCond(t, pt, capacityv1alpha1.ConditionReady, metav1.ConditionTrue, capacityv1alpha1.ReasonActive)
}

// TestPTNeverVerified checks that an object GCP could never be asked about,
// and one in a manager that runs without GCP, is routed by its declaration.
func TestPTNeverVerified(t *testing.T) {
	t.Run("PermissionDenied from the start", func(t *testing.T) {
		e := newPTEnv(t, ptEnvOptions{})
		e.fake.SetError(testProject, status.Error(codes.PermissionDenied, "injected"))
		e.create("pt", 4, withPolicy(capacityv1alpha1.VerificationEnforce))
		pt := e.waitReconciled("pt")
		expectCond(t, pt, capacityv1alpha1.ConditionVerified, metav1.ConditionUnknown, capacityv1alpha1.ReasonSourceUnavailable)
		expectCond(t, pt, capacityv1alpha1.ConditionReady, metav1.ConditionTrue, capacityv1alpha1.ReasonActive)
		expectCond(t, pt, capacityv1alpha1.ConditionStalled, metav1.ConditionTrue, capacityv1alpha1.ReasonSourceUnavailable)
		// Stalled on this generation, observed: kstatus reads Failed, not
		// a wait for progress that cannot come without a person.
		if pt.Status.ObservedGeneration != pt.Generation {
			t.Errorf("observedGeneration = %d while stalled, want the generation %d", pt.Status.ObservedGeneration, pt.Generation)
		}
	})
	t.Run("no GCP", func(t *testing.T) {
		// --gcp-verify=false is a choice, not a failure: Verified says
		// Skipped, the object is fully reconciled (so a Flux wait succeeds),
		// and no verification error is counted, however often it requeues.
		e := newPTEnv(t, ptEnvOptions{noSource: true})
		e.create("pt", 4)
		e.waitReconciled("pt")
		for range 3 {
			e.clk.Step(time.Hour)
			e.reconcile("pt")
		}
		pt := e.get("pt")
		v := expectCond(t, pt, capacityv1alpha1.ConditionVerified, metav1.ConditionUnknown, capacityv1alpha1.ReasonSkipped)
		if !strings.Contains(v.Message, "--gcp-verify") {
			t.Errorf("Verified message %q does not say why GCP is not asked", v.Message)
		}
		expectCond(t, pt, capacityv1alpha1.ConditionReady, metav1.ConditionTrue, capacityv1alpha1.ReasonActive)
		for _, c := range []string{capacityv1alpha1.ConditionStalled, capacityv1alpha1.ConditionReconciling} {
			if got := meta.FindStatusCondition(pt.Status.Conditions, c); got != nil && got.Status == metav1.ConditionTrue {
				t.Errorf("%s=True (%s: %s) without GCP, want the object fully reconciled", c, got.Reason, got.Message)
			}
		}
		if pt.Status.ObservedGeneration != pt.Generation {
			t.Errorf("observedGeneration = %d, want %d", pt.Status.ObservedGeneration, pt.Generation)
		}
		if n, found := metricValue(t, "regionwarden_provisionedthroughput_verification_errors_total",
			map[string]string{"namespace": e.ns, "name": "pt"}); found {
			t.Errorf("verification_errors_total = %v without GCP, want no series", n)
		}
	})
}
