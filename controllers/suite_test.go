package controllers

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	capacityv1alpha1 "github.com/regionwarden/regionwarden/api/v1alpha1"
)

// The tests of this package share one real kube-apiserver and etcd. Each test
// works in a namespace of its own and starts the managers it needs.
var (
	testScheme = runtime.NewScheme()
	testConfig *rest.Config
	testClient client.Client
)

func TestMain(m *testing.M) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: run the tests with `make test`, which builds the test control plane (hack/setup-envtest.sh)")
		os.Exit(1)
	}
	if err := clientgoscheme.AddToScheme(testScheme); err != nil {
		panic(err)
	}
	if err := capacityv1alpha1.AddToScheme(testScheme); err != nil {
		panic(err)
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	var err error
	testConfig, err = env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the test control plane:", err)
		// Start may fail after it started etcd and the API server (a CRD the
		// server refuses): stop them, or they outlive the test binary.
		_ = env.Stop()
		os.Exit(1)
	}
	code := 1
	testClient, err = client.New(testConfig, client.Options{Scheme: testScheme})
	if err != nil {
		fmt.Fprintln(os.Stderr, "creating a client:", err)
	} else {
		code = m.Run()
	}
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the test control plane:", err)
	}
	os.Exit(code)
}

// newNamespace creates a namespace for one test and returns its name.
func newNamespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "test-"}}
	if err := testClient.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	return ns.Name
}
