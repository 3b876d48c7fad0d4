package controllers

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capacityv1alpha1 "github.com/regionwarden/regionwarden/api/v1alpha1"
	"github.com/regionwarden/regionwarden/internal/gcp"
)

// TestPTVerification checks what GCP's answer does to a declaration of 4 GSUs
// under the Warn policy: Verified follows GCP, Ready stays True.
func TestPTVerification(t *testing.T) {
	for _, tc := range []struct {
		name string
		// gcpGSUs is what GCP shows; zero means no PT there.
		gcpGSUs      int64
		wantVerified metav1.ConditionStatus
		wantReason   string
		// wantInMessage are substrings of the Verified message.
		wantInMessage []string
		wantEvent     string
		wantEventType string
	}{
		{"declared equals observed", 4, metav1.ConditionTrue, capacityv1alpha1.ReasonObserved, []string{"4 GSUs"}, capacityv1alpha1.ReasonObserved, eventNormal},
		{"mismatch", 2, metav1.ConditionFalse, capacityv1alpha1.ReasonMismatch, []string{"4 GSUs are declared", "shows 2 GSUs", "set spec.gsus"}, capacityv1alpha1.ReasonMismatch, eventWarning},
		{"not found", 0, metav1.ConditionFalse, capacityv1alpha1.ReasonNotFound, []string{"no Provisioned Throughput", "4 GSUs are declared", "Warn policy keeps routing it", "check the order"}, capacityv1alpha1.ReasonNotFound, eventWarning},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newPTEnv(t, ptEnvOptions{})
			if tc.gcpGSUs > 0 {
				e.gcpShows(tc.gcpGSUs, 3000, map[string]float64{gcp.RequestTypeDedicated: 1500, gcp.RequestTypeSpillover: 500})
			}
			e.create("pt", 4)
			pt := e.waitReconciled("pt")

			v := expectCond(t, pt, capacityv1alpha1.ConditionVerified, tc.wantVerified, tc.wantReason)
			for _, s := range tc.wantInMessage {
				if !strings.Contains(v.Message, s) {
					t.Errorf("Verified message %q lacks %q", v.Message, s)
				}
			}
			expectCond(t, pt, capacityv1alpha1.ConditionReady, metav1.ConditionTrue, capacityv1alpha1.ReasonActive)
			if pt.Status.LastVerifiedTime == nil || !pt.Status.LastVerifiedTime.Time.Equal(ptT0) {
				t.Errorf("lastVerifiedTime = %v, want %v", pt.Status.LastVerifiedTime, ptT0)
			}
			if pt.Status.ObservedGeneration != pt.Generation {
				t.Errorf("observedGeneration = %d, want %d", pt.Status.ObservedGeneration, pt.Generation)
			}
			for _, c := range []string{capacityv1alpha1.ConditionReconciling, capacityv1alpha1.ConditionStalled} {
				if conditionStatus(pt, c) != metav1.ConditionUnknown {
					t.Errorf("a verified object has %s: %+v", c, pt.Status.Conditions)
				}
			}
			labels := map[string]string{"namespace": e.ns, "name": "pt", "location": testLocation, "model": testModel}
			gsus, ok := metricValue(t, "regionwarden_provisionedthroughput_observed_gsus", labels)
			if !ok || gsus != float64(tc.gcpGSUs) {
				t.Errorf("observed_gsus = %v (present %v), want %d", gsus, ok, tc.gcpGSUs)
			}

			if tc.gcpGSUs == 0 {
				if pt.Status.Observed != nil {
					t.Errorf("observed = %+v, want none", pt.Status.Observed)
				}
				if pt.Status.NotFoundSince == nil || !pt.Status.NotFoundSince.Time.Equal(ptT0) {
					t.Errorf("notFoundSince = %v, want %v", pt.Status.NotFoundSince, ptT0)
				}
			} else {
				want := capacityv1alpha1.ObservedCapacity{GSUs: tc.gcpGSUs, TokensPerSecond: 3000, Utilization: 0.5, SpilloverRatio: 0.25}
				if pt.Status.Observed == nil || !near(*pt.Status.Observed, want) {
					t.Errorf("observed = %+v, want %+v", pt.Status.Observed, want)
				}
				if pt.Status.NotFoundSince != nil {
					t.Errorf("notFoundSince = %v while GCP shows PT", pt.Status.NotFoundSince)
				}
				if u, _ := metricValue(t, "regionwarden_provisionedthroughput_utilization", labels); u < 0.49 || u > 0.51 {
					t.Errorf("utilization metric = %v, want 0.5", u)
				}
			}
			if n := e.rec.count("pt", tc.wantEventType, tc.wantEvent); n != 1 {
				t.Errorf("%s %s events = %d, want 1; all: %+v", tc.wantEventType, tc.wantEvent, n, e.rec.all("pt"))
			}
		})
	}
}

// near compares observed capacity with a tolerance for the rates, which GCP
// reports as averages of integer samples.
func near(a, b capacityv1alpha1.ObservedCapacity) bool {
	eq := func(x, y float64) bool { return x-y < 0.01 && y-x < 0.01 }
	return a.GSUs == b.GSUs && eq(a.TokensPerSecond, b.TokensPerSecond) && eq(a.Utilization, b.Utilization) && eq(a.SpilloverRatio, b.SpilloverRatio)
}

// TestPTSkip checks that Skip makes no GCP calls and that Ready follows the
// term only.
func TestPTSkip(t *testing.T) {
	e := newPTEnv(t, ptEnvOptions{})
	e.create("skip", 4, withPolicy(capacityv1alpha1.VerificationSkip), withTermEnd(ptT0.Add(30*24*time.Hour)))
	pt := e.waitReconciled("skip")
	expectCond(t, pt, capacityv1alpha1.ConditionVerified, metav1.ConditionUnknown, capacityv1alpha1.ReasonSkipped)
	expectCond(t, pt, capacityv1alpha1.ConditionReady, metav1.ConditionTrue, capacityv1alpha1.ReasonActive)
	if pt.Status.ObservedGeneration != pt.Generation {
		t.Errorf("observedGeneration = %d, want %d: a skipped object is fully reconciled", pt.Status.ObservedGeneration, pt.Generation)
	}

	e.clk.Step(30 * 24 * time.Hour)
	e.reconcile("skip")
	pt = e.get("skip")
	expectCond(t, pt, capacityv1alpha1.ConditionReady, metav1.ConditionFalse, capacityv1alpha1.ReasonExpired)
	expectCond(t, pt, capacityv1alpha1.ConditionVerified, metav1.ConditionUnknown, capacityv1alpha1.ReasonSkipped)
	if calls := e.fake.TotalCalls(); calls != 0 {
		t.Errorf("Skip made %d Monitoring calls, want 0", calls)
	}
}
