package controllers

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"google.golang.org/grpc/codes"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capacityv1alpha1 "github.com/regionwarden/regionwarden/api/v1alpha1"
	"github.com/regionwarden/regionwarden/internal/gcp"
)

// Timing of verification.
const (
	// VerificationJitter is the largest share of the interval added to a
	// requeue, so objects created together drift apart instead of asking GCP
	// in lockstep forever. It only ever lengthens the interval, so a shared
	// answer cached for one interval serves a whole round.
	VerificationJitter = 0.1
	// SourceRetryInterval is the longest wait before asking GCP again after it
	// could not be asked.
	SourceRetryInterval = time.Minute
	// SourceErrorTTL is how long a failed answer is shared per project, so an
	// outage costs one call per project per SourceErrorTTL, not one per object.
	SourceErrorTTL = 30 * time.Second
)

// ProvisionedThroughputReconciler verifies ProvisionedThroughput declarations
// against what GCP reports and writes only their status.
//
// Ready means "route this location as provisioned". It turns False only when
// the term has ended, or when the policy is Enforce and GCP has answered
// NotFound continuously for longer than the grace period. Not being able to
// ask GCP (an outage, a permission error, a timeout) never turns Ready False:
// routing keeps the last verified truth.
type ProvisionedThroughputReconciler struct {
	// Client reads and patches ProvisionedThroughput objects.
	Client client.Client
	// Facts tells what GCP shows, no older than an object's verification
	// interval. NewFacts makes one that asks GCP once per project and
	// interval, whatever the number of objects; the RegionPoolReconciler
	// shares it. Nil means the manager runs without GCP: Warn and Enforce
	// objects stay Verified Unknown and Ready by their term.
	Facts FactsSource
	// Recorder records events; nil records none.
	Recorder events.EventRecorder
	// Now is the clock for terms and grace periods; nil means time.Now.
	Now func() time.Time
}

// +kubebuilder:rbac:groups=capacity.regionwarden.io,resources=provisionedthroughputs,verbs=get;list;watch
// +kubebuilder:rbac:groups=capacity.regionwarden.io,resources=provisionedthroughputs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=events.k8s.io,namespace=system,resources=events,verbs=create;patch

// Reconcile verifies one ProvisionedThroughput and writes its status, once,
// on the way out.
func (r *ProvisionedThroughputReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pt := &capacityv1alpha1.ProvisionedThroughput{}
	return reconcileObject(ctx, r.Client, r.Client, r.Recorder, req, pt, forgetPTMetrics, ptStatus, func(buf events.EventRecorder) (ctrl.Result, error) {
		work := *r
		work.Recorder = buf
		return work.reconcile(ctx, pt)
	})
}

// ptStatus is the part of a ProvisionedThroughput that a reconcile writes.
func ptStatus(pt *capacityv1alpha1.ProvisionedThroughput) any { return pt.Status }

// verification is the outcome of asking GCP about one object.
type verification struct {
	// skipped is true when GCP was not to be asked: the policy is Skip, or
	// the manager runs without GCP.
	skipped bool
	// err is why GCP could not be asked; nil when it answered or was skipped.
	err error
}

// reconcile computes the status from the spec, GCP's answer and the clock.
func (r *ProvisionedThroughputReconciler) reconcile(ctx context.Context, pt *capacityv1alpha1.ProvisionedThroughput) (ctrl.Result, error) {
	now := r.now()
	v := r.verify(ctx, pt)
	r.setReady(pt, now)
	r.setExpiring(pt, now)
	finalizeStatus(pt, v)
	observePTConditions(pt)
	if v.err != nil {
		ctrl.LoggerFrom(ctx).Info("GCP could not be asked; routing keeps the last verified state", "code", gcp.Code(v.err).String(), "error", v.err.Error())
	}
	return ctrl.Result{RequeueAfter: requeueAfter(pt, v, now)}, nil
}

// verify asks GCP about the declaration and sets Verified, status.observed,
// lastVerifiedTime, notFoundSince and the gauges from the answer. When GCP
// cannot be asked, only Verified changes (to Unknown): what GCP last said stands.
func (r *ProvisionedThroughputReconciler) verify(ctx context.Context, pt *capacityv1alpha1.ProvisionedThroughput) verification {
	const verified = capacityv1alpha1.ConditionVerified
	spec := &pt.Spec
	labels := []string{pt.Namespace, pt.Name, spec.Location, spec.Model}

	switch {
	case pt.GetVerificationPolicy() == capacityv1alpha1.VerificationSkip:
		return skipVerification(pt, "the verification policy is Skip: GCP is not asked")
	case r.Facts == nil:
		// Running without GCP is the operator's choice, not a failure: the
		// object is fully reconciled (Flux's wait succeeds), nothing is
		// counted as a verification error, and readiness follows the term.
		return skipVerification(pt, "the manager runs without GCP verification (--gcp-verify=false): GCP is not asked")
	}

	facts, err := r.Facts.ProjectFacts(ctx, spec.Project, pt.GetVerificationInterval())
	if err != nil {
		code := gcp.Code(err)
		ptVerificationErrors.WithLabelValues(append(labels, code.String())...).Inc()
		setCondition(pt, verified, metav1.ConditionUnknown, capacityv1alpha1.ReasonSourceUnavailable,
			fmt.Sprintf("%s: Cloud Monitoring could not be asked about project %s: %v", code, spec.Project, err))
		return verification{err: err}
	}

	// The last answer GCP gave, before this one, was the declared capacity.
	wasObserved := pt.Status.LastVerifiedTime != nil && pt.Status.NotFoundSince == nil &&
		pt.Status.Observed != nil && pt.Status.Observed.GSUs == spec.GSUs
	unanswered := unansweredSince(pt, facts.FetchedAt)
	pt.Status.LastVerifiedTime = stamp(facts.FetchedAt)

	f, found := facts.Lookup(spec.Location, pt.GetPublisher(), spec.Model)
	if !found || f.GSUs <= 0 {
		switch {
		case pt.Status.NotFoundSince == nil:
			pt.Status.NotFoundSince = stamp(facts.FetchedAt)
		case unanswered > 0:
			// The grace period counts GCP's NotFound answers, not time
			// in which GCP could not be asked: that time is added back.
			pt.Status.NotFoundSince = stamp(pt.Status.NotFoundSince.Add(unanswered))
		}
		pt.Status.Observed = nil
		ptObservedGSUs.WithLabelValues(labels...).Set(0)
		ptUtilization.WithLabelValues(labels...).Set(0)
		ptSpilloverRatio.WithLabelValues(labels...).Set(0)
		setConditionWithEvent(r.Recorder, pt, eventWarning, ActionVerify, verified, metav1.ConditionFalse, capacityv1alpha1.ReasonNotFound,
			fmt.Sprintf("GCP shows no Provisioned Throughput for %s/%s in %s of project %s; %d GSUs are declared: %s",
				pt.GetPublisher(), spec.Model, spec.Location, spec.Project, spec.GSUs, notFoundAdvice(pt)))
		return verification{}
	}

	pt.Status.NotFoundSince = nil
	pt.Status.Observed = &capacityv1alpha1.ObservedCapacity{
		GSUs:            f.GSUs,
		TokensPerSecond: f.TokensPerSecond,
		Utilization:     f.Utilization(),
		SpilloverRatio:  f.SpilloverRatio(),
	}
	ptObservedGSUs.WithLabelValues(labels...).Set(float64(f.GSUs))
	ptUtilization.WithLabelValues(labels...).Set(f.Utilization())
	ptSpilloverRatio.WithLabelValues(labels...).Set(f.SpilloverRatio())

	if f.GSUs != spec.GSUs {
		setConditionWithEvent(r.Recorder, pt, eventWarning, ActionVerify, verified, metav1.ConditionFalse, capacityv1alpha1.ReasonMismatch,
			fmt.Sprintf("%d GSUs are declared but GCP shows %d GSUs for %s/%s in %s of project %s: set spec.gsus to what was bought, or check the order in the Google Cloud console",
				spec.GSUs, f.GSUs, pt.GetPublisher(), spec.Model, spec.Location, spec.Project))
		return verification{}
	}
	msg := fmt.Sprintf("GCP shows the declared %d GSUs for %s/%s in %s of project %s",
		spec.GSUs, pt.GetPublisher(), spec.Model, spec.Location, spec.Project)
	// The Normal event tells that verification succeeded, once: a recovery
	// from an outage that changed nothing in GCP's answer is not news.
	if setCondition(pt, verified, metav1.ConditionTrue, capacityv1alpha1.ReasonObserved, msg) && !wasObserved {
		recordEvent(r.Recorder, pt, eventNormal, capacityv1alpha1.ReasonObserved, ActionVerify, msg)
	}
	return verification{}
}

// unansweredSince is how long before answeredAt GCP went without answering
// about pt: the time since its last answer when it could not be asked since
// (Verified is SourceUnavailable), else zero. The whole gap is left out, the
// part before the first failed ask too: without answers nothing is known.
func unansweredSince(pt *capacityv1alpha1.ProvisionedThroughput, answeredAt time.Time) time.Duration {
	last := pt.Status.LastVerifiedTime
	if last == nil || conditionReason(pt, capacityv1alpha1.ConditionVerified) != capacityv1alpha1.ReasonSourceUnavailable {
		return 0
	}
	return max(answeredAt.Truncate(time.Second).Sub(last.Time), 0)
}

// skipVerification sets Verified Unknown/Skipped with msg: GCP is not asked,
// what it last said no longer counts toward the grace period, and the
// object's observed gauges go.
func skipVerification(pt *capacityv1alpha1.ProvisionedThroughput, msg string) verification {
	setCondition(pt, capacityv1alpha1.ConditionVerified, metav1.ConditionUnknown, capacityv1alpha1.ReasonSkipped, msg)
	pt.Status.NotFoundSince = nil
	forgetPTObserved(pt.Namespace, pt.Name)
	return verification{skipped: true}
}

// notFoundAdvice says what a NotFound answer does under the object's policy
// and what a person checks.
func notFoundAdvice(pt *capacityv1alpha1.ProvisionedThroughput) string {
	effect := "the Warn policy keeps routing it as provisioned"
	if pt.GetVerificationPolicy() == capacityv1alpha1.VerificationEnforce {
		effect = fmt.Sprintf("the Enforce policy stops routing it as provisioned if GCP keeps answering so for %s", pt.GetGracePeriod())
	}
	return effect + "; check the order in the Google Cloud console, and this object's project, location and model"
}

// setReady decides whether the location is routed as provisioned. Only the
// term's end and, under Enforce, GCP's own NotFound answers for longer than
// the grace period turn it False; the grace period is measured between GCP
// answers, so time without answers (an outage) never counts toward it (verify
// moves notFoundSince past it).
func (r *ProvisionedThroughputReconciler) setReady(pt *capacityv1alpha1.ProvisionedThroughput, now time.Time) {
	const ready = capacityv1alpha1.ConditionReady
	spec, st := &pt.Spec, &pt.Status
	if end := termEnd(pt); end != nil && !now.Before(end.Time) {
		setConditionWithEvent(r.Recorder, pt, eventWarning, ActionReconcile, ready, metav1.ConditionFalse, capacityv1alpha1.ReasonExpired,
			fmt.Sprintf("the term ended at %s: %s is no longer routed as provisioned; renew the commitment and move spec.term.end, or delete this ProvisionedThroughput",
				end.UTC().Format(time.RFC3339), spec.Location))
		return
	}
	grace := pt.GetGracePeriod()
	if pt.GetVerificationPolicy() == capacityv1alpha1.VerificationEnforce && st.NotFoundSince != nil && st.LastVerifiedTime != nil &&
		st.LastVerifiedTime.Sub(st.NotFoundSince.Time) > grace {
		setConditionWithEvent(r.Recorder, pt, eventWarning, ActionReconcile, ready, metav1.ConditionFalse, capacityv1alpha1.ReasonNotFound,
			fmt.Sprintf("GCP has answered that there is no Provisioned Throughput for longer than the grace period of %s (since %s, time in which it could not be asked not counted): the Enforce policy stops routing %s as provisioned; check the order in the Google Cloud console, then correct this object's project, location and model, or delete it",
				grace, st.NotFoundSince.UTC().Format(time.RFC3339), spec.Location))
		return
	}
	verified := conditionReason(pt, capacityv1alpha1.ConditionVerified)
	setCondition(pt, ready, metav1.ConditionTrue, capacityv1alpha1.ReasonActive,
		fmt.Sprintf("%s is routed as provisioned with %d GSUs (verification: %s)", spec.Location, spec.GSUs, verified))
}

// setExpiring warns, once, when the term's end is within ExpiringWindow.
func (r *ProvisionedThroughputReconciler) setExpiring(pt *capacityv1alpha1.ProvisionedThroughput, now time.Time) {
	const expiring = capacityv1alpha1.ConditionExpiring
	end := termEnd(pt)
	switch {
	case end == nil:
		setCondition(pt, expiring, metav1.ConditionFalse, capacityv1alpha1.ReasonActive, "the term has no end")
	case !now.Before(end.Time):
		setCondition(pt, expiring, metav1.ConditionFalse, capacityv1alpha1.ReasonExpired,
			fmt.Sprintf("the term ended at %s", end.UTC().Format(time.RFC3339)))
	case !now.Before(end.Add(-capacityv1alpha1.ExpiringWindow)):
		setConditionWithEvent(r.Recorder, pt, eventWarning, ActionReconcile, expiring, metav1.ConditionTrue, capacityv1alpha1.ReasonExpiring,
			fmt.Sprintf("the term ends at %s, within %d days: renew the commitment or plan for %s without it",
				end.UTC().Format(time.RFC3339), int(capacityv1alpha1.ExpiringWindow/(24*time.Hour)), pt.Spec.Location))
	default:
		setCondition(pt, expiring, metav1.ConditionFalse, capacityv1alpha1.ReasonActive,
			fmt.Sprintf("the term ends at %s", end.UTC().Format(time.RFC3339)))
	}
}

// finalizeStatus sets the kstatus conditions, which move observedGeneration
// when the object is fully reconciled (GCP answered, or was not to be asked)
// or stalled.
//
// A location that is not routed as provisioned (Ready False: the term ended,
// or Enforce found no capacity) stalls the object with Ready's reason and
// message: the declaration no longer does what it was written for, and only
// a person can change that (renew, fix or delete it), so kstatus (Flux) reads
// Failed and Argo CD Degraded, rather than waiting for a progress that will
// not come. A refusal that only a person can fix (permissions, a wrong
// project) stalls it too; anything else is retried and shows as Reconciling.
// None of this touches Ready.
func finalizeStatus(pt *capacityv1alpha1.ProvisionedThroughput, v verification) {
	pt.Status.ExpiresAt = termEnd(pt)
	if ready := meta.FindStatusCondition(pt.Status.Conditions, capacityv1alpha1.ConditionReady); ready != nil && ready.Status == metav1.ConditionFalse {
		markStalled(pt, ready.Reason, ready.Message)
		return
	}
	if v.err == nil {
		markReconciled(pt)
		return
	}
	code := gcp.Code(v.err)
	switch code {
	case codes.PermissionDenied, codes.Unauthenticated:
		markStalled(pt, capacityv1alpha1.ReasonSourceUnavailable,
			fmt.Sprintf("Cloud Monitoring refuses to answer (%s): the operator's Google service account needs roles/monitoring.viewer on project %s", code, pt.Spec.Project))
	case codes.InvalidArgument, codes.NotFound, codes.FailedPrecondition, codes.Unimplemented:
		markStalled(pt, capacityv1alpha1.ReasonSourceUnavailable,
			fmt.Sprintf("Cloud Monitoring cannot answer (%s) until the project or the manager's configuration changes: %v", code, v.err))
	default:
		markReconciling(pt, capacityv1alpha1.ReasonSourceUnavailable,
			fmt.Sprintf("waiting for Cloud Monitoring to answer (%s)", code))
	}
}

// requeueAfter is the next verification: the interval plus jitter, sooner
// after GCP could not be asked, and never later than the moment the term
// enters the Expiring window or ends, so those flip on time.
func requeueAfter(pt *capacityv1alpha1.ProvisionedThroughput, v verification, now time.Time) time.Duration {
	interval := pt.GetVerificationInterval()
	if v.err != nil {
		interval = min(interval, SourceRetryInterval)
	}
	next := interval + time.Duration(rand.Float64()*VerificationJitter*float64(interval))
	if end := termEnd(pt); end != nil {
		for _, at := range []time.Time{end.Add(-capacityv1alpha1.ExpiringWindow), end.Time} {
			if d := at.Sub(now); d > 0 && d < next {
				next = d
			}
		}
	}
	return next
}

func (r *ProvisionedThroughputReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func termEnd(pt *capacityv1alpha1.ProvisionedThroughput) *metav1.Time {
	if pt.Spec.Term == nil || pt.Spec.Term.End == nil {
		return nil
	}
	return pt.Spec.Term.End.DeepCopy()
}

// stamp is t as the API server keeps it: whole seconds, so a status read back
// equals the one written.
func stamp(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t.Truncate(time.Second))
	return &mt
}
