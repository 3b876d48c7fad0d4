package controllers

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capacityv1alpha1 "github.com/regionwarden/regionwarden/api/v1alpha1"
	"github.com/regionwarden/regionwarden/internal/waittest"
	"github.com/regionwarden/regionwarden/router/table"
)

// awarenessTrials is how many times BenchmarkRegionPoolTimeToAwareness turns
// a PT Ready per benchmark iteration.
const awarenessTrials = 50

// BenchmarkRegionPoolTimeToAwareness measures, against the real API server,
// how long capacity takes to be protected in the table a router watches.
//
// declared: from a PT's status turning Ready (the status update call) to the
// pool's ConfigMap holding that region as provisioned, as a watcher of the
// ConfigMap (a router) sees it. Each trial turns the PT Ready, waits for the
// table, turns it not Ready and waits for the region to be shared again; the
// way back is reported too. Target: p99 under 1s.
//
// discovered: from GCP starting to report a PT (no object anywhere) to the
// table protecting it, bounded by the discovery interval (the cache's TTL and
// the pool's requeue, 1s here) plus a reconcile.
//
//	KUBEBUILDER_ASSETS=... go test ./controllers/ -run '^$' -bench TimeToAwareness
func BenchmarkRegionPoolTimeToAwareness(b *testing.B) {
	b.Run("declared", benchmarkAwarenessDeclared)
	b.Run("discovered", benchmarkAwarenessDiscovered)
}

func benchmarkAwarenessDeclared(b *testing.B) {
	e := newPoolEnv(b, true)
	e.createPool("flash", []string{"europe-west1", "europe-west4", "us-central1", "us-east5"})
	createPT(e.t, e.ns, "order", 4, withLocation("europe-west1"))
	e.waitTable("flash-routing", "exists", func(routingTable) bool { return true })

	ctx := context.Background()
	waitTier := watchTier(b, e.ns, "flash-routing", "europe-west1")
	setReady := func(ready bool) time.Time {
		pt := &capacityv1alpha1.ProvisionedThroughput{}
		if err := testClient.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: "order"}, pt); err != nil {
			b.Fatal(err)
		}
		status, reason := metav1.ConditionFalse, capacityv1alpha1.ReasonExpired
		if ready {
			status, reason = metav1.ConditionTrue, capacityv1alpha1.ReasonActive
		}
		meta.SetStatusCondition(&pt.Status.Conditions, metav1.Condition{Type: capacityv1alpha1.ConditionReady, Status: status, Reason: reason, Message: "benchmark"})
		start := time.Now()
		if err := testClient.Status().Update(ctx, pt); err != nil {
			b.Fatal(err)
		}
		return start
	}

	var aware, withdrawn []time.Duration
	b.ResetTimer()
	for range b.N {
		for range awarenessTrials {
			start := setReady(true)
			waitTier(table.TierProvisioned)
			aware = append(aware, time.Since(start))
			start = setReady(false)
			waitTier(table.TierShared)
			withdrawn = append(withdrawn, time.Since(start))
		}
	}
	b.StopTimer()
	reportAwareness(b, aware, withdrawn)
}

// Discovery awareness benchmark settings.
const (
	// discoveryTrials is how many orders BenchmarkRegionPoolTimeToAwareness
	// starts in GCP per iteration of its discovered case.
	discoveryTrials = 20
	// benchDiscoveryInterval is the cache TTL and the pool's requeue.
	benchDiscoveryInterval = time.Second
)

func benchmarkAwarenessDiscovered(b *testing.B) {
	e := newDiscoveryEnv(b, discoveryEnvOptions{runPools: true, realClock: true, interval: benchDiscoveryInterval})
	// With no grace period an ended order leaves at the second answer that
	// omits it, so trials follow each other quickly.
	e.createPool("flash", discoveryRegions, poolWithDiscoveryGrace(0))
	e.waitTable("flash-routing", "exists", func(routingTable) bool { return true })

	waitTier := watchTier(b, e.ns, "flash-routing", "europe-west4")

	var aware, withdrawn []time.Duration
	b.ResetTimer()
	for range b.N {
		for range discoveryTrials {
			start := time.Now()
			e.gcpShows("europe-west4", 4, 7000)
			waitTier(table.TierProvisioned)
			aware = append(aware, time.Since(start))
			start = time.Now()
			e.orderEnds("europe-west4")
			waitTier(table.TierShared)
			withdrawn = append(withdrawn, time.Since(start))
		}
	}
	b.StopTimer()
	reportAwareness(b, aware, withdrawn)
	b.ReportMetric(float64(benchDiscoveryInterval/time.Millisecond), "interval-ms")
}

// reportAwareness reports the median and 99th percentile of the times the
// table took to protect a region (aware) and to stop protecting it
// (withdrawn), and how many trials there were.
func reportAwareness(b *testing.B, aware, withdrawn []time.Duration) {
	b.ReportMetric(msAt(aware, 0.50), "p50-aware-ms")
	b.ReportMetric(msAt(aware, 0.99), "p99-aware-ms")
	b.ReportMetric(msAt(withdrawn, 0.50), "p50-withdraw-ms")
	b.ReportMetric(msAt(withdrawn, 0.99), "p99-withdraw-ms")
	b.ReportMetric(float64(len(aware)), "trials")
}

// msAt is the q-quantile of ds in milliseconds (nearest rank).
func msAt(ds []time.Duration, q float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	i = max(0, min(i, len(s)-1))
	return float64(s[i]) / float64(time.Millisecond)
}

// Scale of BenchmarkRegionPoolScale.
const (
	scalePools     = 500
	scalePTsOfPool = 4
)

// BenchmarkRegionPoolScale creates 500 pools (one model each, four listed
// regions) and 2,000 ready PTs (four per pool, one of them in a location the
// pool does not list) in one namespace, then starts the controller and
// measures the time until every pool reports a table with its four
// provisioned regions, and the process's peak heap while it does
// (runtime.ReadMemStats every 50ms; the objects the benchmark itself created
// are in the baseline, reported apart). Targets: converge under 60s, heap
// under 256 MiB.
//
//	KUBEBUILDER_ASSETS=... go test ./controllers/ -run '^$' -bench RegionPoolScale -benchtime 1x
func BenchmarkRegionPoolScale(b *testing.B) {
	for range b.N {
		runScale(b)
	}
}

func runScale(b *testing.B) {
	b.StopTimer()
	e := newPoolEnv(b, false)
	ctx := context.Background()
	regions := []string{"europe-west1", "europe-west4", "us-central1", "us-east5"}
	ptLocations := []string{"europe-west1", "europe-west4", "us-east5", "global"}

	// Create everything with a few writers; the API server is the limit.
	work := make(chan int)
	var wg sync.WaitGroup
	var failed atomic.Value
	for range 4 {
		wg.Go(func() {
			for i := range work {
				if err := createScalePool(ctx, e.ns, i, regions, ptLocations); err != nil {
					failed.Store(err)
				}
			}
		})
	}
	for i := range scalePools {
		work <- i
	}
	close(work)
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	baseline := ms.HeapAlloc
	var peak atomic.Uint64
	peak.Store(baseline)
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				if m.HeapAlloc > peak.Load() {
					peak.Store(m.HeapAlloc)
				}
			}
		}
	}()

	b.StartTimer()
	start := time.Now()
	e.start()
	converged := waittest.Until(b, 5*time.Minute, "every pool to converge", func() int {
		var pools capacityv1alpha1.RegionPoolList
		if err := testClient.List(ctx, &pools, client.InNamespace(e.ns)); err != nil {
			b.Fatal(err)
		}
		n := 0
		for i := range pools.Items {
			p := &pools.Items[i]
			if isReconciled(p) && len(p.Status.ProtectedRegions) == len(ptLocations) && p.Status.TableHash != "" {
				n++
			}
		}
		return n
	}, func(n int) bool { return n == scalePools })
	elapsed := time.Since(start)
	b.StopTimer()
	close(stop)
	<-sampled
	if converged != scalePools {
		b.Fatalf("%d of %d pools converged in %v", converged, scalePools, elapsed)
	}
	var cms corev1.ConfigMapList
	if err := testClient.List(ctx, &cms, client.InNamespace(e.ns), client.MatchingLabels{table.LabelRoutingTable: "true"}); err != nil {
		b.Fatal(err)
	}
	if len(cms.Items) != scalePools {
		b.Fatalf("%d routing tables, want %d", len(cms.Items), scalePools)
	}
	const mib = 1 << 20
	b.ReportMetric(elapsed.Seconds(), "converge-s")
	b.ReportMetric(float64(peak.Load())/mib, "peak-heap-MiB")
	b.ReportMetric(float64(peak.Load()-baseline)/mib, "heap-over-baseline-MiB")
	b.ReportMetric(float64(baseline)/mib, "baseline-heap-MiB")
}

// createScalePool creates pool i of the scale benchmark and its ready PTs.
func createScalePool(ctx context.Context, ns string, i int, regions, ptLocations []string) error {
	model := fmt.Sprintf("model-%03d", i)
	p := &capacityv1alpha1.RegionPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("pool-%03d", i)},
		Spec:       capacityv1alpha1.RegionPoolSpec{Project: testProject, Model: model},
	}
	for _, r := range regions {
		p.Spec.Regions = append(p.Spec.Regions, capacityv1alpha1.PoolRegion{Name: r})
	}
	if err := testClient.Create(ctx, p); err != nil {
		return err
	}
	for j, loc := range ptLocations {
		pt := &capacityv1alpha1.ProvisionedThroughput{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("pt-%03d-%d", i, j)},
			Spec:       capacityv1alpha1.ProvisionedThroughputSpec{Project: testProject, Location: loc, Model: model, GSUs: int64(j + 1)},
		}
		if err := testClient.Create(ctx, pt); err != nil {
			return err
		}
		meta.SetStatusCondition(&pt.Status.Conditions, metav1.Condition{Type: capacityv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: capacityv1alpha1.ReasonActive, Message: "benchmark"})
		pt.Status.Observed = &capacityv1alpha1.ObservedCapacity{GSUs: pt.Spec.GSUs, TokensPerSecond: float64(3000 * (j + 1))}
		if err := testClient.Status().Update(ctx, pt); err != nil {
			return err
		}
	}
	return nil
}

// watchTier watches the ConfigMap name in namespace ns and returns a function
// that reads its events until region has the given tier in the table. The
// watch stops when the benchmark ends.
func watchTier(b *testing.B, ns, name, region string) func(table.Tier) {
	b.Helper()
	wc, err := client.NewWithWatch(testConfig, client.Options{Scheme: testScheme})
	if err != nil {
		b.Fatal(err)
	}
	w, err := wc.Watch(context.Background(), &corev1.ConfigMapList{}, client.InNamespace(ns),
		client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", name)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(w.Stop)
	return func(tier table.Tier) {
		for ev := range w.ResultChan() {
			cm, ok := ev.Object.(*corev1.ConfigMap)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			if tb, err := table.Parse([]byte(cm.Data[table.DataKey])); err == nil {
				for _, r := range tb.Pools[0].Regions {
					if r.Name == region && r.Tier == tier {
						return
					}
				}
			}
		}
		b.Fatal("the ConfigMap watch closed")
	}
}
