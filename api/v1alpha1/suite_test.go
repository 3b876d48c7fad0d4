package v1alpha1_test

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	capacityv1alpha1 "github.com/regionwarden/regionwarden/api/v1alpha1"
	"github.com/regionwarden/regionwarden/internal/testenv"
)

// k8s is a client of the real API server that the CRDs are installed into.
var (
	k8s client.Client
	cfg *rest.Config
)

func TestMain(m *testing.M) {
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	os.Exit(testenv.Run(m, env, func(c *rest.Config) error {
		cfg = c
		scheme := runtime.NewScheme()
		if err := clientgoscheme.AddToScheme(scheme); err != nil {
			return err
		}
		if err := capacityv1alpha1.AddToScheme(scheme); err != nil {
			return err
		}
		var err error
		k8s, err = client.New(cfg, client.Options{Scheme: scheme})
		return err
	}))
}
