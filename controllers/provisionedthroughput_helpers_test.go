package controllers

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	capacityv1alpha1 "github.com/regionwarden/regionwarden/api/v1alpha1"
	"github.com/regionwarden/regionwarden/internal/gcp"
	"github.com/regionwarden/regionwarden/internal/gcp/gcpfake"
	"github.com/regionwarden/regionwarden/internal/metricstest"
	"github.com/regionwarden/regionwarden/internal/testenv"
	"github.com/regionwarden/regionwarden/internal/waittest"
)

// ptT0 is where every PT test's clock starts.
var ptT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// recordedEvent is one event the reconciler recorded.
type recordedEvent struct {
	Object, Type, Reason, Message string
}

// eventSpy keeps the events a reconciler records, as it records them, and
// passes them on to the manager's real recorder, which writes them to the API
// server.
type eventSpy struct {
	next events.EventRecorder

	mu     sync.Mutex
	events []recordedEvent
}

func (s *eventSpy) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	name := ""
	if o, ok := regarding.(client.Object); ok {
		name = o.GetName()
	}
	s.mu.Lock()
	s.events = append(s.events, recordedEvent{Object: name, Type: eventtype, Reason: reason, Message: fmt.Sprintf(note, args...)})
	s.mu.Unlock()
	s.next.Eventf(regarding, related, eventtype, reason, action, note, args...)
}

// count is the number of events about the object with the type and reason.
func (s *eventSpy) count(object, eventtype, reason string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, e := range s.events {
		if e.Object == object && e.Type == eventtype && e.Reason == reason {
			n++
		}
	}
	return n
}

// await is count once it reaches want, or after waiting poolWait for it. A
// reconciler records its events after it writes the status (eventBuffer), so
// a test that has seen the status may read the events a moment before they
// are recorded.
func (s *eventSpy) await(t testing.TB, object, eventtype, reason string, want int) int {
	t.Helper()
	return waittest.Until(t, poolWait, fmt.Sprintf("%d %s %s events about %s", want, eventtype, reason, object),
		func() int { return s.count(object, eventtype, reason) }, func(n int) bool { return n >= want })
}

// all is every event about the object, in the order recorded.
func (s *eventSpy) all(object string) []recordedEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []recordedEvent
	for _, e := range s.events {
		if e.Object == object {
			out = append(out, e)
		}
	}
	return out
}

// ptEnv is one test's world: a namespace, a fake Cloud Monitoring on
// loopback read by the real client, and a manager running the PT controller,
// all on one fake clock.
type ptEnv struct {
	t    testing.TB
	ns   string
	clk  *testingclock.FakeClock
	fake *gcpfake.MetricServer
	rec  *eventSpy
	r    *ProvisionedThroughputReconciler
	cl   client.Client // the test's own, with the API server's full rights
}

type ptEnvOptions struct {
	// noSource runs the controller without GCP.
	noSource bool
	// restConfig replaces the manager's identity (for RBAC tests).
	restConfig func(namespace string) *rest.Config
}

func newPTEnv(t testing.TB, o ptEnvOptions) *ptEnv {
	t.Helper()
	e := &ptEnv{t: t, ns: testenv.Namespace(t, testClient), clk: testingclock.NewFakeClock(ptT0), fake: gcpfake.NewMetricServer()}
	e.fake.SetNow(e.clk.Now)

	var src gcp.Source
	if !o.noSource {
		src = startMonitoring(t, e.fake, e.clk.Now)
	}

	cfg := testConfig
	if o.restConfig != nil {
		cfg = o.restConfig(e.ns)
	}
	mgr := newManager(t, cfg, e.ns)
	var err error
	e.cl, err = client.New(testConfig, client.Options{Scheme: testScheme})
	if err != nil {
		t.Fatal(err)
	}
	// The reconciler reads past the manager's cache, with the manager's
	// identity, so each reconcile a test runs sees the last one's write.
	direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: testScheme})
	if err != nil {
		t.Fatal(err)
	}
	e.rec = &eventSpy{next: mgr.GetEventRecorder("provisionedthroughput-controller")}
	e.r = &ProvisionedThroughputReconciler{Client: direct, Facts: NewFacts(src, 0, e.clk.Now), Recorder: e.rec, Now: e.clk.Now}
	skip := true
	if err := e.r.SetupWithManager(mgr, controller.Options{SkipNameValidation: &skip}); err != nil {
		t.Fatal(err)
	}
	startManager(t, mgr)
	return e
}

// ptOption changes a PT before it is created.
type ptOption func(*capacityv1alpha1.ProvisionedThroughput)

func withPolicy(p capacityv1alpha1.VerificationPolicy) ptOption {
	return func(pt *capacityv1alpha1.ProvisionedThroughput) { pt.Spec.Verification.Policy = p }
}

func withInterval(d time.Duration) ptOption {
	return func(pt *capacityv1alpha1.ProvisionedThroughput) {
		pt.Spec.Verification.Interval = &metav1.Duration{Duration: d}
	}
}

func withGrace(d time.Duration) ptOption {
	return func(pt *capacityv1alpha1.ProvisionedThroughput) {
		pt.Spec.Verification.GracePeriod = &metav1.Duration{Duration: d}
	}
}

func withTermEnd(end time.Time) ptOption {
	return func(pt *capacityv1alpha1.ProvisionedThroughput) {
		pt.Spec.Term = &capacityv1alpha1.Term{End: &metav1.Time{Time: end}}
	}
}

func withProject(p string) ptOption {
	return func(pt *capacityv1alpha1.ProvisionedThroughput) { pt.Spec.Project = p }
}

func withLocation(l string) ptOption {
	return func(pt *capacityv1alpha1.ProvisionedThroughput) { pt.Spec.Location = l }
}

func withModel(m string) ptOption {
	return func(pt *capacityv1alpha1.ProvisionedThroughput) { pt.Spec.Model = m }
}

func withLabels(l map[string]string) ptOption {
	return func(pt *capacityv1alpha1.ProvisionedThroughput) { pt.Labels = l }
}

// The project, location and model of the PTs and pools the tests declare.
const (
	testProject  = "acme-prod"
	testLocation = "europe-west1"
	testModel    = "gemini-2.5-flash-lite"
)

// createPT declares a PT of gsus in namespace ns, of testProject,
// testLocation and testModel unless opts say otherwise: the one way the
// controller tests create a PT. It has no status: a RegionPool test makes it
// ready with setPTReady, a PT test lets the PT controller verify it.
func createPT(t testing.TB, ns, name string, gsus int64, opts ...ptOption) *capacityv1alpha1.ProvisionedThroughput {
	t.Helper()
	pt := &capacityv1alpha1.ProvisionedThroughput{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: capacityv1alpha1.ProvisionedThroughputSpec{
			Project: testProject, Location: testLocation, Model: testModel, GSUs: gsus,
		},
	}
	for _, o := range opts {
		o(pt)
	}
	if err := testClient.Create(context.Background(), pt); err != nil {
		t.Fatalf("creating PT %s: %v", name, err)
	}
	return pt
}

// create declares a PT of gsus in the test namespace (createPT).
func (e *ptEnv) create(name string, gsus int64, opts ...ptOption) *capacityv1alpha1.ProvisionedThroughput {
	e.t.Helper()
	return createPT(e.t, e.ns, name, gsus, opts...)
}

// gcpShows makes the fake report PT in the test project's location and model.
func (e *ptEnv) gcpShows(gsus int64, tokensPerSecond float64, consumed map[string]float64) {
	e.fake.SetPT(gcpfake.PT{Project: testProject, Location: testLocation, Publisher: "google", Model: testModel + "-001",
		GSUs: gsus, TokensPerSecond: tokensPerSecond, Consumed: consumed})
}

// get reads the PT from the API server.
func (e *ptEnv) get(name string) *capacityv1alpha1.ProvisionedThroughput {
	e.t.Helper()
	return mustGet(e.t, e.cl, e.ns, name, &capacityv1alpha1.ProvisionedThroughput{})
}

// reconcile runs the reconciler once on the PT, as the manager would.
func (e *ptEnv) reconcile(name string) reconcile.Result {
	e.t.Helper()
	return reconcileOnce(e.t, e.r, e.ns, name)
}

// waitFor waits until ok holds of the PT.
func (e *ptEnv) waitFor(name string, what string, ok func(*capacityv1alpha1.ProvisionedThroughput) bool) *capacityv1alpha1.ProvisionedThroughput {
	e.t.Helper()
	return waittest.Until(e.t, time.Minute, name+" to get "+what, func() *capacityv1alpha1.ProvisionedThroughput { return e.get(name) }, ok)
}

// waitReconciled waits for the manager's first reconcile of a new PT.
func (e *ptEnv) waitReconciled(name string) *capacityv1alpha1.ProvisionedThroughput {
	e.t.Helper()
	return e.waitFor(name, "a Verified condition", func(pt *capacityv1alpha1.ProvisionedThroughput) bool {
		return meta.FindStatusCondition(pt.Status.Conditions, capacityv1alpha1.ConditionVerified) != nil
	})
}

// cond returns the PT's condition of type t, failing when it has none.
func cond(t *testing.T, pt *capacityv1alpha1.ProvisionedThroughput, typ string) metav1.Condition {
	t.Helper()
	c := meta.FindStatusCondition(pt.Status.Conditions, typ)
	if c == nil {
		t.Fatalf("%s has no %s condition; conditions: %+v", pt.Name, typ, pt.Status.Conditions)
	}
	if c.ObservedGeneration != pt.Generation {
		t.Errorf("%s: %s.observedGeneration = %d, want %d", pt.Name, typ, c.ObservedGeneration, pt.Generation)
	}
	return *c
}

// expectCond checks a condition's status and reason.
func expectCond(t *testing.T, pt *capacityv1alpha1.ProvisionedThroughput, typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	c := cond(t, pt, typ)
	if c.Status != status || c.Reason != reason {
		t.Errorf("%s: %s = %s/%s (%q), want %s/%s", pt.Name, typ, c.Status, c.Reason, c.Message, status, reason)
	}
	return c
}

// metricValue reads a PT metric from controller-runtime's registry; ok is
// false when the series does not exist.
func metricValue(t *testing.T, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	return metricstest.Value(t, metrics.Registry, name, labels)
}
