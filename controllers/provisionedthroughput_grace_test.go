package controllers

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capacityv1alpha1 "github.com/regionwarden/regionwarden/api/v1alpha1"
)

// TestPTNotFoundGracePeriod checks that NotFound turns Ready False under
// Enforce only once GCP has answered NotFound for longer than the grace
// period, never under Warn, and that GCP showing the PT again ends it.
func TestPTNotFoundGracePeriod(t *testing.T) {
	const (
		interval = time.Minute
		grace    = 10 * time.Minute
	)
	for _, tc := range []struct {
		policy capacityv1alpha1.VerificationPolicy
		// wantReadyAfterGrace is Ready once NotFound outlasted the grace period.
		wantReadyAfterGrace metav1.ConditionStatus
	}{
		{capacityv1alpha1.VerificationWarn, metav1.ConditionTrue},
		{capacityv1alpha1.VerificationEnforce, metav1.ConditionFalse},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			e := newPTEnv(t, ptEnvOptions{})
			e.create("pt", 4, withPolicy(tc.policy), withInterval(interval), withGrace(grace))
			pt := e.waitReconciled("pt")
			expectCond(t, pt, capacityv1alpha1.ConditionVerified, metav1.ConditionFalse, capacityv1alpha1.ReasonNotFound)
			expectCond(t, pt, capacityv1alpha1.ConditionReady, metav1.ConditionTrue, capacityv1alpha1.ReasonActive)

			// Verify every interval up to the end of the grace period: still Ready.
			for elapsed := interval; elapsed <= grace; elapsed += interval {
				e.clk.Step(interval)
				e.reconcile("pt")
				pt = e.get("pt")
				expectCond(t, pt, capacityv1alpha1.ConditionReady, metav1.ConditionTrue, capacityv1alpha1.ReasonActive)
			}
			if !pt.Status.NotFoundSince.Time.Equal(ptT0) {
				t.Errorf("notFoundSince = %v, want the first NotFound at %v", pt.Status.NotFoundSince, ptT0)
			}

			// One more NotFound answer, past the grace period.
			e.clk.Step(interval)
			e.reconcile("pt")
			pt = e.get("pt")
			ready := cond(t, pt, capacityv1alpha1.ConditionReady)
			if ready.Status != tc.wantReadyAfterGrace {
				t.Fatalf("Ready after the grace period = %s/%s (%s), want %s", ready.Status, ready.Reason, ready.Message, tc.wantReadyAfterGrace)
			}
			wantNotFoundEvents := 1 // Verified turned NotFound
			if tc.wantReadyAfterGrace == metav1.ConditionFalse {
				expectCond(t, pt, capacityv1alpha1.ConditionReady, metav1.ConditionFalse, capacityv1alpha1.ReasonNotFound)
				wantNotFoundEvents = 2 // and Ready turned NotFound
			}
			if n := e.rec.count("pt", eventWarning, capacityv1alpha1.ReasonNotFound); n != wantNotFoundEvents {
				t.Errorf("NotFound events = %d, want %d: %+v", n, wantNotFoundEvents, e.rec.all("pt"))
			}

			// GCP shows the PT again: Ready at once, the NotFound clock reset.
			e.gcpShows(4, 3000, nil)
			e.clk.Step(interval)
			e.reconcile("pt")
			pt = e.get("pt")
			expectCond(t, pt, capacityv1alpha1.ConditionVerified, metav1.ConditionTrue, capacityv1alpha1.ReasonObserved)
			expectCond(t, pt, capacityv1alpha1.ConditionReady, metav1.ConditionTrue, capacityv1alpha1.ReasonActive)
			if pt.Status.NotFoundSince != nil {
				t.Errorf("notFoundSince = %v after GCP showed the PT", pt.Status.NotFoundSince)
			}
		})
	}
}

// TestPTOutageDoesNotCountTowardGrace checks that time in which GCP could not
// be asked never counts toward the Enforce grace period: a PT that GCP
// answered NotFound for a while, then could not be asked for longer than the
// whole grace period, stays Ready when GCP answers NotFound again, for the
// rest of the grace period counted in GCP's answers, and only then turns
// Ready False.
func TestPTOutageDoesNotCountTowardGrace(t *testing.T) {
	const (
		interval = time.Minute
		grace    = 10 * time.Minute
		outage   = 2 * time.Hour
		before   = 3 * time.Minute // NotFound answered before the outage
	)
	e := newPTEnv(t, ptEnvOptions{})
	e.create("pt", 4, withPolicy(capacityv1alpha1.VerificationEnforce), withInterval(interval), withGrace(grace))
	e.waitReconciled("pt")
	step := func() *capacityv1alpha1.ProvisionedThroughput {
		e.clk.Step(interval)
		e.reconcile("pt")
		return e.get("pt")
	}
	for elapsed := interval; elapsed <= before; elapsed += interval {
		step()
	}

	e.fake.SetError(testProject, status.Error(codes.Unavailable, "Monitoring is down"))
	for elapsed := interval; elapsed <= outage; elapsed += 10 * interval {
		e.clk.Step(10 * interval)
		e.reconcile("pt")
	}
	pt := e.get("pt")
	expectCond(t, pt, capacityv1alpha1.ConditionVerified, metav1.ConditionUnknown, capacityv1alpha1.ReasonSourceUnavailable)
	expectCond(t, pt, capacityv1alpha1.ConditionReady, metav1.ConditionTrue, capacityv1alpha1.ReasonActive)

	// GCP answers again, still NotFound: the grace period has not run out,
	// whatever the outage's length, and runs on in GCP's answers.
	e.fake.SetError(testProject, nil)
	left := grace - before
	for elapsed := time.Duration(0); elapsed <= left; elapsed += interval {
		pt = step()
		ready := cond(t, pt, capacityv1alpha1.ConditionReady)
		if ready.Status != metav1.ConditionTrue {
			t.Fatalf("%s of NotFound answers after the outage (%s before it, grace %s): Ready = %s/%s (%s)",
				elapsed, before, grace, ready.Status, ready.Reason, ready.Message)
		}
	}
	pt = step()
	expectCond(t, pt, capacityv1alpha1.ConditionReady, metav1.ConditionFalse, capacityv1alpha1.ReasonNotFound)
}
