package table

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// update rewrites the golden files from what Render produces now:
//
//	go test ./router/table/ -run TestRenderGolden -update
var update = flag.Bool("update", false, "rewrite testdata/*.json golden files from Render's output")

// renderCases are the tables whose rendering is pinned by testdata/<name>.json.
// Their inputs are deliberately out of order and sparse: the golden files show
// what Render sorts and fills in.
var renderCases = []struct {
	name  string
	table Table
}{
	{
		name: "minimal",
		table: Table{Pools: []Pool{{
			Project: "acme-prod", Model: "gemini-2.5-flash-lite",
			Regions: []Region{{Name: "europe-west1"}},
			Policy:  DefaultPolicy(),
		}}},
	},
	{
		name: "provisioned-first",
		table: Table{Version: Version, Pools: []Pool{{
			Namespace: "llm", Name: "flash",
			Project: "acme-prod", Publisher: "google", Model: "gemini-2.5-flash-lite",
			Regions: []Region{
				{Name: "us-central1", Ejectable: true, Capacity: Capacity{RequestsPerSecond: 40}},
				{Name: "europe-west4", Ejectable: true},
				{Name: "europe-west1", Tier: TierProvisioned, Ejectable: true, Capacity: Capacity{GSUs: 4, TokensPerSecond: 12000, RequestsPerSecond: 25}},
				{Name: "global", Tier: TierProvisioned, Source: SourceDiscovered, Capacity: Capacity{GSUs: 1}},
				{Name: "eu", Ejectable: true},
				{Name: "us", Endpoint: "127.0.0.1:8443"},
			},
			Policy: DefaultPolicy(),
			Callers: Callers{MaxPriority: PrioritySheddable, ServiceAccounts: []ServiceAccount{
				{Namespace: "team-a", Name: "chat", MaxPriority: PriorityCritical},
				{Namespace: "team-b", Name: AnyServiceAccount},
			}},
		}}},
	},
	{
		name: "policy-set",
		table: Table{Pools: []Pool{{
			Project: "acme-prod", Model: "gemini-2.5-pro",
			Regions: []Region{{Name: "europe-west1", Tier: TierProvisioned, Capacity: Capacity{GSUs: 10}}, {Name: "europe-west4", Ejectable: true}},
			Policy: Policy{
				Ejection: Ejection{
					FailureRateThreshold: 0.25, MinRequests: 50,
					Interval:          Duration{30 * time.Second},
					BaseEjectionTime:  Duration{time.Minute},
					MaxEjectionTime:   Duration{90 * time.Minute},
					MaxEjectedPercent: new(0),
				},
				Retry:       Retry{MaxAttempts: 3, BudgetPercent: new(0), MinRetriesPerSecond: new(0)},
				Provisioned: Provisioned{RequestType: RequestTypeDedicated},
				Concurrency: Concurrency{MaxInFlight: 100, RegionInitialLimit: 8, RegionMaxLimit: 32},
			},
		}}},
	},
	{
		name: "pools-sorted",
		table: Table{Pools: []Pool{
			{Project: "zeta-project", Model: "gemini-2.5-flash", Regions: []Region{{Name: "asia-northeast1"}}, Policy: DefaultPolicy()},
			{Project: "acme-prod", Publisher: "google", Model: "gemini-2.5-pro", Regions: []Region{{Name: "us-east5"}}, Policy: DefaultPolicy()},
			{Project: "acme-prod", Publisher: "anthropic", Model: "claude-sonnet-4", Regions: []Region{{Name: "us-east5"}}, Policy: DefaultPolicy()},
			{Project: "acme-prod", Publisher: "google", Model: "gemini-2.5-flash", Regions: []Region{{Name: "us-east5"}}, Policy: DefaultPolicy()},
		}},
	},
}

func TestRenderGolden(t *testing.T) {
	for _, tc := range renderCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Render(&tc.table)
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			path := filepath.Join("testdata", tc.name+".json")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("reading the golden file (run with -update to write it): %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("Render differs from %s (run with -update if the change is meant):\n--- got\n%s\n--- want\n%s", path, got, want)
			}
			// What Render writes, Parse reads back to a table that renders
			// the same bytes (a loopback endpoint allowed by name).
			parsed, err := Parse(got, AllowHosts("127.0.0.1"))
			if err != nil {
				t.Fatalf("Parse(Render): %v", err)
			}
			again, err := Render(parsed)
			if err != nil {
				t.Fatalf("Render(Parse(Render)): %v", err)
			}
			if !bytes.Equal(again, got) {
				t.Errorf("Render(Parse(Render(x))) differs from Render(x):\n%s", again)
			}
		})
	}
}

// TestRenderDeterministic checks that the order of the inputs does not reach
// the output: regions and pools given in any order render the same bytes and hash.
func TestRenderDeterministic(t *testing.T) {
	base := renderCases[1].table
	want, err := Render(&base)
	if err != nil {
		t.Fatal(err)
	}
	regions := base.Pools[0].Regions
	for shift := 1; shift < len(regions); shift++ {
		rotated := append(append([]Region(nil), regions[shift:]...), regions[:shift]...)
		tb := Table{Pools: []Pool{base.Pools[0]}}
		tb.Pools[0].Regions = rotated
		got, err := Render(&tb)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) || Hash(got) != Hash(want) {
			t.Errorf("regions rotated by %d render differently:\n%s", shift, got)
		}
	}

	pools := renderCases[3].table.Pools
	want, err = Render(&Table{Pools: pools})
	if err != nil {
		t.Fatal(err)
	}
	reversed := make([]Pool, len(pools))
	for i, p := range pools {
		reversed[len(pools)-1-i] = p
	}
	got, err := Render(&Table{Pools: reversed})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("pools in reverse order render differently:\n%s", got)
	}
}

// TestRenderLeavesInputAlone checks that Render neither sorts nor defaults the
// caller's table: the operator renders from objects it still reads.
func TestRenderLeavesInputAlone(t *testing.T) {
	tb := Table{Pools: []Pool{{
		Project: "acme-prod", Model: "gemini-2.5-flash",
		Regions: []Region{{Name: "us-east5"}, {Name: "europe-west1", Tier: TierProvisioned}},
		Policy:  DefaultPolicy(),
	}}}
	if _, err := Render(&tb); err != nil {
		t.Fatal(err)
	}
	p := tb.Pools[0]
	if tb.Version != 0 || p.Publisher != "" || p.Regions[0].Name != "us-east5" || p.Regions[0].Endpoint != "" || p.Regions[1].Source != "" {
		t.Errorf("Render changed its input: %+v", tb)
	}
}

func TestRenderRefusesInvalid(t *testing.T) {
	tb := Table{Pools: []Pool{{Project: "acme-prod", Model: "m", Regions: []Region{{Name: "Europe West"}}}}}
	out, err := Render(&tb)
	if err == nil {
		t.Fatalf("Render accepted an invalid table:\n%s", out)
	}
	if want := "pools[0].regions[0].name"; !bytes.Contains([]byte(err.Error()), []byte(want)) {
		t.Errorf("error %q does not name %s", err, want)
	}
}

func TestHash(t *testing.T) {
	a, b := []byte(`{"version":1}`), []byte(`{"version":1} `)
	if Hash(a) != Hash(append([]byte(nil), a...)) {
		t.Error("the same bytes hash differently")
	}
	if Hash(a) == Hash(b) {
		t.Error("different bytes hash the same")
	}
	if len(Hash(a)) != 16 {
		t.Errorf("hash %q is not 16 hex characters", Hash(a))
	}
}

// TestTableHash: a parsed table hashes as its rendering does, whatever the
// layout of the document it was parsed from, so the router reports the hash
// the operator wrote in the ConfigMap's annotation.
func TestTableHash(t *testing.T) {
	doc := []byte(`{"version": 1, "pools": [{"project": "p", "model": "m", "regions": [{"name": "us-east5"}, {"name": "europe-west1", "tier": "provisioned"}]}]}`)
	parsed, err := Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := Render(parsed)
	if err != nil {
		t.Fatal(err)
	}
	if parsed.Hash() != Hash(rendered) {
		t.Errorf("Table.Hash = %s, the rendering hashes %s", parsed.Hash(), Hash(rendered))
	}
	if parsed.Hash() == Hash(doc) {
		t.Error("Table.Hash hashed the document as written, not its rendering")
	}
	empty := &Table{Version: Version}
	if empty.Hash() == "" || empty.Hash() == parsed.Hash() {
		t.Errorf("a table Render refuses hashes %q", empty.Hash())
	}
}
