package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/onsi/gomega/gbytes"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/regionwarden/regionwarden/router/source"
	"github.com/regionwarden/regionwarden/router/table"
)

// debugPools reads the router's /debug/pools.
func (s *started) debugPools(t *testing.T) (hash string, refused []source.Refusal) {
	t.Helper()
	resp, err := http.Get("http://" + s.ops + "/debug/pools")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var d struct {
		TableHash     string           `json:"tableHash"`
		RefusedTables []source.Refusal `json:"refusedTables"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
		t.Fatal(err)
	}
	return d.TableHash, d.RefusedTables
}

// newerTable is table as an operator of a later format version would write
// it: the next version number and a field this build does not know.
func newerTable(t *testing.T, data []byte) string {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	doc["version"] = table.Version + 1
	doc["regionWeights"] = map[string]any{"europe-west4": 3}
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestOlderRouterKeepsItsTable upgrades the operator before the router, as a
// rollout may: the routing ConfigMap, read through a real API server, is
// rewritten in a table format version this router does not read. The router
// keeps serving its last good table and says so in its log, its metrics and
// /debug/pools; once a table it reads arrives (the operator rolled back, or
// the router upgraded and the table rewritten), it serves that one and the
// refusal is gone.
func TestOlderRouterKeepsItsTable(t *testing.T) {
	api := startAPIServer(t)
	admin := api.admin
	kubeconfig := api.kubeconfig(api.user("admin", "system:masters"), "")
	ctx := context.Background()
	const ns = "regionwarden-system"
	api.namespace(ns)

	a, b := startRegion(t, "us-central1"), startRegion(t, "europe-west4")
	cm, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, routingConfigMap(ns, renderTable(t, a)), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	log := gbytes.NewBuffer() // safe for the router's logger and the test at once
	s := startRouterLogging(t, log, "--allow-endpoint-host", "127.0.0.1", "--table-configmaps", ns, "--kubeconfig", kubeconfig)
	c := s.client(t)
	eventually(t, "routing to us-central1", func() bool {
		got, err := answer(c)
		return err == nil && got == "us-central1"
	})
	goodHash, _ := s.debugPools(t)

	cm.Data[table.DataKey] = newerTable(t, renderTable(t, b))
	if cm, err = admin.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	rejected := fmt.Sprintf(`regionwarden_router_table_rejections_total{reason=%q} 1`, source.ReasonVersion)
	eventually(t, "the newer table refused", func() bool { return strings.Contains(s.metrics(t), rejected) })

	if got, err := answer(c); err != nil || got != "us-central1" {
		t.Errorf("after the newer table: answered by %q, %v; want the last good table's us-central1", got, err)
	}
	hash, refused := s.debugPools(t)
	if hash != goodHash {
		t.Errorf("/debug/pools tableHash = %s, want the last good table's %s", hash, goodHash)
	}
	if len(refused) != 1 || refused[0].Origin != "configmap:"+ns+"/flash-routing" || refused[0].Reason != source.ReasonVersion ||
		!strings.Contains(refused[0].Error, fmt.Sprintf("unsupported version %d", table.Version+1)) {
		t.Errorf("/debug/pools refusedTables = %+v, want the ConfigMap refused for its version", refused)
	}
	if l := string(log.Contents()); !strings.Contains(l, "the last good table keeps serving") || !strings.Contains(l, "unsupported version") {
		t.Errorf("the log does not say the table was refused for its version:\n%s", l)
	}

	cm.Data[table.DataKey] = string(renderTable(t, b))
	if _, err = admin.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "routing to europe-west4 on a table this router reads", func() bool {
		got, err := answer(c)
		return err == nil && got == "europe-west4"
	})
	if _, refused := s.debugPools(t); len(refused) != 0 {
		t.Errorf("/debug/pools still lists refusals after a good table: %+v", refused)
	}
}
