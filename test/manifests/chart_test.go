package manifests_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// The Helm chart is tested the way Helm uses it, through the Helm Go SDK:
// rendered as `helm template` renders it (the chart's CRDs from crds/, its
// templates through Helm's engine), compared with what kustomize renders
// of config/default for the same settings, applied to the API server as a
// server-side dry run, and linted as `helm lint` lints it.

var chartDir = filepath.Join("..", "..", "charts", "regionwarden")

// The release as the comparison with config/default installs it: its name
// gives the same "regionwarden-" prefix, its namespace the same namespace.
const (
	releaseName      = "regionwarden"
	releaseNamespace = "regionwarden-system"
)

// helmLabels are the labels the chart adds to every object, which
// config/default does not set: the comparison leaves them out.
var helmLabels = []string{"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "app.kubernetes.io/version"}

// helmTemplate renders the chart with values (on top of its values.yaml) as
// `helm template --include-crds` does: the CRDs of crds/ first, then every
// template but the partials and NOTES.txt.
func helmTemplate(t *testing.T, values map[string]any) []*unstructured.Unstructured {
	t.Helper()
	c, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("loading the chart: %v", err)
	}
	vals, err := chartutil.ToRenderValues(c, values, chartutil.ReleaseOptions{
		Name: releaseName, Namespace: releaseNamespace, IsInstall: true, Revision: 1,
	}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatalf("chart values: %v", err)
	}
	rendered, err := engine.Render(c, vals)
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	var objs []*unstructured.Unstructured
	for _, crd := range c.CRDObjects() {
		objs = append(objs, decodeYAML(t, crd.Filename, crd.File.Data)...)
	}
	for _, name := range slices.Sorted(maps.Keys(rendered)) {
		if strings.HasSuffix(name, "NOTES.txt") || strings.HasPrefix(filepath.Base(name), "_") {
			continue
		}
		objs = append(objs, decodeYAML(t, name, []byte(rendered[name]))...)
	}
	return objs
}

// renderError is the error rendering the chart with values gives, or nil.
func renderError(values map[string]any) error {
	c, err := loader.Load(chartDir)
	if err != nil {
		return err
	}
	vals, err := chartutil.ToRenderValues(c, values, chartutil.ReleaseOptions{Name: releaseName, Namespace: releaseNamespace, IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		return err
	}
	_, err = engine.Render(c, vals)
	return err
}

func decodeYAML(t *testing.T, name string, data []byte) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("%s: %v", name, err)
		}
		if len(m) > 0 {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
}

func objectKey(o *unstructured.Unstructured) string {
	return o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
}

// byKey maps objects by kind, namespace and name, failing on a duplicate.
func byKey(t *testing.T, what string, objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	t.Helper()
	out := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		k := objectKey(o)
		if _, dup := out[k]; dup {
			t.Fatalf("%s renders %s twice", what, k)
		}
		out[k] = o
	}
	return out
}

// withoutHelmLabels is o without the labels the chart adds.
func withoutHelmLabels(o *unstructured.Unstructured) *unstructured.Unstructured {
	o = o.DeepCopy()
	labels := o.GetLabels()
	for _, l := range helmLabels {
		delete(labels, l)
	}
	o.SetLabels(labels)
	return o
}

// asJSON is o as the API server receives it, JSON: numbers compare as
// numbers whichever YAML decoder read them.
func asJSON(t *testing.T, o *unstructured.Unstructured) map[string]any {
	t.Helper()
	b, err := json.Marshal(o.Object)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestChartRendersConfigDefault renders the chart with its default values
// and config/default with kustomize, and finds the same objects, field for
// field, but for the labels Helm adds, the Namespace, which Helm creates
// (`--create-namespace`) rather than the chart, and the label config/default
// puts on the CRDs, which Helm installs untemplated.
func TestChartRendersConfigDefault(t *testing.T) {
	chartObjs := byKey(t, "the chart", helmTemplate(t, nil))
	kustomized := byKey(t, "config/default", kustomize(t, filepath.Join("..", "..", "config", "default")))
	delete(kustomized, "Namespace /"+releaseNamespace)

	for _, k := range slices.Sorted(maps.Keys(kustomized)) {
		c, ok := chartObjs[k]
		if !ok {
			t.Errorf("the chart does not render %s", k)
			continue
		}
		if c.GetKind() == "CustomResourceDefinition" {
			// Helm installs crds/ as they are, untemplated: the generated
			// CRDs, without the part-of label config/default adds.
			want := asJSON(t, kustomized[k])
			delete(want["metadata"].(map[string]any), "labels")
			if diff := cmp.Diff(want, asJSON(t, c)); diff != "" {
				t.Errorf("%s differs between config/default (-) and the chart (+):\n%s", k, diff)
			}
			continue
		}
		for _, l := range helmLabels {
			if _, ok := c.GetLabels()[l]; !ok {
				t.Errorf("the chart's %s lacks the label %s", k, l)
			}
		}
		if diff := cmp.Diff(asJSON(t, kustomized[k]), asJSON(t, withoutHelmLabels(c))); diff != "" {
			t.Errorf("%s differs between config/default (-) and the chart (+):\n%s", k, diff)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(chartObjs)) {
		if _, ok := kustomized[k]; !ok {
			t.Errorf("the chart renders %s, which config/default does not", k)
		}
	}
}

// chartSettings are values a user sets, each changing what the chart
// renders; every one must render objects the API server accepts.
var chartSettings = map[string]map[string]any{
	"defaults": nil,
	"everything set": {
		"fullnameOverride": "rw",
		"operator": map[string]any{
			"image":           map[string]any{"repository": "registry.example/regionwarden/manager", "tag": "v1.2.3", "pullPolicy": "IfNotPresent"},
			"replicas":        3,
			"watchNamespaces": []any{releaseNamespace, "team-a", "team-b"},
			"serviceAccount":  map[string]any{"annotations": map[string]any{"iam.gke.io/gcp-service-account": "rw-operator@acme-prod.iam.gserviceaccount.com"}},
			"resources":       map[string]any{"requests": map[string]any{"cpu": "100m", "memory": "128Mi"}, "limits": map[string]any{"memory": "512Mi"}},
			"extraArgs":       []any{"--gcp-verify=false"},
		},
		"router": map[string]any{
			"image":              map[string]any{"repository": "registry.example/regionwarden/router", "tag": "v1.2.3"},
			"replicas":           4,
			"callerAuth":         "kubernetes",
			"peersService":       false,
			"shareStore":         "rediss://valkey.regionwarden-system.svc:6379/0",
			"shareStorePassword": map[string]any{"secretName": "valkey-router", "key": "pw"},
			"serviceAccount":     map[string]any{"annotations": map[string]any{"iam.gke.io/gcp-service-account": "rw-router@acme-prod.iam.gserviceaccount.com"}},
			"resources":          map[string]any{"requests": map[string]any{"cpu": "500m", "memory": "256Mi"}, "limits": map[string]any{"memory": "1Gi"}},
			"hpa":                map[string]any{"enabled": false},
			"extraArgs":          []any{"--log-level=debug"},
		},
		"networkPolicy": map[string]any{
			"clientNamespaceLabels":  map[string]any{"team": "inference"},
			"metricsNamespaceLabels": map[string]any{"kubernetes.io/metadata.name": "observability"},
		},
	},
	"no network policy, autoscaler on": {
		"networkPolicy": map[string]any{"enabled": false},
		"router":        map[string]any{"hpa": map[string]any{"enabled": true, "minReplicas": 3, "maxReplicas": 20}},
	},
}

// TestChartAppliesAsDryRun applies what the chart renders, for each of
// chartSettings, to the API server as a server-side dry run: the API server
// accepts every object, with no Pod Security warning. Namespaces the chart
// writes into are created first, as `helm install --create-namespace` and a
// team's own namespaces would be, labeled restricted as config/default's is.
func TestChartAppliesAsDryRun(t *testing.T) {
	for name, values := range chartSettings {
		t.Run(name, func(t *testing.T) {
			objs := helmTemplate(t, values)
			namespaces := map[string]bool{}
			for _, o := range objs {
				if ns := o.GetNamespace(); ns != "" {
					namespaces[ns] = true
				}
			}
			for ns := range namespaces {
				n := &unstructured.Unstructured{}
				n.SetAPIVersion("v1")
				n.SetKind("Namespace")
				n.SetName(ns)
				n.SetLabels(map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})
				objs = append([]*unstructured.Unstructured{n}, objs...)
			}
			warnings.take()
			for key, err := range dryRunApply(t, objs) {
				t.Errorf("the API server refused %s: %v", key, err)
			}
			for _, w := range warnings.take() {
				if strings.Contains(w, "violate PodSecurity") {
					t.Errorf("a workload breaks the restricted Pod Security Standard: %s", w)
				}
			}
		})
	}
}

// TestChartValuesReachTheObjects checks that the values a user sets land
// where they should, in the objects the chart renders.
func TestChartValuesReachTheObjects(t *testing.T) {
	objs := byKey(t, "the chart", helmTemplate(t, chartSettings["everything set"]))
	get := func(key string) *unstructured.Unstructured {
		t.Helper()
		o, ok := objs[key]
		if !ok {
			t.Fatalf("the chart renders no %s; it renders %v", key, slices.Sorted(maps.Keys(objs)))
		}
		return o
	}
	container := func(key string) map[string]any {
		t.Helper()
		cs, _, _ := unstructured.NestedSlice(get(key).Object, "spec", "template", "spec", "containers")
		return cs[0].(map[string]any)
	}
	manager := container("Deployment " + releaseNamespace + "/rw-controller-manager")
	router := container("Deployment " + releaseNamespace + "/rw-router")
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"operator image", manager["image"], "registry.example/regionwarden/manager:v1.2.3"},
		{"operator pull policy", manager["imagePullPolicy"], "IfNotPresent"},
		{"operator args", fmt.Sprint(manager["args"]), "[--leader-elect --watch-namespace=regionwarden-system,team-a,team-b --metrics-bind-address=:8443 --health-probe-bind-address=:8081 --gcp-verify=false]"},
		{"router image", router["image"], "registry.example/regionwarden/router:v1.2.3"},
		{"router args", fmt.Sprint(router["args"]), "[--listen=:8080 --grpc-listen=:8081 --ops-listen=:9090 --table-configmaps=$(POD_NAMESPACE) --caller-auth=kubernetes --share-store=rediss://valkey.regionwarden-system.svc:6379/0 --log-level=debug]"},
		{"router store password", fmt.Sprint(router["env"].([]any)[0]), "map[name:REGIONWARDEN_SHARE_STORE_PASSWORD valueFrom:map[secretKeyRef:map[key:pw name:valkey-router]]]"},
		{"router memory limit", fmt.Sprint(router["resources"]), "map[limits:map[memory:1Gi] requests:map[cpu:500m memory:256Mi]]"},
		{"operator replicas", get("Deployment " + releaseNamespace + "/rw-controller-manager").Object["spec"].(map[string]any)["replicas"], float64(3)},
		{"router replicas without an autoscaler", get("Deployment " + releaseNamespace + "/rw-router").Object["spec"].(map[string]any)["replicas"], float64(4)},
		{"router Workload Identity", get("ServiceAccount " + releaseNamespace + "/rw-router").GetAnnotations()["iam.gke.io/gcp-service-account"], "rw-router@acme-prod.iam.gserviceaccount.com"},
		{"operator Workload Identity", get("ServiceAccount " + releaseNamespace + "/rw-controller-manager").GetAnnotations()["iam.gke.io/gcp-service-account"], "rw-operator@acme-prod.iam.gserviceaccount.com"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
	for _, ns := range []string{"team-a", "team-b"} {
		get("Role " + ns + "/rw-manager-role")
		get("RoleBinding " + ns + "/rw-manager-rolebinding")
	}
	get("ClusterRoleBinding /rw-router-tokenreview")
	if _, ok := objs["HorizontalPodAutoscaler "+releaseNamespace+"/rw-router"]; ok {
		t.Error("the chart renders an autoscaler with router.hpa.enabled false")
	}
	from, _, _ := unstructured.NestedSlice(get("NetworkPolicy "+releaseNamespace+"/rw-router").Object, "spec", "ingress")
	if got := fmt.Sprint(from); !strings.Contains(got, "team:inference") || !strings.Contains(got, "kubernetes.io/metadata.name:observability") {
		t.Errorf("router NetworkPolicy ingress = %s, want the namespaces labeled as set", got)
	}
	from, _, _ = unstructured.NestedSlice(get("NetworkPolicy "+releaseNamespace+"/rw-controller-manager").Object, "spec", "ingress")
	if got := fmt.Sprint(from); !strings.Contains(got, "kubernetes.io/metadata.name:observability") {
		t.Errorf("operator NetworkPolicy ingress = %s, want the metrics namespaces as set", got)
	}

	if err := renderError(map[string]any{"router": map[string]any{"callerAuth": "Kubernetes"}}); err == nil || !strings.Contains(err.Error(), "router.callerAuth") {
		t.Errorf("a bad router.callerAuth renders, or its error names no value: %v", err)
	}
}

// TestChartLint lints the chart as `helm lint --strict` does and finds
// nothing worse than information.
func TestChartLint(t *testing.T) {
	for name, values := range chartSettings {
		res := lint.All(chartDir, values, releaseNamespace, true)
		for _, m := range res.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("%s: helm lint: %s", name, m.Error())
			}
		}
	}
}

// TestChartCRDsAreTheGeneratedOnes checks that the chart installs the CRDs
// controller-gen writes (make chart-crds copies them; make verify checks the
// copy): Helm installs crds/ as they are.
func TestChartCRDsAreTheGeneratedOnes(t *testing.T) {
	c, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	want, err := filepath.Glob(filepath.Join("..", "..", "config", "crd", "bases", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]byte{}
	for _, crd := range c.CRDObjects() {
		got[filepath.Base(crd.Filename)] = crd.File.Data
	}
	for _, f := range want {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[filepath.Base(f)], data) {
			t.Errorf("charts/regionwarden/crds/%s differs from %s: run make chart-crds", filepath.Base(f), f)
		}
	}
	if len(got) != len(want) {
		t.Errorf("the chart has %d CRDs, config/crd/bases %d", len(got), len(want))
	}
}
