// Package manifests_test renders the kustomize bases with kustomize's Go API
// (what `kubectl kustomize` runs) and applies
// the result, as a server-side dry run, to a real kube-apiserver: a manifest
// the API server would refuse fails the tests, not a deployment.
package manifests_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/regionwarden/regionwarden/internal/testenv"
)

var (
	cfg      *rest.Config
	warnings = &warningRecorder{}
)

// warningRecorder keeps the warnings the API server sends, such as Pod
// Security admission's about a pod template that breaks the namespace's level.
type warningRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warningRecorder) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

func (w *warningRecorder) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.msgs
	w.msgs = nil
	return out
}

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &envtest.Environment{}, func(c *rest.Config) error {
		cfg = c
		cfg.WarningHandler = warnings
		return nil
	}))
}

// kustomize renders a kustomization folder as `kubectl kustomize` does.
func kustomize(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var objs []*unstructured.Unstructured
	for _, r := range res.Resources() {
		m, err := r.Map()
		if err != nil {
			t.Fatalf("kustomize build %s: %s: %v", dir, r.CurId(), err)
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
	return objs
}

// dryRunApply applies every object with server-side apply as a dry run and
// returns the refusals by object. Namespaces are applied for real first, with
// their labels, since a dry run cannot place objects in a namespace that does
// not exist, and Pod Security admission judges workloads by the labels of the
// namespace they are in.
func dryRunApply(t *testing.T, objs []*unstructured.Unstructured) map[string]error {
	t.Helper()
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, o := range objs {
		if o.GetKind() == "Namespace" {
			ns := o.DeepCopy()
			ns.SetManagedFields(nil)
			if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(ns), client.FieldOwner("manifests-test"), client.ForceOwnership); err != nil {
				t.Fatalf("applying namespace %s: %v", o.GetName(), err)
			}
		}
	}
	refused := map[string]error{}
	for _, o := range objs {
		if o.GetKind() == "Namespace" {
			continue
		}
		o.SetManagedFields(nil)
		key := o.GetKind() + "/" + o.GetName()
		err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("manifests-test"), client.ForceOwnership, client.DryRunAll)
		if err != nil {
			refused[key] = err
		}
	}
	return refused
}

// podSecurityViolations applies objs as dryRunApply does and returns what
// Pod Security admission said against them: the warnings about workloads
// whose pod template breaks their namespace's level, and the refusals.
func podSecurityViolations(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	warnings.take()
	var out []string
	for key, err := range dryRunApply(t, objs) {
		if strings.Contains(err.Error(), "violates PodSecurity") {
			out = append(out, key+": "+err.Error())
		}
	}
	for _, w := range warnings.take() {
		if strings.Contains(w, "violate PodSecurity") {
			out = append(out, w)
		}
	}
	return out
}

// TestDefaultManifestsApply renders config/default and shows the API server
// accepts every object, with no Pod Security warning about the workloads.
func TestDefaultManifestsApply(t *testing.T) {
	objs := kustomize(t, filepath.Join("..", "..", "config", "default"))
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetKind()]++
	}
	for _, want := range []string{"CustomResourceDefinition", "Deployment", "Service", "PodDisruptionBudget", "NetworkPolicy", "ServiceAccount", "Role", "ClusterRole"} {
		if kinds[want] == 0 {
			t.Errorf("config/default renders no %s; kinds: %v", want, kinds)
		}
	}
	for key, err := range dryRunApply(t, objs) {
		t.Errorf("the API server refused %s: %v", key, err)
	}
	for _, v := range podSecurityViolations(t, objs) {
		t.Errorf("a workload breaks the restricted Pod Security Standard: %s", v)
	}
	for _, o := range objs {
		if o.GetKind() == "Namespace" && o.GetLabels()["pod-security.kubernetes.io/warn"] != "restricted" {
			t.Errorf("namespace %s is not labeled to warn about workloads that break the restricted Pod Security Standard: %v", o.GetName(), o.GetLabels())
		}
	}
}

// TestPodSecurityCatchesPrivilegedFixture shows the Pod Security check bites:
// a privileged Deployment, in a namespace labeled as config/default's is,
// is caught.
func TestPodSecurityCatchesPrivilegedFixture(t *testing.T) {
	v := podSecurityViolations(t, kustomize(t, filepath.Join("testdata", "privileged")))
	if len(v) == 0 {
		t.Fatal("a privileged Deployment in a restricted namespace drew no Pod Security warning")
	}
	if !strings.Contains(strings.Join(v, "\n"), "privileged") {
		t.Errorf("the warning does not name what is forbidden: %v", v)
	}
}

// TestRouterMayOnlyReadConfigMaps checks the router's least privilege: it
// reads ConfigMaps (its routing tables) and EndpointSlices (to count the
// routers of its Service) in its own namespace and can do nothing else, and
// has no Google identity (its callers' own tokens go with their calls).
func TestRouterMayOnlyReadConfigMaps(t *testing.T) {
	objs := kustomize(t, filepath.Join("..", "..", "config", "default"))
	found := false
	for _, o := range objs {
		if o.GetLabels()["app.kubernetes.io/component"] != "router" {
			continue
		}
		switch o.GetKind() {
		case "ServiceAccount":
			if len(o.GetAnnotations()) != 0 {
				t.Errorf("the router's ServiceAccount carries %v; in the default mode it needs no Google identity", o.GetAnnotations())
			}
		case "ClusterRole", "ClusterRoleBinding":
			t.Errorf("the router has cluster-wide RBAC: %s %s", o.GetKind(), o.GetName())
		case "Role":
			found = true
			rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
			for _, r := range rules {
				rule := r.(map[string]any)
				res := fmt.Sprint(rule["apiGroups"], rule["resources"])
				verbs := fmt.Sprint(rule["verbs"])
				if (res != "[] [configmaps]" && res != "[discovery.k8s.io] [endpointslices]") || verbs != "[get list watch]" {
					t.Errorf("router Role grants %s on %s; want only get, list, watch on configmaps and endpointslices", verbs, res)
				}
			}
		}
	}
	if !found {
		t.Fatal("config/default renders no Role for the router")
	}
}

// TestOperatorIsClusterWideOnlyForItsKinds checks the operator's least
// privilege: its ClusterRoles grant only its own API group, and what its
// authenticated metrics endpoint needs (create TokenReviews and
// SubjectAccessReviews; GET /metrics for whoever scrapes it); ConfigMaps,
// events and leases come from Roles in its namespace.
func TestOperatorIsClusterWideOnlyForItsKinds(t *testing.T) {
	objs := kustomize(t, filepath.Join("..", "..", "config", "default"))
	clusterRoles := 0
	allowed := map[string]bool{
		"[authentication.k8s.io] [tokenreviews] [create]":        true,
		"[authorization.k8s.io] [subjectaccessreviews] [create]": true,
		"[] [] [get] [/metrics]":                                 true,
	}
	for _, o := range objs {
		if o.GetKind() != "ClusterRole" {
			continue
		}
		clusterRoles++
		rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
		for _, r := range rules {
			rule := r.(map[string]any)
			groups := fmt.Sprint(rule["apiGroups"])
			if groups == "[capacity.regionwarden.io]" {
				continue
			}
			what := fmt.Sprint(rule["apiGroups"], " ", rule["resources"], " ", rule["verbs"])
			if rule["nonResourceURLs"] != nil {
				what = fmt.Sprint("[] [] ", rule["verbs"], " ", rule["nonResourceURLs"])
			}
			if !allowed[what] {
				t.Errorf("ClusterRole %s grants %s; want only capacity.regionwarden.io cluster-wide, and the metrics endpoint's reviews", o.GetName(), what)
			}
		}
	}
	if clusterRoles == 0 {
		t.Fatal("config/default renders no ClusterRole for the operator")
	}
}

// TestBrokenManifestIsRefused shows the check bites: a fixture with a
// Deployment the API server must refuse is refused.
func TestBrokenManifestIsRefused(t *testing.T) {
	objs := kustomize(t, filepath.Join("testdata", "broken"))
	refused := dryRunApply(t, objs)
	err, ok := refused["Deployment/broken-router"]
	if !ok {
		t.Fatalf("the broken Deployment was accepted; refusals: %v", refused)
	}
	if !strings.Contains(err.Error(), "selector") {
		t.Errorf("refusal does not name the bad field: %v", err)
	}
}
