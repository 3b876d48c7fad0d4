package v1alpha1_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/regionwarden/regionwarden/internal/testenv"
)

// goodPT is a valid ProvisionedThroughput that each bad case breaks in one place.
func goodPT(ns string) map[string]any {
	return object("ProvisionedThroughput", "pt-", ns, map[string]any{
		"project":  "demo-project",
		"location": "europe-west1",
		"model":    "gemini-2.5-flash-lite",
		"gsus":     int64(10),
		"term": map[string]any{
			"start": "2026-01-01T00:00:00Z",
			"end":   "2027-01-01T00:00:00Z",
		},
	})
}

// goodPool is a valid RegionPool that each bad case breaks in one place.
func goodPool(ns string) map[string]any {
	return object("RegionPool", "pool-", ns, map[string]any{
		"project": "demo-project",
		"model":   "gemini-2.5-flash-lite",
		"regions": []any{
			map[string]any{"name": "europe-west1"},
			map[string]any{"name": "europe-west4", "requestsPerSecond": int64(8)},
		},
	})
}

// object is an object of the API's kind with a generated name in ns.
func object(kind, generateName, ns string, spec map[string]any) map[string]any {
	return map[string]any{
		"apiVersion": "capacity.regionwarden.io/v1alpha1",
		"kind":       kind,
		"metadata":   map[string]any{"generateName": generateName, "namespace": ns},
		"spec":       spec,
	}
}

// set writes value at a dotted path of obj, creating maps on the way.
func set(obj map[string]any, path string, value any) {
	parts := strings.Split(path, ".")
	m := obj
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[parts[len(parts)-1]] = value
}

func del(obj map[string]any, path string) {
	parts := strings.Split(path, ".")
	m := obj
	for _, p := range parts[:len(parts)-1] {
		m = m[p].(map[string]any)
	}
	delete(m, parts[len(parts)-1])
}

// setTo is a mutation that writes value at path (see set).
func setTo(path string, value any) func(map[string]any) {
	return func(o map[string]any) { set(o, path, value) }
}

// deleted is a mutation that deletes path (see del).
func deleted(path string) func(map[string]any) {
	return func(o map[string]any) { del(o, path) }
}

func manyRegions(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = map[string]any{"name": fmt.Sprintf("europe-west%d", i+1)}
	}
	return out
}

// TestBadObjectsAreRefused creates objects that break one rule each and checks
// that the API server refuses them with a message naming the field at fault.
func TestBadObjectsAreRefused(t *testing.T) {
	ns := testenv.Namespace(t, k8s)
	cases := []struct {
		name   string
		base   func(string) map[string]any
		mutate func(map[string]any)
		field  string
	}{
		{"term end before start", goodPT, setTo("spec.term.end", "2025-06-01T00:00:00Z"), "spec.term.end"},
		{"term end equal to start", goodPT, setTo("spec.term.end", "2026-01-01T00:00:00Z"), "spec.term.end"},
		{"location not a location", goodPT, setTo("spec.location", "Europe_West1"), "spec.location"},
		{"project with capitals", goodPT, setTo("spec.project", "Demo_Project"), "spec.project"},
		{"no model", goodPT, deleted("spec.model"), "spec.model"},
		{"model with a path", goodPool, setTo("spec.model", "claude-sonnet-4-5/x"), "spec.model"},
		{"model ending in its version's @", goodPT, setTo("spec.model", "claude-sonnet-4-5@"), "spec.model"},
		{"zero GSUs", goodPT, setTo("spec.gsus", int64(0)), "spec.gsus"},
		{"too many GSUs", goodPT, setTo("spec.gsus", int64(100001)), "spec.gsus"},
		{"unknown verification policy", goodPT, setTo("spec.verification.policy", "Sometimes"), "spec.verification.policy"},
		{"malformed interval", goodPT, setTo("spec.verification.interval", "5 minutes"), "spec.verification.interval"},
		{"interval under 30s", goodPT, setTo("spec.verification.interval", "10s"), "spec.verification.interval"},
		{"malformed grace period", goodPT, setTo("spec.verification.gracePeriod", "one hour"), "spec.verification.gracePeriod"},
		{"duplicate region", goodPool, func(o map[string]any) {
			set(o, "spec.regions", []any{
				map[string]any{"name": "europe-west1"},
				map[string]any{"name": "europe-west1", "requestsPerSecond": int64(3)},
			})
		}, "spec.regions[1]"},
		{"no regions", goodPool, setTo("spec.regions", []any{}), "spec.regions"},
		{"33 regions", goodPool, setTo("spec.regions", manyRegions(33)), "spec.regions"},
		{"region not a location", goodPool, setTo("spec.regions", []any{map[string]any{"name": "EU West"}}), "spec.regions[0].name"},
		{"zero requests per second", goodPool, setTo("spec.regions", []any{map[string]any{"name": "europe-west4", "requestsPerSecond": int64(0)}}), "spec.regions[0].requestsPerSecond"},
		{"endpoint without port", goodPool, setTo("spec.regions", []any{map[string]any{"name": "europe-west4", "endpoint": "localhost"}}), "spec.regions[0].endpoint"},
		{"endpoint off Google", goodPool, setTo("spec.regions", []any{map[string]any{"name": "europe-west4", "endpoint": "attacker.example.com:443"}}), "spec.regions[0].endpoint: Invalid value: \"attacker.example.com:443\": endpoint must be a Google API host"},
		{"endpoint under a Google-looking prefix", goodPool, setTo("spec.regions", []any{map[string]any{"name": "europe-west4", "endpoint": "aiplatform.googleapis.com.attacker.example:443"}}), "spec.regions[0].endpoint"},
		{"endpoint on a private address", goodPool, setTo("spec.regions", []any{map[string]any{"name": "europe-west4", "endpoint": "10.0.0.7:443"}}), "spec.regions[0].endpoint"},
		{"unknown caller ceiling", goodPool, setTo("spec.callers.maxPriority", "Urgent"), "spec.callers.maxPriority"},
		{"caller without namespace", goodPool, setTo("spec.callers.serviceAccounts", []any{map[string]any{"name": "frontend"}}), "spec.callers.serviceAccounts[0].name"},
		{"caller with a wildcard name part", goodPool, setTo("spec.callers.serviceAccounts", []any{map[string]any{"name": "chat/front*"}}), "spec.callers.serviceAccounts[0].name"},
		{"caller namespace too long", goodPool, setTo("spec.callers.serviceAccounts", []any{map[string]any{"name": strings.Repeat("a", 64) + "/x"}}), "the namespace part of name must be at most 63 characters"},
		{"caller listed twice", goodPool, setTo("spec.callers.serviceAccounts", []any{map[string]any{"name": "chat/*"}, map[string]any{"name": "chat/*", "maxPriority": "Critical"}}), "spec.callers.serviceAccounts[1]"},
		{"unknown caller priority", goodPool, setTo("spec.callers.serviceAccounts", []any{map[string]any{"name": "chat/*", "maxPriority": "critical"}}), "spec.callers.serviceAccounts[0].maxPriority"},
		{"failure rate threshold zero", goodPool, setTo("spec.policy.ejection.failureRateThreshold", 0.0), "spec.policy.ejection.failureRateThreshold"},
		{"failure rate threshold over one", goodPool, setTo("spec.policy.ejection.failureRateThreshold", 1.5), "spec.policy.ejection.failureRateThreshold"},
		{"max ejected percent 100", goodPool, setTo("spec.policy.ejection.maxEjectedPercent", int64(100)), "spec.policy.ejection.maxEjectedPercent"},
		{"max ejection time under base", goodPool, func(o map[string]any) {
			set(o, "spec.policy.ejection.baseEjectionTime", "2m")
			set(o, "spec.policy.ejection.maxEjectionTime", "1m")
		}, "spec.policy.ejection.maxEjectionTime"},
		{"malformed ejection interval", goodPool, setTo("spec.policy.ejection.interval", "ten seconds"), "spec.policy.ejection.interval"},
		{"six attempts", goodPool, setTo("spec.policy.retry.maxAttempts", int64(6)), "spec.policy.retry.maxAttempts"},
		{"retry budget over 100", goodPool, setTo("spec.policy.retry.budgetPercent", int64(101)), "spec.policy.retry.budgetPercent"},
		{"unknown request type", goodPool, setTo("spec.policy.provisioned.requestType", "Shared"), "spec.policy.provisioned.requestType"},
		{"provisioned window under a second", goodPool, setTo("spec.policy.provisioned.window", "500ms"), "spec.policy.provisioned.window: Invalid value: \"500ms\": window must be between 1s and 2000s"},
		{"provisioned window over 2000s", goodPool, setTo("spec.policy.provisioned.window", "1h"), "spec.policy.provisioned.window: Invalid value: \"1h\": window must be between 1s and 2000s"},
		{"malformed provisioned window", goodPool, setTo("spec.policy.provisioned.window", "forty seconds"), "spec.policy.provisioned.window"},
		{"unknown pay-as-you-go tier of a region", goodPool, setTo("spec.regions", []any{map[string]any{"name": "global", "payGoTiers": []any{"Standard", "Express"}}}), "spec.regions[0].payGoTiers[1]"},
		{"pay-as-you-go tier of a region listed twice", goodPool, setTo("spec.regions", []any{map[string]any{"name": "global", "payGoTiers": []any{"Priority", "Priority"}}}), "spec.regions[0].payGoTiers[1]"},
		{"tier spelt as the routing table spells it", goodPool, setTo("spec.policy.payGo.critical", []any{"priority"}), "spec.policy.payGo.critical[0]"},
		{"critical tier listed twice", goodPool, setTo("spec.policy.payGo.critical", []any{"Priority", "Standard", "Priority"}), "spec.policy.payGo.critical: Invalid value: a tier is listed once"},
		{"no tier for sheddable calls", goodPool, setTo("spec.policy.payGo.sheddable", []any{}), "spec.policy.payGo.sheddable"},
		{"four default tiers", goodPool, setTo("spec.policy.payGo.default", []any{"Standard", "Flex", "Priority", "Standard"}), "spec.policy.payGo.default"},
		{"configmap name not a name", goodPool, setTo("spec.output.configMapName", "Routing_Table"), "spec.output.configMapName"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := tc.base(ns)
			tc.mutate(obj)
			err := k8s.Create(context.Background(), &unstructured.Unstructured{Object: obj})
			if err == nil {
				t.Fatalf("the API server accepted a bad object; want a refusal naming %s", tc.field)
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want an Invalid refusal, got %v", err)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("refusal does not name %s: %v", tc.field, err)
			}
		})
	}
}

// TestEndpointsAccepted checks that the endpoints a pool may name are
// accepted: Google's hosts, Private Service Connect names under
// googleapis.com, and loopback addresses for emulators beside the router.
func TestEndpointsAccepted(t *testing.T) {
	ns := testenv.Namespace(t, k8s)
	for _, ep := range []string{
		"europe-west4-aiplatform.googleapis.com:443",
		"aiplatform-vialink1.p.googleapis.com:443",
		"aiplatform.europe-west4.p.rep.googleapis.com:443",
		"AIPlatform.GoogleAPIs.com:443",
		"127.0.0.1:9000",
		"localhost:9000",
	} {
		obj := goodPool(ns)
		set(obj, "spec.regions", []any{map[string]any{"name": "europe-west4", "endpoint": ep}})
		if err := k8s.Create(context.Background(), &unstructured.Unstructured{Object: obj}); err != nil {
			t.Errorf("endpoint %s refused: %v", ep, err)
		}
	}
}

// TestPartnerModelsAccepted checks that a pool and a PT may name a partner
// model of Vertex's Model Garden by the ID its calls' path names: its version
// after an "@", as Anthropic's Claude models are named on Vertex AI.
func TestPartnerModelsAccepted(t *testing.T) {
	ns := testenv.Namespace(t, k8s)
	for _, base := range []func(string) map[string]any{goodPool, goodPT} {
		obj := base(ns)
		set(obj, "spec.publisher", "anthropic")
		set(obj, "spec.model", "claude-sonnet-4-5@20250929")
		if err := k8s.Create(context.Background(), &unstructured.Unstructured{Object: obj}); err != nil {
			t.Errorf("%s of claude-sonnet-4-5@20250929 refused: %v", obj["kind"], err)
		}
	}
}

// TestIdentityIsImmutable shows that a ProvisionedThroughput cannot be moved to
// another project, location, publisher or model: that is another commitment.
func TestIdentityIsImmutable(t *testing.T) {
	ns := testenv.Namespace(t, k8s)
	ctx := context.Background()
	obj := &unstructured.Unstructured{Object: goodPT(ns)}
	if err := k8s.Create(ctx, obj); err != nil {
		t.Fatalf("creating: %v", err)
	}
	for field, value := range map[string]string{
		"project":   "other-project",
		"location":  "europe-west4",
		"publisher": "anthropic",
		"model":     "gemini-2.5-pro",
	} {
		t.Run(field, func(t *testing.T) {
			changed := obj.DeepCopy()
			if err := unstructured.SetNestedField(changed.Object, value, "spec", field); err != nil {
				t.Fatal(err)
			}
			err := k8s.Update(ctx, changed)
			if err == nil {
				t.Fatalf("the API server accepted a change of spec.%s", field)
			}
			if !strings.Contains(err.Error(), "spec."+field) || !strings.Contains(err.Error(), "immutable") {
				t.Fatalf("refusal does not say spec.%s is immutable: %v", field, err)
			}
		})
	}
	t.Run("gsus can change", func(t *testing.T) {
		changed := obj.DeepCopy()
		if err := unstructured.SetNestedField(changed.Object, int64(20), "spec", "gsus"); err != nil {
			t.Fatal(err)
		}
		if err := k8s.Update(ctx, changed); err != nil {
			t.Fatalf("changing the GSUs bought was refused: %v", err)
		}
	})
}
