package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/regionwarden/regionwarden/router/table"
)

// TestApplyKeepsLiveStateAndDropsPools: a new table updates a served pool in
// place (an ejection survives), adds new pools and drops those that left.
func TestApplyKeepsLiveStateAndDropsPools(t *testing.T) {
	bad, s2, s3, pol := oneOfThreeFailing(t)
	r := startRouter(t)

	if code, _ := r.get("/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz before any table: %d, want 503", code)
	}
	first := poolOf(pol, region(bad, 0), region(s2, 0), region(s3, 0))
	if err := r.srv.Apply(&table.Table{Version: table.Version, Pools: []table.Pool{first}}); err != nil {
		t.Fatal(err)
	}
	if code, _ := r.get("/readyz"); code != http.StatusOK {
		t.Errorf("/readyz after a table: %d, want 200", code)
	}
	r.callEvery(60, 20*time.Millisecond)
	if !r.snapshotOf("us-central1").Ejected {
		t.Fatal("failing region not ejected")
	}

	// Same pool with another retry policy, and a second pool.
	updated := first
	updated.Policy.Retry.MaxAttempts = 2
	other := updated
	other.Model = "gemini-2.5-pro"
	if err := r.srv.Apply(&table.Table{Version: table.Version, Pools: []table.Pool{updated, other}}); err != nil {
		t.Fatal(err)
	}
	if !r.snapshotOf("us-central1").Ejected {
		t.Error("the update lost the region's ejection")
	}
	if got := len(r.srv.Snapshots()); got != 2 {
		t.Errorf("%d pools served, want 2", got)
	}

	code, body := r.get("/debug/pools")
	var dbg struct {
		TableHash string `json:"tableHash"`
		Pools     []struct {
			Model   string `json:"model"`
			Regions []struct {
				Name    string `json:"name"`
				Ejected bool   `json:"ejected"`
			} `json:"regions"`
		} `json:"pools"`
	}
	if err := json.Unmarshal([]byte(body), &dbg); code != http.StatusOK || err != nil {
		t.Fatalf("/debug/pools: %d %v: %s", code, err, body)
	}
	if dbg.TableHash == "" || len(dbg.Pools) != 2 || dbg.Pools[0].Model != "gemini-2.5-flash-lite" {
		t.Errorf("/debug/pools: %s", body)
	}

	// The first pool leaves the table.
	if err := r.srv.Apply(&table.Table{Version: table.Version, Pools: []table.Pool{other}}); err != nil {
		t.Fatal(err)
	}
	resp, body2 := r.post(generatePath, `{"contents":[{"parts":[{"text":"hi"}]}]}`, nil)
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("dropped pool answered %d: %s", resp.StatusCode, body2)
	}

	// The dropped pool's series are gone; the pool still served counts.
	proPath := strings.Replace(generatePath, model, other.Model, 1)
	if resp, body := r.post(proPath, `{"contents":[{"parts":[{"text":"hi"}]}]}`, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("remaining pool answered %d: %s", resp.StatusCode, body)
	}
	r.requestsCounted("the remaining pool's call", map[string]string{"pool": "demo-project/google/gemini-2.5-pro", "method": "generateContent", "code": "200"}, 1)
	code, metricsText := r.get("/metrics")
	for _, want := range []string{
		`regionwarden_router_requests_total{code="200",method="generateContent",pool="demo-project/google/gemini-2.5-pro"}`,
		`regionwarden_router_attempts_total{outcome="success",pool="demo-project/google/gemini-2.5-pro"`,
		`regionwarden_router_region_ejected{pool="demo-project/google/gemini-2.5-pro"`,
		"regionwarden_router_pool_panic",
		"go_goroutines",
	} {
		if code != http.StatusOK || !strings.Contains(metricsText, want) {
			t.Errorf("/metrics (%d) lacks %s", code, want)
		}
	}
	if strings.Contains(metricsText, `pool="demo-project/google/gemini-2.5-flash-lite"`) {
		t.Errorf("/metrics still has series of the pool that left")
	}

	// A table without pools leaves the router with nothing to route: not ready.
	if err := r.srv.Apply(&table.Table{Version: table.Version}); err != nil {
		t.Fatal(err)
	}
	if code, _ := r.get("/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz with no pool: %d, want 503", code)
	}
}
