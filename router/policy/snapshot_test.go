package policy

import (
	"encoding/json"
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
	for _, key := range []string{"name", "tier", "ejected", "ejectedUntil", "timesEjected", "failureRate", "timesDemoted", "throttleProbability", "inFlight", "limit", "answering"} {
		if _, ok := got.Regions[0][key]; !ok {
			t.Errorf("region has no %q: %s", key, b)
		}
	}
	if _, ok := got.Regions[1]["ejectedUntil"]; ok {
		t.Errorf("a region not ejected shows ejectedUntil: %v", got.Regions[1])
	}
	if _, ok := got.Regions[1]["demotion"]; ok {
		t.Errorf("a region not demoted shows a demotion: %v", got.Regions[1])
	}

	// A demoted provisioned region says since when and why.
	p = mustNew(t, pool(provisioned("europe-west4", table.Capacity{}), shared("europe-west1", 0)), clk)
	report(p, 0, Failure, 20)
	b, err = json.Marshal(p.Snapshot().Regions[0])
	if err != nil {
		t.Fatal(err)
	}
	var rs struct {
		Demotion map[string]any
	}
	if err := json.Unmarshal(b, &rs); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"since", "failureRate", "answered", "failed", "threshold", "successesInARow", "restoreAfter"} {
		if _, ok := rs.Demotion[key]; !ok {
			t.Errorf("demotion has no %q: %s", key, b)
		}
	}
}
