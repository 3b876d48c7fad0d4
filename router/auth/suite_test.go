package auth

import (
	"os"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/regionwarden/regionwarden/internal/testenv"
)

// The TokenReview tests run against a real kube-apiserver, which issues and
// reviews ServiceAccount tokens itself (no controller-manager is needed for
// either).
var (
	testEnv    *envtest.Environment
	testConfig *rest.Config
	admin      kubernetes.Interface
)

func TestMain(m *testing.M) {
	testEnv = &envtest.Environment{}
	os.Exit(testenv.Run(m, testEnv, func(cfg *rest.Config) error {
		testConfig = cfg
		var err error
		admin, err = kubernetes.NewForConfig(cfg)
		return err
	}))
}
