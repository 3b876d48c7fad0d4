package controllers

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	capacityv1alpha1 "github.com/regionwarden/regionwarden/api/v1alpha1"
	"github.com/regionwarden/regionwarden/internal/gcp"
	"github.com/regionwarden/regionwarden/internal/gcp/gcpfake"
	"github.com/regionwarden/regionwarden/internal/testenv"
)

// The tests of this package share one real kube-apiserver and etcd. Each test
// works in a namespace of its own and starts the managers it needs.
var (
	testScheme = runtime.NewScheme()
	testConfig *rest.Config
	testClient client.Client
)

// TestMain runs the tests against one control plane, and fails them when
// goroutines outlive them: a reconciler that left one behind a reconcile or
// a GCP call would grow in the operator until it failed.
func TestMain(m *testing.M) {
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	code := testenv.Run(m, env, func(cfg *rest.Config) error {
		if err := clientgoscheme.AddToScheme(testScheme); err != nil {
			return err
		}
		if err := capacityv1alpha1.AddToScheme(testScheme); err != nil {
			return err
		}
		testConfig = cfg
		var err error
		testClient, err = client.New(cfg, client.Options{Scheme: testScheme})
		return err
	})
	// Past the tests, only controller-runtime's own leftovers may run: the
	// GVK fix-up of its metadata informers' watches (newGVKFixupWatcher)
	// blocks on a send once the reflector that read it stops, one per
	// stopped manager.
	os.Exit(testenv.NoLeaks(code, goleak.IgnoreTopFunction("k8s.io/apimachinery/pkg/watch.(*filteredWatch).loop")))
}

// reconcileOnce runs r once on ns/name, as the manager would, and fails
// the test if it returns an error.
func reconcileOnce(t testing.TB, r reconcile.Reconciler, ns, name string) reconcile.Result {
	t.Helper()
	res, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
	if err != nil {
		t.Fatalf("reconciling %s/%s: %v", ns, name, err)
	}
	return res
}

// mustGet reads ns/name from the API server into obj, and fails the test
// if it cannot.
func mustGet[T client.Object](t testing.TB, cl client.Reader, ns, name string, obj T) T {
	t.Helper()
	if err := cl.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, obj); err != nil {
		t.Fatalf("reading %s/%s: %v", ns, name, err)
	}
	return obj
}

// startManager runs mgr until the test ends and waits for its cache.
func startManager(t testing.TB, mgr ctrl.Manager) {
	t.Helper()
	testenv.Go(t, "manager", mgr.Start)
	if !mgr.GetCache().WaitForCacheSync(t.Context()) {
		t.Fatal("the manager's cache did not sync")
	}
}

// newManager returns a manager for the tests of namespaces, through cfg:
// its cache watches those namespaces only, as --watch-namespace makes
// cmd/manager's, and it serves no metrics or probes.
func newManager(t testing.TB, cfg *rest.Config, namespaces ...string) ctrl.Manager {
	t.Helper()
	watched := map[string]cache.Config{}
	for _, ns := range namespaces {
		watched[ns] = cache.Config{}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 testScheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: watched},
		Logger:                 logr.Discard(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return mgr
}

// startMonitoring serves fake over gRPC and returns the Cloud Monitoring
// source that reads it on clock now; both stop when the test ends.
func startMonitoring(t testing.TB, fake *gcpfake.MetricServer, now func() time.Time) gcp.Source {
	t.Helper()
	addr, stop, err := gcpfake.Start(fake)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	ms, err := gcp.NewMonitoringSource(context.Background(), gcp.Options{Endpoint: addr, Insecure: true, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ms.Close() })
	return ms
}
