package main

import (
	"context"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/regionwarden/regionwarden/internal/proxytest"
	"github.com/regionwarden/regionwarden/internal/testenv"
	"github.com/regionwarden/regionwarden/router/table"
)

// TestTablesFromConfigMaps runs the router on routing ConfigMaps read through
// a real API server, as a user allowed only get, list and watch on configmaps
// in one namespace: the RBAC the router needs. A ConfigMap update takes
// effect; when the API server goes away (every connection to it cut) the
// router keeps routing on the table it has.
func TestTablesFromConfigMaps(t *testing.T) {
	api := startAPIServer(t)
	ctx := context.Background()
	const ns = "regionwarden-system"
	user := testenv.RoleUser(t, api.env, api.admin, ns, "regionwarden-router",
		[]rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}})
	// The router reaches the API server through a proxy that the test cuts
	// to make the API server go away.
	proxy := proxytest.Start(t, api.host)
	kubeconfig := api.kubeconfig(user, proxy.Addr())

	a, b := startRegion(t, "us-central1"), startRegion(t, "europe-west4")
	cm := routingConfigMap(ns, renderTable(t, a))
	api.must(api.admin.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}))

	s := startRun(t, "--table-configmaps", ns, "--kubeconfig", kubeconfig)
	c := s.client(t)
	eventually(t, "routing to us-central1", func() bool {
		got, err := answer(c)
		return err == nil && got == "us-central1"
	})

	cm.Data[table.DataKey] = string(renderTable(t, b))
	api.must(api.admin.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}))
	eventually(t, "routing to europe-west4 after the update", func() bool {
		got, err := answer(c)
		return err == nil && got == "europe-west4"
	})

	proxy.Close()
	if got, err := answer(c); err != nil || got != "europe-west4" {
		t.Errorf("with the API server gone: answer %q, %v; want the last table serving", got, err)
	}
}
