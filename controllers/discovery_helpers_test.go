package controllers

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	capacityv1alpha1 "github.com/regionwarden/regionwarden/api/v1alpha1"
	"github.com/regionwarden/regionwarden/internal/gcp"
	"github.com/regionwarden/regionwarden/internal/gcp/gcpfake"
	"github.com/regionwarden/regionwarden/internal/testenv"
	"github.com/regionwarden/regionwarden/router/table"
)

// discoveryRegions are the four regions of every discovery test's pool.
var discoveryRegions = []string{"europe-west1", "europe-west4", "us-central1", "us-east5"}

// gcpModel is the pool's model as GCP labels it: with its version suffix.
const gcpModel = testModel + "-001"

// discoveryEnv is one discovery test's world: a namespace, a fake Cloud
// Monitoring on loopback read by the real monitoring client, a
// ProvisionedThroughputReconciler that shares its FactsSource with the pool
// reconciler, and a manager, all on one clock.
type discoveryEnv struct {
	*poolEnv
	clk  *testingclock.FakeClock
	fake *gcpfake.MetricServer
	// src is the Monitoring client that every FactsSource of the test reads
	// through; nil without GCP.
	src gcp.Source
	pt  *ProvisionedThroughputReconciler
}

type discoveryEnvOptions struct {
	// runPools runs the RegionPool controller in the manager; otherwise the
	// manager only serves its cache and the test reconciles by hand.
	runPools bool
	// runPTs runs the ProvisionedThroughput controller in the manager.
	runPTs bool
	// noSource runs without GCP, as --gcp-verify=false does.
	noSource bool
	// realClock uses time.Now instead of a fake clock (benchmarks).
	realClock bool
	// interval is the reconciler's DiscoveryInterval override.
	interval time.Duration
}

func newDiscoveryEnv(t testing.TB, o discoveryEnvOptions) *discoveryEnv {
	t.Helper()
	e := &discoveryEnv{poolEnv: &poolEnv{t: t, ns: testenv.Namespace(t, testClient), cl: testClient}, clk: testingclock.NewFakeClock(ptT0), fake: gcpfake.NewMetricServer()}
	now := e.clk.Now
	if o.realClock {
		now = time.Now
	}
	e.fake.SetNow(now)

	var src gcp.Source
	if !o.noSource {
		src = startMonitoring(t, e.fake, now)
	}
	e.src = src

	mgr := newManager(t, testConfig, e.ns)
	e.mgr = mgr
	facts := NewFacts(src, 0, now)
	e.pt = &ProvisionedThroughputReconciler{Client: mgr.GetClient(), Facts: facts, Recorder: mgr.GetEventRecorder("provisionedthroughput-controller"), Now: now}
	e.rec = &eventSpy{next: mgr.GetEventRecorder(RegionPoolControllerName)}
	e.r = &RegionPoolReconciler{Client: mgr.GetClient(), Recorder: e.rec, Facts: facts, DiscoveryInterval: o.interval}
	skip := true
	if o.runPools {
		if err := e.r.SetupWithManager(mgr, controller.Options{SkipNameValidation: &skip, MaxConcurrentReconciles: 4}); err != nil {
			t.Fatal(err)
		}
	} else {
		e.r.Reader = mgr.GetAPIReader()
		if err := indexPoolFields(mgr.GetFieldIndexer()); err != nil {
			t.Fatal(err)
		}
	}
	if o.runPTs {
		if err := e.pt.SetupWithManager(mgr, controller.Options{SkipNameValidation: &skip}); err != nil {
			t.Fatal(err)
		}
	}
	e.start()
	return e
}

// gcpShows makes GCP report gsus of PT for the pool's model in location.
func (e *discoveryEnv) gcpShows(location string, gsus int64, tokensPerSecond float64) {
	e.fake.SetPT(gcpfake.PT{Project: testProject, Location: location, Publisher: "google", Model: gcpModel, GSUs: gsus, TokensPerSecond: tokensPerSecond})
}

// orderEnds makes GCP stop reporting PT in location.
func (e *discoveryEnv) orderEnds(location string) {
	e.fake.DeletePT(testProject, location, "google", gcpModel)
}

// reconcile runs the pool reconciler once, as the manager would.
func (e *discoveryEnv) reconcile(name string) reconcile.Result {
	e.t.Helper()
	return reconcileOnce(e.t, e.r, e.ns, name)
}

func poolWithDiscovery(mode capacityv1alpha1.DiscoveryMode) poolOption {
	return func(p *capacityv1alpha1.RegionPool) { p.Spec.Discovery.Mode = mode }
}

func poolWithDiscoveryGrace(d time.Duration) poolOption {
	return func(p *capacityv1alpha1.RegionPool) {
		p.Spec.Discovery.GracePeriod = &metav1.Duration{Duration: d}
	}
}

// capacityDeclared is the pool's CapacityDeclared condition, or nil.
func capacityDeclared(p *capacityv1alpha1.RegionPool) *metav1.Condition {
	return meta.FindStatusCondition(p.Status.Conditions, capacityv1alpha1.ConditionCapacityDeclared)
}

// discoveredMetric reads the pool's regionwarden_discovered_provisioned_regions
// series for location; ok is false when there is none.
func (e *discoveryEnv) discoveredMetric(t *testing.T, pool, location string) (float64, bool) {
	t.Helper()
	return metricValue(t, "regionwarden_discovered_provisioned_regions",
		map[string]string{"namespace": e.ns, "pool": pool, "location": location, "model": testModel})
}

// tableWatch records every version of a routing-table ConfigMap that a
// watcher (a router) sees.
type tableWatch struct {
	w    watch.Interface
	done chan struct{}

	mu       sync.Mutex
	versions []routingTable
}

// watchTable starts watching ConfigMap name from its current version on.
func (e *discoveryEnv) watchTable(name string) *tableWatch {
	e.t.Helper()
	wc, err := client.NewWithWatch(testConfig, client.Options{Scheme: testScheme})
	if err != nil {
		e.t.Fatal(err)
	}
	w, err := wc.Watch(context.Background(), &corev1.ConfigMapList{}, client.InNamespace(e.ns),
		client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", name)})
	if err != nil {
		e.t.Fatal(err)
	}
	tw := &tableWatch{w: w, done: make(chan struct{})}
	go func() {
		defer close(tw.done)
		for ev := range w.ResultChan() {
			cm, ok := ev.Object.(*corev1.ConfigMap)
			if !ok {
				continue
			}
			rt := routingTable{cm: cm}
			if ev.Type == watch.Deleted {
				rt.cm = nil
			} else if tb, err := table.Parse([]byte(cm.Data[table.DataKey])); err == nil {
				rt.table = tb
			}
			tw.mu.Lock()
			tw.versions = append(tw.versions, rt)
			tw.mu.Unlock()
		}
	}()
	return tw
}

// stop ends the watch and returns every version seen.
func (tw *tableWatch) stop() []routingTable {
	tw.w.Stop()
	<-tw.done
	tw.mu.Lock()
	defer tw.mu.Unlock()
	return tw.versions
}
