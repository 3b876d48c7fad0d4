package controllers

import (
	"context"
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
	"github.com/regionwarden/regionwarden/internal/testenv"
)

// The tests of this package share one real kube-apiserver and etcd. Each test
// works in a namespace of its own and starts the managers it needs.
var (
	testScheme = runtime.NewScheme()
	testConfig *rest.Config
	testClient client.Client
)

func TestMain(m *testing.M) {
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	os.Exit(testenv.Run(m, env, func(cfg *rest.Config) error {
		if err := clientgoscheme.AddToScheme(testScheme); err != nil {
			return err
		}
		if err := capacityv1alpha1.AddToScheme(testScheme); err != nil {
			return err
		}
		testConfig = cfg
		var err error
		testClient, err = client.New(cfg, client.Options{Scheme: testScheme})
		return err
	}))
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
