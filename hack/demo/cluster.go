package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// controlPlane is the API server the demo runs against, and how to leave it
// as it was found.
type controlPlane struct {
	cfg        *rest.Config
	kubeconfig string
	cleanup    func()
}

// useCluster connects to the cluster of kubeconfig's current context and
// prepares it: the CRDs, created only when absent (CRDs already there are
// used as they are, and kept), and a namespace of the demo's own, which the
// operator is confined to. cleanup deletes the namespace (and everything
// the demo made in it) and the CRDs the demo created; nothing else in the
// cluster is read or written.
func useCluster(ctx context.Context, o options) (*controlPlane, error) {
	kubeconfig, err := filepath.Abs(o.kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("--cluster: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "regionwarden-demo-"}}
	if err := c.Create(ctx, ns); err != nil {
		return nil, fmt.Errorf("creating the demo's namespace in %s: %w", cfg.Host, err)
	}
	namespace = ns.Name
	var created []*apiextensionsv1.CustomResourceDefinition
	cleanup := func() {
		// The demo's own context may be over (Ctrl-C): clean up regardless.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		fmt.Printf("\n    cleaning up %s: deleting namespace %s", cfg.Host, ns.Name)
		_ = c.Delete(ctx, ns)
		for _, crd := range created {
			fmt.Printf(", CRD %s", crd.Name)
			_ = c.Delete(ctx, crd)
		}
		fmt.Println()
	}
	files, err := filepath.Glob(filepath.Join(o.root, "config", "crd", "bases", "*.yaml"))
	if err != nil {
		cleanup()
		return nil, err
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			cleanup()
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(data, crd); err != nil {
			cleanup()
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		err = c.Create(ctx, crd)
		switch {
		case apierrors.IsAlreadyExists(err):
			fmt.Printf("    CRD %s is already installed: used as it is, and kept\n", crd.Name)
		case err != nil:
			cleanup()
			return nil, fmt.Errorf("creating CRD %s: %w", crd.Name, err)
		default:
			created = append(created, crd)
			fmt.Printf("    CRD %s created (deleted at the end)\n", crd.Name)
		}
	}
	for _, crd := range created {
		if err := waitEstablished(ctx, c, crd.Name); err != nil {
			cleanup()
			return nil, err
		}
	}
	return &controlPlane{cfg: cfg, kubeconfig: kubeconfig, cleanup: cleanup}, nil
}

// waitEstablished waits until the API server serves the CRD called name.
func waitEstablished(ctx context.Context, c client.Client, name string) error {
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			return err
		}
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("CRD %s is not established after a minute", name)
		}
	}
}
