package v1alpha1_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	capacityv1alpha1 "github.com/regionwarden/regionwarden/api/v1alpha1"
	"github.com/regionwarden/regionwarden/internal/testenv"
	"github.com/regionwarden/regionwarden/router/table"
)

// TestSamplesAreAccepted creates every object under config/samples/ in the
// real API server, and every object of this API in the YAML examples of
// docs/: the samples and examples the docs point at must apply as they are.
func TestSamplesAreAccepted(t *testing.T) {
	ns := testenv.Namespace(t, k8s)
	files, err := filepath.Glob(filepath.Join("..", "..", "config", "samples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var docs []string
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(data))
	}
	samples := len(docs)
	pages, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, page := range pages {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, block := range yamlBlocks(string(data)) {
			if strings.Contains(block, "apiVersion: "+capacityv1alpha1.GroupVersion.String()) {
				docs = append(docs, block)
			}
		}
	}
	created := 0
	for i, data := range docs {
		where := fmt.Sprintf("sample %d", i)
		if i >= samples {
			where = fmt.Sprintf("docs example %d", i-samples)
		}
		for _, doc := range strings.Split(data, "\n---") {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			obj := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			if len(obj.Object) == 0 {
				continue
			}
			obj.SetNamespace(ns)
			if err := k8s.Create(context.Background(), obj); err != nil {
				t.Errorf("%s: the API server refused %s: %v", where, obj.GetName(), err)
				continue
			}
			created++
		}
	}
	if created < 4 {
		t.Fatalf("created %d objects; want at least the samples' ProvisionedThroughput and RegionPool, and the docs' Claude pair", created)
	}
}

// yamlBlocks are the fenced yaml code blocks of a Markdown page.
func yamlBlocks(page string) []string {
	var out []string
	for {
		_, rest, ok := strings.Cut(page, "```yaml\n")
		if !ok {
			return out
		}
		block, after, _ := strings.Cut(rest, "```")
		out = append(out, block)
		page = after
	}
}

// TestDefaultsAreAppliedByTheAPIServer reads back what the API server filled in
// and checks it against the defaults the router applies to a routing table, so
// the two places that state defaults cannot drift apart.
func TestDefaultsAreAppliedByTheAPIServer(t *testing.T) {
	ns := testenv.Namespace(t, k8s)
	ctx := context.Background()

	pt := &unstructured.Unstructured{Object: goodPT(ns)}
	unstructured.RemoveNestedField(pt.Object, "spec", "term")
	if err := k8s.Create(ctx, pt); err != nil {
		t.Fatal(err)
	}
	var gotPT capacityv1alpha1.ProvisionedThroughput
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: pt.GetName()}, &gotPT); err != nil {
		t.Fatal(err)
	}
	v := gotPT.Spec.Verification
	switch {
	case gotPT.Spec.Publisher != capacityv1alpha1.DefaultPublisher:
		t.Errorf("publisher = %q, want %q", gotPT.Spec.Publisher, capacityv1alpha1.DefaultPublisher)
	case v.Policy != capacityv1alpha1.VerificationWarn:
		t.Errorf("verification.policy = %q, want Warn", v.Policy)
	case v.Interval == nil || v.Interval.Duration != capacityv1alpha1.DefaultVerificationInterval:
		t.Errorf("verification.interval = %v, want %v", v.Interval, capacityv1alpha1.DefaultVerificationInterval)
	case v.GracePeriod == nil || v.GracePeriod.Duration != capacityv1alpha1.DefaultGracePeriod:
		t.Errorf("verification.gracePeriod = %v, want %v", v.GracePeriod, capacityv1alpha1.DefaultGracePeriod)
	}

	pool := &unstructured.Unstructured{Object: goodPool(ns)}
	if err := k8s.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	var got capacityv1alpha1.RegionPool
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: pool.GetName()}, &got); err != nil {
		t.Fatal(err)
	}
	want := table.DefaultPolicy()
	e, r := got.Spec.Policy.Ejection, got.Spec.Policy.Retry
	checks := []struct {
		field     string
		got, want any
	}{
		{"publisher", got.Spec.Publisher, table.DefaultPublisher},
		{"ejection.failureRateThreshold", e.FailureRateThreshold, want.Ejection.FailureRateThreshold},
		{"ejection.minRequests", int(e.MinRequests), want.Ejection.MinRequests},
		{"ejection.interval", dur(e.Interval), want.Ejection.Interval.Duration},
		{"ejection.baseEjectionTime", dur(e.BaseEjectionTime), want.Ejection.BaseEjectionTime.Duration},
		{"ejection.maxEjectionTime", dur(e.MaxEjectionTime), want.Ejection.MaxEjectionTime.Duration},
		{"ejection.maxEjectedPercent", deref(e.MaxEjectedPercent), *want.Ejection.MaxEjectedPercent},
		{"retry.maxAttempts", int(r.MaxAttempts), want.Retry.MaxAttempts},
		{"retry.budgetPercent", deref(r.BudgetPercent), *want.Retry.BudgetPercent},
		{"retry.minRetriesPerSecond", deref(r.MinRetriesPerSecond), *want.Retry.MinRetriesPerSecond},
		{"provisioned.requestType", strings.ToLower(string(got.Spec.Policy.Provisioned.RequestType)), string(want.Provisioned.RequestType)},
		{"callers.maxPriority", strings.ToLower(string(got.Spec.Callers.MaxPriority)), string(table.DefaultMaxPriority)},
		{"capacityShare", deref(got.Spec.CapacityShare), want.CapacityShare},
		{"payGo.critical", tiers(got.Spec.Policy.PayGo.Critical), fmt.Sprint(want.PayGo.Critical)},
		{"payGo.default", tiers(got.Spec.Policy.PayGo.Default), fmt.Sprint(want.PayGo.Default)},
		{"payGo.sheddable", tiers(got.Spec.Policy.PayGo.Sheddable), fmt.Sprint(want.PayGo.Sheddable)},
		{"GetCapacityShare of an unset share", (&capacityv1alpha1.RegionPool{}).GetCapacityShare(), table.DefaultCapacityShare},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("spec.%s defaulted to %v, the routing table's default is %v", c.field, c.got, c.want)
		}
	}
	if got.GetConfigMapName() != pool.GetName()+"-routing" {
		t.Errorf("output ConfigMap = %q, want %q", got.GetConfigMapName(), pool.GetName()+"-routing")
	}
}

func dur(d *metav1.Duration) time.Duration {
	if d == nil {
		return -1
	}
	return d.Duration
}

func deref(v *int32) int {
	if v == nil {
		return -1
	}
	return int(*v)
}

// tiers is ts as the routing table spells them, printed.
func tiers(ts []capacityv1alpha1.PayGoTier) string {
	out := make([]table.PayGoTier, len(ts))
	for i, t := range ts {
		out[i] = table.PayGoTier(strings.ToLower(string(t)))
	}
	return fmt.Sprint(out)
}
