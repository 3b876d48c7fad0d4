package source

import (
	"log/slog"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/regionwarden/regionwarden/router/table"
)

// TestConfigMapSourceReadsOnlyRegionPoolTables checks that a labeled
// ConfigMap is read only while a RegionPool is its controller: one without an
// owner, or controlled by something else, is refused and serves nothing, and
// one that loses its RegionPool controller leaves the table.
func TestConfigMapSourceReadsOnlyRegionPoolTables(t *testing.T) {
	g := NewWithT(t)
	client, ns := kube(t)
	cms := configMaps{t, client, ns}
	cms.create(routingConfigMap(ns, "a-routing", renderPool(t, "p", "model-a")))

	unowned := routingConfigMap(ns, "b-unowned", renderPool(t, "p", "model-b"))
	unowned.OwnerReferences = nil
	cms.create(unowned)

	controller := true
	foreign := routingConfigMap(ns, "c-foreign", renderPool(t, "p", "model-c"))
	foreign.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: "apps/v1", Kind: "Deployment", Name: "something", UID: "uid-deploy", Controller: &controller,
	}}
	cms.create(foreign)

	// Owned by a RegionPool, but not as its controller.
	notController := routingConfigMap(ns, "d-not-controller", renderPool(t, "p", "model-d"))
	notController.OwnerReferences[0].Controller = nil
	cms.create(notController)

	var r recorder
	s := startConfigMapSource(t, client, ns, &r)
	g.Eventually(models(s), wait).Should(ConsistOf("p/model-a"))
	g.Eventually(r.rejections, wait).Should(ConsistOf(
		"configmap:"+ns+"/b-unowned "+ReasonNotOwned,
		"configmap:"+ns+"/c-foreign "+ReasonNotOwned,
		"configmap:"+ns+"/d-not-controller "+ReasonNotOwned,
	), "%v", r.LastError())

	// Given a RegionPool controller, the ConfigMap joins.
	cms.update("b-unowned", func(cm *corev1.ConfigMap) {
		cm.OwnerReferences = []metav1.OwnerReference{regionPoolOwner("b")}
	})
	g.Eventually(models(s), wait).Should(ConsistOf("p/model-a", "p/model-b"))

	// Stripped of it, it leaves.
	cms.update("a-routing", func(cm *corev1.ConfigMap) { cm.OwnerReferences = nil })
	g.Eventually(models(s), wait).Should(ConsistOf("p/model-b"))
	g.Expect(r.RejectionsFor(ReasonNotOwned)).To(BeEquivalentTo(4))
}

// TestConfigMapSourceEndpointAllowance checks that a table naming an
// endpoint off Google is refused by default and served when the host is
// allowed by name.
func TestConfigMapSourceEndpointAllowance(t *testing.T) {
	g := NewWithT(t)
	client, ns := kube(t)
	cms := configMaps{t, client, ns}
	loopback := renderEndpoint(t, "p", "model-a", "127.0.0.1:8443")
	cms.create(routingConfigMap(ns, "a-routing", loopback))

	var strict recorder
	s := startConfigMapSource(t, client, ns, &strict)
	g.Eventually(strict.rejections, wait).Should(Equal([]string{"configmap:" + ns + "/a-routing " + ReasonEndpoint}))
	g.Expect(strict.LastError()).To(MatchError(ContainSubstring("pools[0].regions[0].endpoint")))
	g.Expect(models(s)()).To(BeEmpty())

	allowing := NewConfigMapSource(client, ns, ConfigMapOptions{Logger: slog.New(slog.DiscardHandler), Endpoints: table.AllowHosts("127.0.0.1")})
	run(t, allowing)
	g.Eventually(models(allowing), wait).Should(ConsistOf("p/model-a"))
}

// renderEndpoint renders a one-region table whose region has endpoint.
func renderEndpoint(t *testing.T, project, model, endpoint string) []byte {
	t.Helper()
	b, err := table.Render(&table.Table{Version: table.Version, Pools: []table.Pool{{
		Project: project, Model: model, Regions: []table.Region{{Name: "us-east5", Endpoint: endpoint}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}
