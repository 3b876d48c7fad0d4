package policy

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/regionwarden/regionwarden/router/table"
)

// TestSnapshotJSON checks the field names operators read.
func TestSnapshotJSON(t *testing.T) {
	clk := newClock()
	p := mustNew(t, ejectPool(50), clk)
	report(p, 0, Failure, 10)
	b, err := json.Marshal(p.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Policy      string
		Regions     []map[string]any
		RetryBudget map[string]any
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Policy != "adaptive" || len(got.Regions) != 4 || got.RetryBudget == nil {
		t.Fatalf("snapshot %s", b)
	}
	for _, key := range []string{"name", "tier", "ejected", "ejectedUntil", "timesEjected", "failureRate", "throttleProbability", "inFlight", "limit"} {
		if _, ok := got.Regions[0][key]; !ok {
			t.Errorf("region has no %q: %s", key, b)
		}
	}
	if _, ok := got.Regions[1]["ejectedUntil"]; ok {
		t.Errorf("a region not ejected shows ejectedUntil: %v", got.Regions[1])
	}
	bl, err := NewAllowlist(pool(provisioned("europe-west4", table.Capacity{})), Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	b, err = json.Marshal(bl.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"policy":"allowlist"`) {
		t.Errorf("allowlist snapshot %s", b)
	}
}
