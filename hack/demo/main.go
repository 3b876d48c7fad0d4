// Command demo brings regionwarden up on this machine and replays the
// provisioned-region incident through it: a real kube-apiserver and etcd, the
// CRDs, the emulated Vertex AI regions (with their Cloud Monitoring), the
// operator verifying the ProvisionedThroughput against that Monitoring and
// rendering the RegionPool's routing table, and the router reading the table
// from the API. Traffic goes through the running router and, for comparison,
// through the count blocklist the outage came from.
//
// It needs nothing but Go. Run it with `make demo`, which builds the binaries
// and the test control plane first. Every process it starts is stopped when it
// ends or on Ctrl-C.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	capacityv1alpha1 "github.com/regionwarden/regionwarden/api/v1alpha1"
	"github.com/regionwarden/regionwarden/internal/emulator"
	"github.com/regionwarden/regionwarden/internal/kubetable"
	"github.com/regionwarden/regionwarden/internal/replay"
	"github.com/regionwarden/regionwarden/router/table"
)

// namespace is where the demo's objects go: "default" of its own control
// plane, or a namespace of its own in a cluster it is given.
var namespace = "default"

type options struct {
	kubeconfig string
	root       string
	bin        string
	work       string
	scenario   string
	seed       uint64
	keep       bool
	timeout    time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.root, "root", ".", "the repository's root")
	flag.StringVar(&o.bin, "bin", "bin", "folder with the manager, router and vertex-emulator binaries")
	flag.StringVar(&o.work, "work", ".demo", "folder for the kubeconfig, logs, results and chart")
	flag.StringVar(&o.scenario, "scenario", "test/scenarios/provisioned-region-incident.yaml", "incident scenario to replay")
	flag.Uint64Var(&o.seed, "seed", 1, "seed of the load and of the emulated faults")
	flag.BoolVar(&o.keep, "keep", false, "keep everything running after the replay, until Ctrl-C, to look around with kubectl")
	flag.DurationVar(&o.timeout, "setup-timeout", 2*time.Minute, "how long the system may take to become ready")
	flag.StringVar(&o.kubeconfig, "cluster", "", "a kubeconfig: run against the cluster of this kubeconfig's current context instead of a local control plane: "+
		"the demo creates a namespace of its own (and the CRDs, if absent), runs the operator (confined to that namespace) and the router on this machine, "+
		"and deletes what it created when it ends")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, o)
	if errors.Is(err, context.Canceled) {
		fmt.Println("\ninterrupted; everything the demo started has been stopped")
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// step prints a numbered step of the demo.
var stepN int

func step(format string, args ...any) {
	stepN++
	fmt.Printf("\n==> %d. %s\n", stepN, fmt.Sprintf(format, args...))
}

func run(ctx context.Context, o options) error {
	work, err := filepath.Abs(o.work)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	var cp *controlPlane
	if o.kubeconfig != "" {
		step("using the cluster of %s (no local control plane)", o.kubeconfig)
		if cp, err = useCluster(ctx, o); err != nil {
			return err
		}
		defer cp.cleanup()
		fmt.Printf("    API server %s; the demo's objects are in namespace %s\n", cp.cfg.Host, namespace)
	} else {
		step("starting a local control plane (kube-apiserver and etcd built from Go sources)")
		if cp, err = localControlPlane(o, work); err != nil {
			return err
		}
		defer cp.cleanup()
		fmt.Printf("    API server %s; CRDs installed\n    to look around from another terminal: export KUBECONFIG=%s\n", cp.cfg.Host, cp.kubeconfig)
	}
	cfg, kubeconfigPath := cp.cfg, cp.kubeconfig
	// Deferred after the control plane's clean-up, so it runs before it:
	// the operator and the router stop before what they work on goes.
	var procs processes
	defer procs.stopAll()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = capacityv1alpha1.AddToScheme(scheme)
	k8s, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}

	step("starting the emulated Vertex AI regions of %s", filepath.Base(o.scenario))
	sc, err := emulator.LoadScenario(filepath.Join(o.root, o.scenario))
	if err != nil {
		return err
	}
	clock := newFollowClock(sc.TimeScale)
	emu, err := emulator.New(sc, emulator.Options{Seed: o.seed, Clock: clock})
	if err != nil {
		return err
	}
	if err := emu.Start(ctx); err != nil {
		return err
	}
	defer func() { _ = emu.Close() }()
	endpoints := map[string]string{}
	for _, r := range emu.Regions() {
		endpoints[r.Name] = r.GRPC
		fmt.Printf("    %-18s %-11s gRPC %s\n", r.Name, r.Tier, r.GRPC)
	}
	fmt.Printf("    Cloud Monitoring   %s\n", emu.MonitoringAddr())

	step("starting the operator (verifying against the emulated Cloud Monitoring)")
	managerMetrics, err := replay.FreeAddr()
	if err != nil {
		return err
	}
	if err := procs.start(ctx, work, "manager", filepath.Join(o.bin, "manager"), []string{"KUBECONFIG=" + kubeconfigPath},
		"--watch-namespace="+namespace, "--gcp-monitoring-endpoint="+emu.MonitoringAddr(), "--gcp-insecure",
		"--metrics-bind-address="+managerMetrics, "--metrics-secure=false", "--health-probe-bind-address=0"); err != nil {
		return err
	}

	step("starting the router (routing table from the API server)")
	routerAddr, err := replay.FreeAddr()
	if err != nil {
		return err
	}
	if err := procs.start(ctx, work, "router", filepath.Join(o.bin, "router"), nil,
		"--listen="+routerAddr, "--table-configmaps="+namespace, "--kubeconfig="+kubeconfigPath,
		"--upstream-insecure", "--allow-endpoint-host=127.0.0.1", fmt.Sprintf("--clock-scale=%g", sc.TimeScale), fmt.Sprintf("--seed=%d", o.seed),
		fmt.Sprintf("--request-timeout=%s", time.Duration(float64(sc.Load.Deadline.Duration)/sc.TimeScale)),
		"--shutdown-delay=0s", "--log-level=warn"); err != nil {
		return err
	}
	routerURL := "http://" + routerAddr
	fmt.Printf("    router at %s (logs in %s)\n", routerURL, work)

	step("applying config/samples (endpoints pointed at the emulated regions)")
	if err := applySamples(ctx, k8s, filepath.Join(o.root, "config", "samples"), endpoints); err != nil {
		return err
	}

	setupCtx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	if err := waitReady(setupCtx, k8s, routerURL, &procs); err != nil {
		return err
	}
	step("the system is up")
	if err := getWide(ctx, cfg, namespace, "provisionedthroughputs", "regionpools"); err != nil {
		return err
	}
	if err := printTable(ctx, k8s); err != nil {
		return err
	}

	step("starting Prometheus: scraping the router and the operator, evaluating config/prometheus/rules.yaml")
	prom, err := startPrometheus(ctx, &procs, o.root, work, sc.TimeScale, routerAddr, managerMetrics)
	if err != nil {
		return err
	}
	fmt.Printf("    Prometheus at %s (scrapes and evaluates every %s, %s of scenario time)\n"+
		"    the rules' durations (for:, ranges, offsets) are divided by the time scale %g: %s\n",
		prom.url, promInterval, time.Duration(float64(promInterval)*sc.TimeScale), sc.TimeScale, filepath.Join(work, "prometheus", "rules.yaml"))

	step("replaying %s through the router and through the count blocklist", sc.Name)
	if err := replayIncident(ctx, sc, routerURL, emu, clock, prom, work, o); err != nil {
		return err
	}

	if o.keep {
		fmt.Printf("\neverything is still running; KUBECONFIG=%s. Press Ctrl-C to stop.\n", kubeconfigPath)
		<-ctx.Done()
	}
	return nil
}

// applySamples creates every object under dir in the demo namespace, with the
// RegionPool's regions pointed at the emulated endpoints.
func applySamples(ctx context.Context, k8s client.Client, dir string, endpoints map[string]string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return err
	}
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			obj := &unstructured.Unstructured{}
			if err := dec.Decode(&obj.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return fmt.Errorf("%s: %w", f, err)
			}
			if len(obj.Object) == 0 {
				continue
			}
			obj.SetNamespace(namespace)
			if obj.GetKind() == "RegionPool" {
				regions, _, _ := unstructured.NestedSlice(obj.Object, "spec", "regions")
				for _, r := range regions {
					m := r.(map[string]any)
					if ep, ok := endpoints[fmt.Sprint(m["name"])]; ok {
						m["endpoint"] = ep
					}
				}
				if err := unstructured.SetNestedSlice(obj.Object, regions, "spec", "regions"); err != nil {
					return err
				}
			}
			if err := k8s.Create(ctx, obj); err != nil {
				return fmt.Errorf("%s: applying %s %s: %w", f, obj.GetKind(), obj.GetName(), err)
			}
			fmt.Printf("    %s/%s created\n", strings.ToLower(obj.GetKind()), obj.GetName())
		}
	}
	return nil
}

// waitReady waits for every ProvisionedThroughput and RegionPool to be Ready
// and the router to have loaded a table.
func waitReady(ctx context.Context, k8s client.Client, routerURL string, procs *processes) error {
	fmt.Print("    waiting for the PT to be verified, the table rendered and the router ready")
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		if err := procs.exited(); err != nil {
			return err
		}
		if ready(ctx, k8s) && replay.RouterReady(ctx, http.DefaultClient, routerURL) == nil {
			fmt.Println(" ... ready")
			return nil
		}
		select {
		case <-ctx.Done():
			fmt.Println()
			return fmt.Errorf("the system did not become ready: %w (see the logs in .demo/)", ctx.Err())
		case <-tick.C:
		}
	}
}

func ready(ctx context.Context, k8s client.Client) bool {
	var pts capacityv1alpha1.ProvisionedThroughputList
	var pools capacityv1alpha1.RegionPoolList
	if k8s.List(ctx, &pts, client.InNamespace(namespace)) != nil || k8s.List(ctx, &pools, client.InNamespace(namespace)) != nil {
		return false
	}
	if len(pts.Items) == 0 || len(pools.Items) == 0 {
		return false
	}
	for _, pt := range pts.Items {
		if !apimeta.IsStatusConditionTrue(pt.Status.Conditions, capacityv1alpha1.ConditionReady) ||
			apimeta.FindStatusCondition(pt.Status.Conditions, capacityv1alpha1.ConditionVerified) == nil {
			return false
		}
	}
	for _, p := range pools.Items {
		if !apimeta.IsStatusConditionTrue(p.Status.Conditions, capacityv1alpha1.ConditionReady) || len(p.Status.ProtectedRegions) == 0 {
			return false
		}
	}
	return true
}

// printTable prints the routing table the operator rendered.
func printTable(ctx context.Context, k8s client.Client) error {
	var pools capacityv1alpha1.RegionPoolList
	if err := k8s.List(ctx, &pools, client.InNamespace(namespace)); err != nil {
		return err
	}
	for _, p := range pools.Items {
		var cm corev1.ConfigMap
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: namespace, Name: p.Status.ConfigMapName}, &cm); err != nil {
			return err
		}
		t, err := table.Parse([]byte(cm.Data[table.DataKey]), table.AllowHosts("127.0.0.1"))
		if err != nil {
			return fmt.Errorf("the rendered table does not parse: %w", err)
		}
		fmt.Printf("\n    ConfigMap %s (hash %s), rendered from RegionPool %s:\n", cm.Name, cm.Annotations[table.AnnotationHash], p.Name)
		fmt.Printf("    %-18s %-12s %-10s %-11s %s\n", "REGION", "TIER", "EJECTABLE", "SOURCE", "CAPACITY")
		for _, pool := range t.Pools {
			for _, r := range pool.Regions {
				capacity := fmt.Sprintf("%g requests/s", r.Capacity.RequestsPerSecond)
				if r.Tier == table.TierProvisioned {
					capacity = fmt.Sprintf("%d GSUs, %g tokens/s", r.Capacity.GSUs, r.Capacity.TokensPerSecond)
				}
				fmt.Printf("    %-18s %-12s %-10t %-11s %s\n", r.Name, r.Tier, r.Ejectable, r.Source, capacity)
			}
			pol, _ := json.Marshal(pool.Policy)
			fmt.Printf("    policy: %s\n", pol)
		}
	}
	return nil
}

// getWide prints what `kubectl get pt,rpool -n ns -o wide` prints: the API
// server renders each resource as a Table with the CRD's printer columns, so
// the demo needs no kubectl of its own.
func getWide(ctx context.Context, cfg *rest.Config, ns string, resources ...string) error {
	gv := capacityv1alpha1.GroupVersion
	fmt.Printf("\n    $ kubectl get pt,rpool -n %s -o wide\n", ns)
	for i, res := range resources {
		tbl, err := kubetable.Get(ctx, cfg, gv.WithResource(res), ns)
		if err != nil {
			return err
		}
		if i > 0 {
			fmt.Println()
		}
		// provisionedthroughputs -> provisionedthroughput.capacity.regionwarden.io
		kind := strings.TrimSuffix(res, "s") + "." + gv.Group
		if err := kubetable.Print(os.Stdout, tbl, kubetable.Options{Wide: true, Kind: kind, Indent: "    "}); err != nil {
			return err
		}
	}
	return nil
}

// localControlPlane starts kube-apiserver and etcd from KUBEBUILDER_ASSETS
// with the CRDs installed, and an admin kubeconfig for it in work.
func localControlPlane(o options, work string) (*controlPlane, error) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		return nil, errors.New("KUBEBUILDER_ASSETS is not set: run `make demo`, which builds the test control plane first")
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(o.root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
	}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("starting the control plane: %w", err)
	}
	stop := func() { _ = env.Stop() }
	admin, err := env.AddUser(envtest.User{Name: "demo-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		stop()
		return nil, err
	}
	kubeconfig, err := admin.KubeConfig()
	if err != nil {
		stop()
		return nil, err
	}
	path := filepath.Join(work, "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		stop()
		return nil, err
	}
	return &controlPlane{cfg: cfg, kubeconfig: path, cleanup: stop}, nil
}
