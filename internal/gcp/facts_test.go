package gcp

import "testing"

func TestLookup(t *testing.T) {
	p := &ProjectFacts{Entries: []Facts{
		{Location: "europe-west1", Publisher: "google", Model: "gemini-2.0-flash-001", GSUs: 1},
		{Location: "europe-west1", Publisher: "google", Model: "gemini-2.5-flash-lite", GSUs: 2},
		{Location: "europe-west1", Publisher: "google", Model: "gemini-2.5-flash-lite-002", GSUs: 3},
		{Location: "us-central1", Publisher: "google", Model: "gemini-2.5-pro-001", GSUs: 4},
		{Location: "us-east5", Publisher: "anthropic", Model: "claude-sonnet-4-5", GSUs: 5},
		{Location: "us-east5", Publisher: "anthropic", Model: "claude-opus-4-1@20250805", GSUs: 6},
	}}
	for _, tc := range []struct {
		location, publisher, model string
		gsus                       int64 // 0: not found
	}{
		{"europe-west1", "google", "gemini-2.0-flash-001", 1},
		{"europe-west1", "google", "gemini-2.0-flash", 1},
		{"europe-west1", "google", "gemini-2.0-flash-002", 0},
		{"europe-west1", "google", "gemini-2.5-flash-lite", 2},      // exact wins over -002
		{"europe-west1", "google", "gemini-2.5-flash-lite-002", 3},  // exact
		{"europe-west1", "google", "gemini-2.5-flash-lite-001", 2},  // suffix on the asking side
		{"europe-west1", "google", "gemini-2.5-flash-lite-00", 0},   // not a version suffix
		{"europe-west1", "google", "gemini-2.5-flash-lite-0011", 0}, // not a version suffix
		{"us-central1", "google", "gemini-2.5-pro", 4},
		{"us-central1", "anthropic", "gemini-2.5-pro", 0},
		{"europe-west4", "google", "gemini-2.5-pro", 0},
		{"europe-west1", "google", "", 0},
		// A partner model's version follows an @.
		{"us-east5", "anthropic", "claude-sonnet-4-5@20250929", 5},
		{"us-east5", "anthropic", "claude-sonnet-4-5", 5},
		{"us-east5", "anthropic", "claude-sonnet-4", 0},
		{"us-east5", "anthropic", "claude-opus-4-1", 6},
		{"us-east5", "anthropic", "claude-opus-4-1@20250101", 0}, // another version
		{"us-east5", "anthropic", "claude-opus-4-1@", 0},
	} {
		f, ok := p.Lookup(tc.location, tc.publisher, tc.model)
		if ok != (tc.gsus != 0) || f.GSUs != tc.gsus {
			t.Errorf("Lookup(%s, %s, %q) = %d GSUs, %v; want %d", tc.location, tc.publisher, tc.model, f.GSUs, ok, tc.gsus)
		}
	}
	var nilFacts *ProjectFacts
	if _, ok := nilFacts.Lookup("europe-west1", "google", "m"); ok {
		t.Error("nil facts found something")
	}
}

func TestUtilizationAndSpillover(t *testing.T) {
	for _, tc := range []struct {
		name        string
		f           Facts
		utilization float64
		spillover   float64
	}{
		{"idle", Facts{TokensPerSecond: 1000}, 0, 0},
		{"half used", Facts{TokensPerSecond: 1000, Consumed: map[string]float64{RequestTypeDedicated: 500}}, 0.5, 0},
		{"spilling", Facts{TokensPerSecond: 1000, Consumed: map[string]float64{RequestTypeDedicated: 1000, RequestTypeSpillover: 1000, RequestTypeShared: 7}}, 1, 0.5},
		{"limit unknown", Facts{Consumed: map[string]float64{RequestTypeDedicated: 10, RequestTypeSpillover: 30}}, 0, 0.75},
	} {
		if u := tc.f.Utilization(); u != tc.utilization {
			t.Errorf("%s: utilization = %v, want %v", tc.name, u, tc.utilization)
		}
		if s := tc.f.SpilloverRatio(); s != tc.spillover {
			t.Errorf("%s: spillover ratio = %v, want %v", tc.name, s, tc.spillover)
		}
	}
}
