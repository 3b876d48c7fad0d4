package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/regionwarden/regionwarden/internal/testenv"
	"github.com/regionwarden/regionwarden/internal/waittest"
)

// TestUseClusterLeavesItAsFound runs the demo's preparation of a cluster it
// is given (make demo KUBECONFIG=...) against a real API server through an
// admin kubeconfig, and its clean-up: a namespace of its own and the CRDs
// it had to create, then nothing of either left behind. A CRD already
// installed is used as it is and kept.
func TestUseClusterLeavesItAsFound(t *testing.T) {
	env := &envtest.Environment{}
	cfg := testenv.Start(t, env)
	admin, err := env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := admin.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	_ = apiextensionsv1.AddToScheme(scheme)
	_ = corev1.AddToScheme(scheme)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	crds := func() map[string]bool {
		var list apiextensionsv1.CustomResourceDefinitionList
		if err := c.List(ctx, &list); err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, crd := range list.Items {
			out[crd.Name] = crd.DeletionTimestamp.IsZero()
		}
		return out
	}
	const pt, pool = "provisionedthroughputs.capacity.regionwarden.io", "regionpools.capacity.regionwarden.io"
	o := options{root: filepath.Join("..", ".."), kubeconfig: kubeconfig}

	t.Run("a cluster without the CRDs", func(t *testing.T) {
		cp, err := useCluster(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		if got := crds(); !got[pt] || !got[pool] {
			t.Fatalf("CRDs after preparing: %v, want both", got)
		}
		ns := &corev1.Namespace{}
		if err := c.Get(ctx, client.ObjectKey{Name: namespace}, ns); err != nil {
			t.Fatalf("the demo's namespace %q: %v", namespace, err)
		}
		cp.cleanup()
		if got := crds(); got[pt] || got[pool] {
			t.Errorf("CRDs after cleaning up: %v, want none left", got)
		}
		// The test control plane has no namespace controller to finish a
		// deletion: the namespace is terminating, or gone.
		if err := c.Get(ctx, client.ObjectKey{Name: namespace}, ns); !apierrors.IsNotFound(err) && ns.DeletionTimestamp.IsZero() {
			t.Errorf("the demo's namespace %q is still there: %v", namespace, err)
		}
	})

	t.Run("a cluster with the CRDs installed", func(t *testing.T) {
		data, err := os.ReadFile(filepath.Join(o.root, "config", "crd", "bases", "capacity.regionwarden.io_regionpools.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		installed := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(data, installed); err != nil {
			t.Fatal(err)
		}
		// The first subtest's CRD may still be going away.
		waittest.For(t, time.Minute, "the first subtest's CRD never went", func() bool {
			return c.Get(ctx, client.ObjectKey{Name: pool}, &apiextensionsv1.CustomResourceDefinition{}) != nil
		})
		if err := c.Create(ctx, installed); err != nil {
			t.Fatal(err)
		}
		cp, err := useCluster(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		cp.cleanup()
		if got := crds(); !got[pool] || got[pt] {
			t.Errorf("CRDs after cleaning up: %v, want the one installed before kept and the other gone", got)
		}
	})
}
