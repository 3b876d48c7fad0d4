package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/regionwarden/regionwarden/router/table"
)

// TestTablesFromConfigMaps runs the router on routing ConfigMaps read through
// a real API server, as a user allowed only get, list and watch on configmaps
// in one namespace: the RBAC the router needs. A ConfigMap update takes
// effect; when the API server goes away the router keeps routing.
func TestTablesFromConfigMaps(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("KUBEBUILDER_ASSETS is unset: run with KUBEBUILDER_ASSETS=\"$(hack/setup-envtest.sh)\" to test against a real API server")
	}
	env := &envtest.Environment{}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("test API server: %v", err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = env.Stop()
		}
	})
	admin, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const ns = "regionwarden-system"
	mustCreate := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err = admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	mustCreate(err)
	_, err = admin.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "router"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}},
	}, metav1.CreateOptions{})
	mustCreate(err)
	_, err = admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "router"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "router"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "regionwarden-router"}},
	}, metav1.CreateOptions{})
	mustCreate(err)
	user, err := env.AddUser(envtest.User{Name: "regionwarden-router"}, nil)
	mustCreate(err)
	kc, err := user.KubeConfig()
	mustCreate(err)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	mustCreate(os.WriteFile(kubeconfig, kc, 0o600))

	a, b := startRegion(t, "us-central1"), startRegion(t, "europe-west4")
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "flash-routing", Labels: map[string]string{table.LabelRoutingTable: "true"}},
		Data:       map[string]string{table.DataKey: string(renderTable(t, a))},
	}
	_, err = admin.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
	mustCreate(err)

	s := startRun(t, "--table-configmaps", ns, "--kubeconfig", kubeconfig)
	c := s.client(t)
	eventually(t, "routing to us-central1", func() bool {
		got, err := answer(c)
		return err == nil && got == "us-central1"
	})

	cm.Data[table.DataKey] = string(renderTable(t, b))
	_, err = admin.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
	mustCreate(err)
	eventually(t, "routing to europe-west4 after the update", func() bool {
		got, err := answer(c)
		return err == nil && got == "europe-west4"
	})

	stopped = true
	if err := env.Stop(); err != nil {
		t.Fatal(err)
	}
	if got, err := answer(c); err != nil || got != "europe-west4" {
		t.Errorf("with the API server gone: answer %q, %v; want the last table serving", got, err)
	}
}
