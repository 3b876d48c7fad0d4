// Command manager runs the regionwarden operator: the controllers that verify
// ProvisionedThroughput against GCP and render each RegionPool's routing table.
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	capacityv1alpha1 "github.com/regionwarden/regionwarden/api/v1alpha1"
	"github.com/regionwarden/regionwarden/controllers"
	"github.com/regionwarden/regionwarden/internal/command"
	"github.com/regionwarden/regionwarden/internal/gcp"
	"github.com/regionwarden/regionwarden/internal/tracing"
)

var scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(capacityv1alpha1.AddToScheme(scheme))
}

func main() {
	command.Main("manager", func(ctx context.Context, _ []string) error { return run(ctx) })
}

// run parses the flags (the standard library's, which the logger's options
// join) and runs the manager until ctx ends.
func run(ctx context.Context) error {
	var (
		metricsAddr          string
		probeAddr            string
		enableLeaderElection bool
		leaderElectionNS     string
		watchNamespace       string
		secureMetrics        bool
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8443", "Address the Prometheus metrics endpoint binds to; \"0\" turns it off.")
	flag.BoolVar(&secureMetrics, "metrics-secure", true, "Serve metrics over HTTPS, only to callers the API server authenticates and authorizes for GET /metrics (TokenReview and SubjectAccessReview). False serves plain HTTP to anyone: for local runs only.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address the /healthz and /readyz probes bind to.")
	flag.BoolVar(&enableLeaderElection, "leader-elect", false, "Elect a leader, so that only one of several replicas reconciles at a time.")
	flag.StringVar(&leaderElectionNS, "leader-election-namespace", "", "Namespace of the leader election lease (default: the pod's namespace).")
	flag.StringVar(&watchNamespace, "watch-namespace", "", "Reconcile objects in these namespaces only, comma-separated; the operator's Role in each of them is then all the namespaced RBAC it needs (default: all namespaces, which needs ConfigMaps and events granted cluster-wide).")
	// ProvisionedThroughput verification against Cloud Monitoring.
	var (
		gcpVerify   bool
		gcpEndpoint string
		gcpInsecure bool
		gcpTimeout  time.Duration
	)
	flag.BoolVar(&gcpVerify, "gcp-verify", true, "Verify ProvisionedThroughput objects against Cloud Monitoring, and discover undeclared Provisioned Throughput for RegionPools. False makes no GCP calls and needs no credentials; objects then show Verified Unknown (Skipped) and are Ready by their term, and discovery is off.")
	flag.StringVar(&gcpEndpoint, "gcp-monitoring-endpoint", gcp.DefaultEndpoint, "Cloud Monitoring API host:port.")
	flag.BoolVar(&gcpInsecure, "gcp-insecure", false, "Dial --gcp-monitoring-endpoint in plaintext without credentials: for emulators and tests only.")
	flag.DurationVar(&gcpTimeout, "gcp-timeout", gcp.DefaultTimeout, "Bound on one project's Cloud Monitoring fetch, all pages included.")
	// End of ProvisionedThroughput verification flags.
	opts := zap.Options{Development: false}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()

	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("setup")

	// Traces of reconciles and Cloud Monitoring calls, configured by the
	// OTEL_* environment variables alone; off when no OTLP endpoint is set.
	tracingOn, shutdownTracing, err := tracing.Setup(context.Background(), "regionwarden-operator")
	if err != nil {
		return err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = shutdownTracing(ctx)
	}()
	log.Info("tracing", "on", tracingOn)

	mgrOpts := ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsOptions(metricsAddr, secureMetrics),
		HealthProbeBindAddress:  probeAddr,
		LeaderElection:          enableLeaderElection,
		LeaderElectionID:        "manager.capacity.regionwarden.io",
		LeaderElectionNamespace: leaderElectionNS,
	}
	if mgrOpts.Cache.DefaultNamespaces, err = watchedNamespaces(watchNamespace); err != nil {
		return err
	}
	// Cloud Monitoring for ProvisionedThroughput verification and RegionPool
	// discovery, which share its answers per project and interval. Credentials
	// are found now, so a manager that cannot verify stops here with advice,
	// not at the first object. Without GCP, facts stays nil.
	var facts controllers.FactsSource
	if gcpInsecure && gcpEndpoint == gcp.DefaultEndpoint {
		return fmt.Errorf("--gcp-insecure needs --gcp-monitoring-endpoint set to an emulator's host:port, never Google's")
	}
	if gcpVerify {
		src, err := gcp.NewMonitoringSource(context.Background(), gcp.Options{Endpoint: gcpEndpoint, Insecure: gcpInsecure, Timeout: gcpTimeout})
		if err != nil {
			return fmt.Errorf("verifying ProvisionedThroughput needs Cloud Monitoring (or --gcp-verify=false): %w", err)
		}
		defer func() { _ = src.Close() }()
		facts = controllers.NewFacts(src, gcpTimeout, nil)
	}
	// End of Cloud Monitoring.

	restConfig, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("finding the cluster (kubeconfig or in-cluster config): %w", err)
	}
	mgr, err := ctrl.NewManager(restConfig, mgrOpts)
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("adding the health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("adding the readiness check: %w", err)
	}

	// The ProvisionedThroughput controller.
	ptReconciler := &controllers.ProvisionedThroughputReconciler{
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorder(controllers.ProvisionedThroughputControllerName + "-controller"),
		Facts:    facts,
	}
	if err := ptReconciler.SetupWithManager(mgr, controller.Options{}); err != nil {
		return fmt.Errorf("setting up the ProvisionedThroughput controller: %w", err)
	}
	// End of the ProvisionedThroughput controller.

	// The RegionPool controller. Its reconciles wait on the API server, not
	// the CPU, so a few run at once. Discovery asks GCP through the facts
	// verification uses, so both share one call per project and interval;
	// with --gcp-verify=false it is off.
	poolReconciler := &controllers.RegionPoolReconciler{
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorder(controllers.RegionPoolControllerName + "-controller"),
		Facts:    facts,
	}
	if err := poolReconciler.SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: 4}); err != nil {
		return fmt.Errorf("setting up the RegionPool controller: %w", err)
	}
	// End of the RegionPool controller.

	log.Info("starting the manager")
	return mgr.Start(ctx)
}

// metricsOptions serves the metrics on addr. When secure, over HTTPS (a
// self-signed certificate) and only to callers the API server authenticates
// and authorizes for GET /metrics, as for any other resource: the caller's
// token is reviewed (TokenReview) and its access to the non-resource URL
// /metrics checked (SubjectAccessReview); config/rbac's metrics-reader
// ClusterRole grants it.
func metricsOptions(addr string, secure bool) metricsserver.Options {
	o := metricsserver.Options{
		BindAddress:   addr,
		SecureServing: secure,
		// HTTP/2 stays off on the metrics endpoint (CVE-2023-44487, CVE-2023-39325).
		TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }},
	}
	if secure {
		o.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return o
}

// watchedNamespaces is the manager cache's namespaces for --watch-namespace, a
// comma-separated list: nil (every namespace) for an empty one. The cache
// then lists and watches in those namespaces alone, so a Role in each of them
// grants all the namespaced access it needs.
func watchedNamespaces(list string) (map[string]cache.Config, error) {
	if strings.TrimSpace(list) == "" {
		return nil, nil
	}
	out := map[string]cache.Config{}
	for _, ns := range strings.Split(list, ",") {
		ns = strings.TrimSpace(ns)
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return nil, fmt.Errorf("--watch-namespace: %q is not a namespace name: %s", ns, strings.Join(errs, "; "))
		}
		out[ns] = cache.Config{}
	}
	return out, nil
}
