package source

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/regionwarden/regionwarden/internal/testenv"
	"github.com/regionwarden/regionwarden/router/table"
)

// controlPlane is started by the first test that needs it and stopped by
// TestMain; the tests that need none run without it.
var (
	controlPlane testenv.Shared
	nsCounter    atomic.Int64
)

// TestMain stops the control plane after the tests, and fails them when
// goroutines outlive them: a source that left a watch or a timer behind
// each table would grow in a router until it failed.
func TestMain(m *testing.M) {
	code := m.Run()
	controlPlane.Stop()
	os.Exit(testenv.NoLeaks(code))
}

// kube returns a client of a real API server and a fresh namespace; the test
// fails when the control plane is not built.
func kube(t *testing.T) (kubernetes.Interface, string) {
	t.Helper()
	c, err := kubernetes.NewForConfig(controlPlane.Config(t))
	if err != nil {
		t.Fatal(err)
	}
	ns := fmt.Sprintf("routing-%d", nsCounter.Add(1))
	if _, err := c.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return c, ns
}

func routingConfigMap(ns, name string, data []byte) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name,
			Labels:          map[string]string{table.LabelRoutingTable: "true"},
			OwnerReferences: []metav1.OwnerReference{regionPoolOwner(name)},
		},
		Data: map[string]string{table.DataKey: string(data)},
	}
}

// regionPoolOwner is the controller reference the operator puts on the
// ConfigMap of pool name.
func regionPoolOwner(name string) metav1.OwnerReference {
	controller := true
	return metav1.OwnerReference{
		APIVersion: RegionPoolGroup + "/v1alpha1", Kind: RegionPoolKind, Name: name,
		UID: types.UID("uid-" + name), Controller: &controller,
	}
}

type configMaps struct {
	t      *testing.T
	client kubernetes.Interface
	ns     string
}

func (c configMaps) create(cm *corev1.ConfigMap) {
	c.t.Helper()
	if _, err := c.client.CoreV1().ConfigMaps(cm.Namespace).Create(c.t.Context(), cm, metav1.CreateOptions{}); err != nil {
		c.t.Fatalf("create configmap: %v", err)
	}
}

func (c configMaps) update(name string, change func(*corev1.ConfigMap)) {
	c.t.Helper()
	api := c.client.CoreV1().ConfigMaps(c.ns)
	cm, err := api.Get(c.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		c.t.Fatalf("get configmap: %v", err)
	}
	change(cm)
	if _, err := api.Update(c.t.Context(), cm, metav1.UpdateOptions{}); err != nil {
		c.t.Fatalf("update configmap: %v", err)
	}
}

func (c configMaps) delete(name string) {
	c.t.Helper()
	if err := c.client.CoreV1().ConfigMaps(c.ns).Delete(c.t.Context(), name, metav1.DeleteOptions{}); err != nil {
		c.t.Fatalf("delete configmap: %v", err)
	}
}

// startConfigMapSource runs a source on ns and waits for its first table.
func startConfigMapSource(t *testing.T, client kubernetes.Interface, ns string, obs Observer) *ConfigMapSource {
	t.Helper()
	s := NewConfigMapSource(client, ns, ConfigMapOptions{Logger: slog.New(slog.DiscardHandler), Observer: obs})
	run(t, s)
	NewWithT(t).Eventually(s.Current, wait).ShouldNot(BeNil(), "the source serves once the first list is in")
	return s
}

// twoPools is a fresh namespace holding the routing ConfigMaps of two pools:
// p/model-a in a-routing, p/model-b in b-routing.
func twoPools(t *testing.T) configMaps {
	t.Helper()
	client, ns := kube(t)
	cms := configMaps{t, client, ns}
	cms.create(routingConfigMap(ns, "a-routing", renderPool(t, "p", "model-a")))
	cms.create(routingConfigMap(ns, "b-routing", renderPool(t, "p", "model-b")))
	return cms
}

func models(s *ConfigMapSource) func() []string {
	return func() []string { return poolModels(s.Current()) }
}

func TestConfigMapSourceMergesPools(t *testing.T) {
	g := NewWithT(t)
	cms := twoPools(t)
	client, ns := cms.client, cms.ns

	unlabeled := routingConfigMap(ns, "c-unlabeled", renderPool(t, "p", "model-c"))
	unlabeled.Labels = nil
	cms.create(unlabeled)
	otherNS := fmt.Sprintf("%s-other", ns)
	_, err := client.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: otherNS}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	cms.create(routingConfigMap(otherNS, "d-routing", renderPool(t, "p", "model-d")))

	var c recorder
	s := startConfigMapSource(t, client, ns, &c)
	g.Eventually(models(s), wait).Should(ConsistOf("p/model-a", "p/model-b"))
	g.Expect(c.Rejections()).To(BeZero())

	// A ConfigMap that gains the label joins; one that loses it leaves.
	cms.update("c-unlabeled", func(cm *corev1.ConfigMap) {
		cm.Labels = map[string]string{table.LabelRoutingTable: "true"}
	})
	g.Eventually(models(s), wait).Should(ConsistOf("p/model-a", "p/model-b", "p/model-c"))
	cms.update("a-routing", func(cm *corev1.ConfigMap) { cm.Labels = nil })
	g.Eventually(models(s), wait).Should(ConsistOf("p/model-b", "p/model-c"))
}

func TestConfigMapSourceRefusesBadUpdate(t *testing.T) {
	for _, bad := range badTables {
		t.Run(bad.name, func(t *testing.T) {
			g := NewWithT(t)
			cms := twoPools(t)
			client, ns := cms.client, cms.ns
			var r recorder
			s := startConfigMapSource(t, client, ns, &r)
			g.Eventually(models(s), wait).Should(ConsistOf("p/model-a", "p/model-b"))
			before := s.Hash()

			cms.update("a-routing", func(cm *corev1.ConfigMap) { cm.Data[table.DataKey] = bad.data })
			g.Eventually(r.rejections, wait).Should(Equal([]string{"configmap:" + ns + "/a-routing " + bad.reason}), "%v", r.LastError())
			g.Expect(s.Hash()).To(Equal(before), "the last good pools keep serving")

			// The other ConfigMap still updates; the refused one keeps its old pool.
			cms.update("b-routing", func(cm *corev1.ConfigMap) {
				cm.Data[table.DataKey] = string(renderPool(t, "p", "model-b2"))
			})
			g.Eventually(models(s), wait).Should(ConsistOf("p/model-a", "p/model-b2"))

			// A good update of the refused ConfigMap is taken.
			cms.update("a-routing", func(cm *corev1.ConfigMap) {
				cm.Data[table.DataKey] = string(renderPool(t, "p", "model-a2"))
			})
			g.Eventually(models(s), wait).Should(ConsistOf("p/model-a2", "p/model-b2"))
			g.Expect(r.Rejections()).To(BeEquivalentTo(1))
		})
	}
}

func TestConfigMapSourceDeleteRemovesPools(t *testing.T) {
	g := NewWithT(t)
	cms := twoPools(t)
	client, ns := cms.client, cms.ns
	s := startConfigMapSource(t, client, ns, nil)
	g.Eventually(models(s), wait).Should(ConsistOf("p/model-a", "p/model-b"))

	cms.delete("a-routing")
	g.Eventually(models(s), wait).Should(ConsistOf("p/model-b"))
	cms.delete("b-routing")
	g.Eventually(models(s), wait).Should(BeEmpty())
	g.Expect(s.Current()).NotTo(BeNil(), "with no routing ConfigMap left the source serves an empty table")
}

func TestConfigMapSourceDuplicatePoolFirstNameWins(t *testing.T) {
	g := NewWithT(t)
	client, ns := kube(t)
	cms := configMaps{t, client, ns}
	// Same pool key, told apart by their regions.
	cms.create(routingConfigMap(ns, "b-routing", renderPool(t, "p", "model-a", "us-central1")))
	cms.create(routingConfigMap(ns, "a-routing", renderPool(t, "p", "model-a", "europe-west1")))
	var r recorder
	s := startConfigMapSource(t, client, ns, &r)
	regions := func() []string {
		var out []string
		for _, p := range s.Current().Pools {
			for _, reg := range p.Regions {
				out = append(out, reg.Name)
			}
		}
		return out
	}
	g.Eventually(regions, wait).Should(Equal([]string{"europe-west1"}))
	g.Eventually(r.rejections, wait).Should(ContainElement("configmap:" + ns + "/b-routing " + ReasonDuplicatePool))

	// When the winner goes, the other ConfigMap's pool takes over.
	cms.delete("a-routing")
	g.Eventually(regions, wait).Should(Equal([]string{"us-central1"}))
}

func TestConfigMapSourceRunEndedBeforeFirstListFails(t *testing.T) {
	client, ns := kube(t)
	s := NewConfigMapSource(client, ns, ConfigMapOptions{Logger: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
	defer cancel()
	<-ctx.Done()
	if err := s.Run(ctx); err == nil {
		t.Fatal("Run must fail when its context ends before the first list")
	}
}
