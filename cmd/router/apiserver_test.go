package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/regionwarden/regionwarden/internal/testenv"
	"github.com/regionwarden/regionwarden/router/source"
	"github.com/regionwarden/regionwarden/router/table"
)

// apiServer is a real API server for one test, and admin a client of it with
// every right.
type apiServer struct {
	t     *testing.T
	env   *envtest.Environment
	host  string
	admin kubernetes.Interface
}

func startAPIServer(t *testing.T) *apiServer {
	t.Helper()
	env := &envtest.Environment{}
	cfg := testenv.Start(t, env)
	admin, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(strings.TrimPrefix(cfg.Host, "https://"), "http://")
	return &apiServer{t: t, env: env, host: host, admin: admin}
}

// must fails the test on a client call's error.
func (a *apiServer) must(_ any, err error) {
	a.t.Helper()
	if err != nil {
		a.t.Fatal(err)
	}
}

// namespace creates namespace name.
func (a *apiServer) namespace(name string) {
	a.t.Helper()
	a.must(a.admin.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}))
}

// grantClusterWide gives user rule in every namespace, through a
// ClusterRole. testenv.RoleUser grants in one namespace.
func (a *apiServer) grantClusterWide(user string, rule rbacv1.PolicyRule) {
	a.t.Helper()
	testenv.ClusterRole(a.t, a.admin, user, []rbacv1.PolicyRule{rule}, testenv.User(user))
}

// user adds a user called name, of groups, to the API server.
func (a *apiServer) user(name string, groups ...string) *envtest.AuthenticatedUser {
	a.t.Helper()
	u, err := a.env.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		a.t.Fatal(err)
	}
	return u
}

// kubeconfig writes a kubeconfig file for u that reaches the API server at
// host (its own address when ""), and returns its path.
func (a *apiServer) kubeconfig(u *envtest.AuthenticatedUser, host string) string {
	a.t.Helper()
	kc, err := u.KubeConfig()
	if err != nil {
		a.t.Fatal(err)
	}
	if host != "" {
		kc = bytes.ReplaceAll(kc, []byte(a.host), []byte(host))
	}
	path := filepath.Join(a.t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		a.t.Fatal(err)
	}
	return path
}

// routingConfigMap is the routing ConfigMap of pool "flash" in ns, as the
// operator writes it (labeled, controlled by its RegionPool), holding data.
func routingConfigMap(ns string, data []byte) *corev1.ConfigMap {
	controller := true
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: "flash-routing", Labels: map[string]string{table.LabelRoutingTable: "true"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: source.RegionPoolGroup + "/v1alpha1", Kind: source.RegionPoolKind, Name: "flash", UID: "uid-flash", Controller: &controller,
			}},
		},
		Data: map[string]string{table.DataKey: string(data)},
	}
}
