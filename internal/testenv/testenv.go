// Package testenv runs a package's tests against the real kube-apiserver and
// etcd that hack/setup-envtest.sh builds, so that every suite starts, checks
// and stops the control plane the same way.
package testenv

import (
	"fmt"
	"os"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Run starts env, hands its config to setup, runs the tests and stops env. It
// returns the exit code for os.Exit: 1 when KUBEBUILDER_ASSETS is unset (the
// control plane is not built), when env fails to start, or when setup fails.
// A control plane that failed to start fully (a CRD the API server refuses) is
// stopped too, so that etcd and the API server never outlive the test binary.
func Run(m *testing.M, env *envtest.Environment, setup func(*rest.Config) error) int {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: run the tests with `make test`, which builds the test control plane (hack/setup-envtest.sh)")
		return 1
	}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the test control plane:", err)
		_ = env.Stop()
		return 1
	}
	code := 1
	if err := setup(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "setting up the tests:", err)
	} else {
		code = m.Run()
	}
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the test control plane:", err)
	}
	return code
}
