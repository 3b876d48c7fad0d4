package manifests_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// at walks obj along keys without copying (kustomize's maps hold Go ints,
// which unstructured's Nested helpers cannot copy); nil when absent.
func at(obj any, keys ...string) any {
	for _, k := range keys {
		m, ok := obj.(map[string]any)
		if !ok {
			return nil
		}
		obj = m[k]
	}
	return obj
}

// list is at's value as a slice, nil when it is not one.
func list(obj any, keys ...string) []any {
	l, _ := at(obj, keys...).([]any)
	return l
}

// ingressRule is one NetworkPolicy ingress rule: the namespace labels it
// admits from and the ports it opens.
type ingressRule struct {
	from  []string // "key=value" of each namespaceSelector's matchLabels
	ports []string
}

// ingressOf returns the ingress rules of the NetworkPolicy selecting
// component's pods, failing when there is none.
func ingressOf(t *testing.T, objs []*unstructured.Unstructured, component string) []ingressRule {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != "NetworkPolicy" {
			continue
		}
		if at(o.Object, "spec", "podSelector", "matchLabels", "app.kubernetes.io/component") != component {
			continue
		}
		var out []ingressRule
		for _, r := range list(o.Object, "spec", "ingress") {
			var ir ingressRule
			for _, f := range list(r, "from") {
				labels, _ := at(f, "namespaceSelector", "matchLabels").(map[string]any)
				if at(f, "podSelector") != nil || at(f, "ipBlock") != nil || len(labels) == 0 {
					ir.from = append(ir.from, fmt.Sprintf("%v", f))
					continue
				}
				for k, v := range labels {
					ir.from = append(ir.from, fmt.Sprint(k, "=", v))
				}
			}
			for _, p := range list(r, "ports") {
				ir.ports = append(ir.ports, fmt.Sprint(at(p, "port")))
			}
			out = append(out, ir)
		}
		return out
	}
	t.Fatalf("config/default has no NetworkPolicy for the %s", component)
	return nil
}

// containerPorts returns the named ports and the args of component's
// Deployment's first container.
func containerPorts(t *testing.T, objs []*unstructured.Unstructured, component string) (map[string]string, []string) {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != "Deployment" || o.GetLabels()["app.kubernetes.io/component"] != component {
			continue
		}
		c := list(o.Object, "spec", "template", "spec", "containers")[0]
		ports := map[string]string{}
		for _, p := range list(c, "ports") {
			ports[fmt.Sprint(at(p, "name"))] = fmt.Sprint(at(p, "containerPort"))
		}
		var args []string
		for _, a := range list(c, "args") {
			args = append(args, fmt.Sprint(a))
		}
		return ports, args
	}
	t.Fatalf("config/default has no Deployment for the %s", component)
	return nil, nil
}

// TestNetworkPoliciesSeparateCallersFromOperations checks who may reach what:
// the router's Vertex AI ports only from namespaces labeled
// regionwarden.io/router-client=true, its operations port (metrics, debug,
// probes) and the operator's metrics port only from the monitoring
// namespace, and nothing else on either.
func TestNetworkPoliciesSeparateCallersFromOperations(t *testing.T) {
	objs := kustomize(t, filepath.Join("..", "..", "config", "default"))
	ports, args := containerPorts(t, objs, "router")
	if ports["ops"] == "" || ports["ops"] == ports["http"] || ports["ops"] == ports["grpc"] {
		t.Fatalf("router ports %v: the operations port must be a port of its own", ports)
	}
	if !slices.Contains(args, "--ops-listen=:"+ports["ops"]) {
		t.Errorf("router args %v do not serve the operations endpoints on the ops port %s", args, ports["ops"])
	}
	want := map[string][]string{
		"regionwarden.io/router-client=true":     {"http", "grpc"},
		"kubernetes.io/metadata.name=monitoring": {"ops"},
	}
	checkIngress(t, "router", ingressOf(t, objs, "router"), want)
	checkIngress(t, "operator", ingressOf(t, objs, "operator"), map[string][]string{
		"kubernetes.io/metadata.name=monitoring": {"metrics"},
	})
	for key, err := range dryRunApply(t, objs) {
		t.Errorf("the API server refused %s: %v", key, err)
	}
}

// checkIngress fails unless rules admit exactly want: each namespace label
// to its ports.
func checkIngress(t *testing.T, component string, rules []ingressRule, want map[string][]string) {
	t.Helper()
	got := map[string][]string{}
	for _, r := range rules {
		if len(r.from) == 0 || len(r.ports) == 0 {
			t.Errorf("%s: an ingress rule admits everyone or every port: %+v", component, r)
		}
		for _, f := range r.from {
			got[f] = append(got[f], r.ports...)
		}
	}
	for from, ports := range want {
		slices.Sort(ports)
		slices.Sort(got[from])
		if !slices.Equal(got[from], ports) {
			t.Errorf("%s: from %s opens %v, want %v", component, from, got[from], ports)
		}
	}
	for from := range got {
		if _, ok := want[from]; !ok {
			t.Errorf("%s: ingress admitted from %s, which should not reach it", component, from)
		}
	}
}

// TestKubernetesCallerAuthComponent renders config/default with the
// caller-auth-kubernetes component, as docs/security.md shows: the router
// runs --caller-auth=kubernetes, has a Google identity to call as, and its
// only cluster-wide right is to create TokenReviews; the API server accepts
// it all.
func TestKubernetesCallerAuthComponent(t *testing.T) {
	objs := kustomize(t, filepath.Join("testdata", "caller-auth-kubernetes"))
	_, args := containerPorts(t, objs, "router")
	if !slices.Contains(args, "--caller-auth=kubernetes") {
		t.Errorf("router args %v lack --caller-auth=kubernetes", args)
	}
	var roles, bindings int
	for _, o := range objs {
		if o.GetLabels()["app.kubernetes.io/component"] != "router" {
			continue
		}
		switch o.GetKind() {
		case "ServiceAccount":
			if !strings.HasSuffix(o.GetAnnotations()["iam.gke.io/gcp-service-account"], ".iam.gserviceaccount.com") {
				t.Errorf("the router's ServiceAccount has no Workload Identity annotation: %v", o.GetAnnotations())
			}
		case "ClusterRole":
			roles++
			for _, r := range list(o.Object, "rules") {
				if got := fmt.Sprint(at(r, "apiGroups"), at(r, "resources"), at(r, "verbs")); got != "[authentication.k8s.io] [tokenreviews] [create]" {
					t.Errorf("the router's ClusterRole grants %s; want only create on tokenreviews", got)
				}
			}
		case "ClusterRoleBinding":
			bindings++
			s := list(o.Object, "subjects")[0]
			if at(s, "name") != "regionwarden-router" || at(s, "namespace") != "regionwarden-system" {
				t.Errorf("the router's ClusterRoleBinding binds %v, not the router's ServiceAccount", s)
			}
		}
	}
	if roles != 1 || bindings != 1 {
		t.Errorf("%d ClusterRoles and %d bindings for the router, want 1 and 1", roles, bindings)
	}
	for key, err := range dryRunApply(t, objs) {
		t.Errorf("the API server refused %s: %v", key, err)
	}
}
