package controllers

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/regionwarden/regionwarden/internal/testenv"
)

// TestOperatorRBACPerNamespace: an operator that lists the namespaces it
// serves (--watch-namespace=a,b) needs nothing cluster-wide beyond its own
// kinds: bound to config/rbac's ClusterRole and to its Role in each
// namespace, it renders the pools of both. Without the list its cache
// watches ConfigMaps in every namespace, which those Roles do not grant, as
// docs/security.md says.
func TestOperatorRBACPerNamespace(t *testing.T) {
	a, b := testenv.Namespace(t, testClient), testenv.Namespace(t, testClient)
	cfg := asManager(t, "regionwarden-manager-"+a, a, b)
	e := newPoolEnvAs(t, cfg, true, a, b)
	for _, ns := range []string{a, b} {
		en := e.in(ns)
		en.createPool("flash", []string{"europe-west1"})
		en.waitTable("flash-routing", "rendered with the Roles of its namespace", func(routingTable) bool { return true })
		en.waitPool("flash", "is reconciled", isReconciled)
	}

	everywhere, err := cache.New(cfg, cache.Options{Scheme: testScheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := everywhere.GetInformer(ctx, &corev1.ConfigMap{}, cache.BlockUntilSynced(false)); err != nil {
		t.Fatal(err)
	}
	go func() { _ = everywhere.Start(ctx) }()
	if everywhere.WaitForCacheSync(ctx) {
		t.Error("a cache of ConfigMaps in every namespace synced with per-namespace Roles; docs/security.md says it needs a ClusterRole")
	}
}
