package table

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// region and pool build JSON documents for the Parse tests.
const goodPolicy = `"policy": {}`

func doc(pools ...string) string {
	return `{"version": 1, "pools": [` + strings.Join(pools, ",") + `]}`
}

func pool(regions string, extra ...string) string {
	fields := append([]string{`"project": "acme-prod"`, `"model": "gemini-2.5-flash"`, `"regions": [` + regions + `]`}, extra...)
	return `{` + strings.Join(fields, ",") + `}`
}

func TestParseErrorsNameTheirPath(t *testing.T) {
	cases := []struct {
		name string
		data string
		// path is the field the error must name; detail is a word of the reason.
		path, detail string
	}{
		{"unknown version", `{"version": 2, "pools": []}`, "version", "unsupported version 2"},
		{"missing version", `{"pools": []}`, "version", "unsupported version 0"},
		{"no pools", `{"version": 1, "pools": []}`, "pools", "at least one pool"},
		{"pools absent", `{"version": 1}`, "pools", "at least one pool"},
		{"not json", `{"version": 1, "pools": [`, "routing table", "unexpected EOF"},
		{"unknown field", `{"version": 1, "pools": [], "extra": 1}`, "routing table", `unknown field "extra"`},
		{"unknown region field", doc(pool(`{"name": "europe-west1", "weight": 3}`)), "routing table", `unknown field "weight"`},
		{"trailing document", doc(pool(`{"name": "europe-west1"}`)) + `{}`, "routing table", "trailing data"},
		{"trailing bracket", doc(pool(`{"name": "europe-west1"}`)) + `]`, "routing table", "trailing data"},
		{"trailing brace", doc(pool(`{"name": "europe-west1"}`)) + `}`, "routing table", "trailing data"},
		{"wrong type", `{"version": "1", "pools": []}`, "routing table", "version"},
		{"empty pool", doc(pool(``)), "pools[0].regions", "at least one region"},
		{"no project", doc(`{"model": "m", "regions": [{"name": "us-east5"}]}`), "pools[0].project", "must be set"},
		{"no model", doc(`{"project": "p", "regions": [{"name": "us-east5"}]}`), "pools[0].model", "must be set"},
		{"second pool empty", doc(pool(`{"name": "us-east5"}`), `{"project": "p", "model": "m", "regions": []}`), "pools[1].regions", "at least one region"},
		{"duplicate pool", doc(pool(`{"name": "us-east5"}`), pool(`{"name": "us-east1"}`)), "pools[1]", "duplicate pool acme-prod/google/gemini-2.5-flash"},
		{"duplicate region", doc(pool(`{"name": "us-east5"}, {"name": "europe-west1"}, {"name": "us-east5"}`)), "pools[0].regions[2].name", `duplicate region "us-east5"`},
		{"bad location", doc(pool(`{"name": "Europe West"}`)), "pools[0].regions[0].name", "not a Vertex AI location"},
		{"too many regions", doc(pool(manyRegions(MaxRegions + 1))), "pools[0].regions", "33 regions, at most 32"},
		{"endpoint without port", doc(pool(`{"name": "us-east5", "endpoint": "localhost"}`)), "pools[0].regions[0].endpoint", "not host:port"},
		{"endpoint with path", doc(pool(`{"name": "us-east5", "endpoint": "a/b:443"}`)), "pools[0].regions[0].endpoint", "not host:port"},
		{"endpoint port not a number", doc(pool(`{"name": "us-east5", "endpoint": "host:https"}`)), "pools[0].regions[0].endpoint", "not a number"},
		{"endpoint off Google", doc(pool(`{"name": "us-east5", "endpoint": "attacker.example.com:443"}`)), "pools[0].regions[0].endpoint", `host "attacker.example.com" is not a Google API host`},
		{"endpoint under a Google-looking prefix", doc(pool(`{"name": "us-east5", "endpoint": "aiplatform.googleapis.com.attacker.example:443"}`)), "pools[0].regions[0].endpoint", "not a Google API host"},
		{"endpoint hiding a fragment", doc(pool(`{"name": "us-east5", "endpoint": "attacker.example#.googleapis.com:443"}`)), "pools[0].regions[0].endpoint", "not a Google API host"},
		{"endpoint hiding user info", doc(pool(`{"name": "us-east5", "endpoint": "attacker.example@x.googleapis.com:443"}`)), "pools[0].regions[0].endpoint", "not a Google API host"},
		{"endpoint on loopback", doc(pool(`{"name": "us-east5", "endpoint": "127.0.0.1:8443"}`)), "pools[0].regions[0].endpoint", "--allow-endpoint-host=127.0.0.1"},
		{"unknown caller ceiling", doc(pool(`{"name": "us-east5"}`, `"callers": {"maxPriority": "urgent"}`)), "pools[0].callers.maxPriority", `unknown priority "urgent"`},
		{"caller namespace", doc(pool(`{"name": "us-east5"}`, `"callers": {"serviceAccounts": [{"namespace": "Team_A", "name": "x"}]}`)), "pools[0].callers.serviceAccounts[0].namespace", `"Team_A" is not a namespace name`},
		{"caller name", doc(pool(`{"name": "us-east5"}`, `"callers": {"serviceAccounts": [{"namespace": "team-a", "name": "a*"}]}`)), "pools[0].callers.serviceAccounts[0].name", `"a*" is neither`},
		{"caller priority", doc(pool(`{"name": "us-east5"}`, `"callers": {"serviceAccounts": [{"namespace": "team-a", "name": "*", "maxPriority": "Critical"}]}`)), "pools[0].callers.serviceAccounts[0].maxPriority", `unknown priority "Critical"`},
		{"caller twice", doc(pool(`{"name": "us-east5"}`, `"callers": {"serviceAccounts": [{"namespace": "team-a", "name": "*"}, {"namespace": "team-a", "name": "*"}]}`)), "pools[0].callers.serviceAccounts[1]", "duplicate ServiceAccount team-a/*"},
		{"unknown tier", doc(pool(`{"name": "us-east5", "tier": "gold"}`)), "pools[0].regions[0].tier", `unknown tier "gold"`},
		{"unknown source", doc(pool(`{"name": "us-east5", "source": "guess"}`)), "pools[0].regions[0].source", `unknown source "guess"`},
		{"negative gsus", doc(pool(`{"name": "us-east5", "tier": "provisioned", "capacity": {"gsus": -1}}`)), "pools[0].regions[0].capacity.gsus", "out of range"},
		{"too many gsus", doc(pool(`{"name": "us-east5", "tier": "provisioned", "capacity": {"gsus": 100001}}`)), "pools[0].regions[0].capacity.gsus", "out of range"},
		{"negative tokens", doc(pool(`{"name": "us-east5", "capacity": {"tokensPerSecond": -5}}`)), "pools[0].regions[0].capacity.tokensPerSecond", "out of range"},
		{"negative requests", doc(pool(`{"name": "us-east5", "capacity": {"requestsPerSecond": -0.5}}`)), "pools[0].regions[0].capacity.requestsPerSecond", "out of range"},
		{"too many requests", doc(pool(`{"name": "us-east5", "capacity": {"requestsPerSecond": 2e9}}`)), "pools[0].regions[0].capacity.requestsPerSecond", "out of range"},
		{"threshold above one", doc(pool(`{"name": "us-east5"}`, `"policy": {"ejection": {"failureRateThreshold": 1.5}}`)), "pools[0].policy.ejection.failureRateThreshold", "out of range"},
		{"threshold negative", doc(pool(`{"name": "us-east5"}`, `"policy": {"ejection": {"failureRateThreshold": -0.1}}`)), "pools[0].policy.ejection.failureRateThreshold", "out of range"},
		{"min requests negative", doc(pool(`{"name": "us-east5"}`, `"policy": {"ejection": {"minRequests": -1}}`)), "pools[0].policy.ejection.minRequests", "out of range"},
		{"interval too short", doc(pool(`{"name": "us-east5"}`, `"policy": {"ejection": {"interval": "500ms"}}`)), "pools[0].policy.ejection.interval", "out of range"},
		{"capacity share negative", doc(pool(`{"name": "us-east5"}`, `"policy": {"capacityShare": -10}`)), "pools[0].policy.capacityShare", "out of range"},
		{"capacity share over 100", doc(pool(`{"name": "us-east5"}`, `"policy": {"capacityShare": 150}`)), "pools[0].policy.capacityShare", "out of range"},
		{"interval not a duration", doc(pool(`{"name": "us-east5"}`, `"policy": {"ejection": {"interval": "ten"}}`)), "routing table", "invalid duration"},
		{"interval a number", doc(pool(`{"name": "us-east5"}`, `"policy": {"ejection": {"interval": 10}}`)), "routing table", "duration must be a string"},
		{"base ejection too long", doc(pool(`{"name": "us-east5"}`, `"policy": {"ejection": {"baseEjectionTime": "2h", "maxEjectionTime": "3h"}}`)), "pools[0].policy.ejection.baseEjectionTime", "out of range"},
		{"max ejection below base", doc(pool(`{"name": "us-east5"}`, `"policy": {"ejection": {"baseEjectionTime": "1m", "maxEjectionTime": "30s"}}`)), "pools[0].policy.ejection.maxEjectionTime", "out of range"},
		{"max ejection too long", doc(pool(`{"name": "us-east5"}`, `"policy": {"ejection": {"maxEjectionTime": "25h"}}`)), "pools[0].policy.ejection.maxEjectionTime", "out of range"},
		{"ejected percent 100", doc(pool(`{"name": "us-east5"}`, `"policy": {"ejection": {"maxEjectedPercent": 100}}`)), "pools[0].policy.ejection.maxEjectedPercent", "out of range"},
		{"attempts above five", doc(pool(`{"name": "us-east5"}`, `"policy": {"retry": {"maxAttempts": 6}}`)), "pools[0].policy.retry.maxAttempts", "out of range"},
		{"budget above 100", doc(pool(`{"name": "us-east5"}`, `"policy": {"retry": {"budgetPercent": 101}}`)), "pools[0].policy.retry.budgetPercent", "out of range"},
		{"retry floor negative", doc(pool(`{"name": "us-east5"}`, `"policy": {"retry": {"minRetriesPerSecond": -1}}`)), "pools[0].policy.retry.minRetriesPerSecond", "out of range"},
		{"unknown request type", doc(pool(`{"name": "us-east5"}`, `"policy": {"provisioned": {"requestType": "Dedicated"}}`)), "pools[0].policy.provisioned.requestType", `unknown request type "Dedicated"`},
		{"window under a second", doc(pool(`{"name": "us-east5"}`, `"policy": {"provisioned": {"window": "500ms"}}`)), "pools[0].policy.provisioned.window", "out of range [1s, 33m20s]"},
		{"window negative", doc(pool(`{"name": "us-east5"}`, `"policy": {"provisioned": {"window": "-5s"}}`)), "pools[0].policy.provisioned.window", "out of range"},
		{"window too long", doc(pool(`{"name": "us-east5"}`, `"policy": {"provisioned": {"window": "1h"}}`)), "pools[0].policy.provisioned.window", "out of range"},
		{"in flight negative", doc(pool(`{"name": "us-east5"}`, `"policy": {"concurrency": {"maxInFlight": -1}}`)), "pools[0].policy.concurrency.maxInFlight", "out of range"},
		{"initial above max", doc(pool(`{"name": "us-east5"}`, `"policy": {"concurrency": {"regionInitialLimit": 600}}`)), "pools[0].policy.concurrency.regionInitialLimit", "out of range"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse([]byte(tc.data))
			if err == nil {
				t.Fatalf("Parse accepted %s as %+v", tc.data, got)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "routing table: "+tc.path) && !strings.HasPrefix(msg, tc.path) {
				t.Errorf("error %q does not start with the path %q", msg, tc.path)
			}
			if !strings.Contains(msg, tc.detail) {
				t.Errorf("error %q does not say %q", msg, tc.detail)
			}
		})
	}
}

// TestParseErrorPathIsTheDocumentsIndex checks that a region's error names its
// index in the document, not its index after Parse sorts provisioned regions
// first: the path must lead a person to the line at fault.
func TestParseErrorPathIsTheDocumentsIndex(t *testing.T) {
	data := doc(pool(`{"name": "us-east5", "endpoint": "nope"}, {"name": "europe-west1", "tier": "provisioned"}`))
	_, err := Parse([]byte(data))
	if err == nil {
		t.Fatal("Parse accepted an endpoint without a port")
	}
	if want := "pools[0].regions[0].endpoint"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not name %s, the region's place in the document", err, want)
	}
}

func manyRegions(n int) string {
	names := make([]string, n)
	for i := range names {
		names[i] = `{"name": "region-x` + itoa(i+1) + `"}`
	}
	return strings.Join(names, ",")
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

// TestParseDefaults checks that a sparse table comes back complete: every
// field the router reads has its default, and provisioned regions are never
// ejectable whatever the document says.
func TestParseDefaults(t *testing.T) {
	data := doc(pool(`{"name": "us-east5", "ejectable": true}, {"name": "global", "tier": "provisioned", "ejectable": true, "capacity": {"gsus": 3}}`, goodPolicy))
	tb, err := Parse([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	p := tb.Pools[0]
	if p.Publisher != "google" {
		t.Errorf("publisher = %q, want google", p.Publisher)
	}
	want := []Region{
		{Name: "global", Endpoint: "aiplatform.googleapis.com:443", Tier: TierProvisioned, Ejectable: false, Source: SourceDeclared, Capacity: Capacity{GSUs: 3}},
		{Name: "us-east5", Endpoint: "us-east5-aiplatform.googleapis.com:443", Tier: TierShared, Ejectable: true, Source: SourceSpec, PayGoTiers: []PayGoTier{PayGoStandard}},
	}
	if len(p.Regions) != len(want) {
		t.Fatalf("regions = %+v", p.Regions)
	}
	for i := range want {
		if !reflect.DeepEqual(p.Regions[i], want[i]) {
			t.Errorf("regions[%d] = %+v, want %+v", i, p.Regions[i], want[i])
		}
	}
	if !p.Policy.Equal(DefaultPolicy()) {
		t.Errorf("policy = %v, want the default policy %v", p.Policy, DefaultPolicy())
	}
}

// TestDefaultPolicy: the default policy is the Default constants, each one.
func TestDefaultPolicy(t *testing.T) {
	p := DefaultPolicy()
	e, r, c := p.Ejection, p.Retry, p.Concurrency
	for _, f := range []struct {
		field     string
		got, want any
	}{
		{"ejection.failureRateThreshold", e.FailureRateThreshold, DefaultFailureRateThreshold},
		{"ejection.minRequests", e.MinRequests, DefaultMinRequests},
		{"ejection.interval", e.Interval.Duration, DefaultEjectionInterval},
		{"ejection.baseEjectionTime", e.BaseEjectionTime.Duration, DefaultBaseEjectionTime},
		{"ejection.maxEjectionTime", e.MaxEjectionTime.Duration, DefaultMaxEjectionTime},
		{"ejection.maxEjectedPercent", *e.MaxEjectedPercent, DefaultMaxEjectedPercent},
		{"retry.maxAttempts", r.MaxAttempts, DefaultMaxAttempts},
		{"retry.budgetPercent", *r.BudgetPercent, DefaultBudgetPercent},
		{"retry.minRetriesPerSecond", *r.MinRetriesPerSecond, DefaultMinRetriesPerSecond},
		{"provisioned.requestType", p.Provisioned.RequestType, DefaultRequestType},
		{"concurrency.maxInFlight", c.MaxInFlight, DefaultMaxInFlight},
		{"concurrency.regionInitialLimit", c.RegionInitialLimit, DefaultRegionInitialLimit},
		{"concurrency.regionMaxLimit", c.RegionMaxLimit, DefaultRegionMaxLimit},
		{"capacityShare", p.CapacityShare, DefaultCapacityShare},
	} {
		if f.got != f.want {
			t.Errorf("%s = %v, want %v", f.field, f.got, f.want)
		}
	}
	if err := p.Validate(); err != nil {
		t.Errorf("the default policy is invalid: %v", err)
	}
}

// TestPolicyOmittedOrZero: omitting a field, whole sections or the policy
// itself means the default; a written 0 means 0 where 0 is a setting
// (maxEjectedPercent, budgetPercent, minRetriesPerSecond), and the default
// where 0 is out of range, as in every version 1 table.
func TestPolicyOmittedOrZero(t *testing.T) {
	parse := func(extra ...string) Policy {
		t.Helper()
		tb, err := Parse([]byte(doc(pool(`{"name": "us-east5"}`, extra...))))
		if err != nil {
			t.Fatal(err)
		}
		return tb.Pools[0].Policy
	}
	for _, omitted := range []string{"", `"policy": {}`, `"policy": {"ejection": {}, "retry": {}, "provisioned": {}, "concurrency": {}}`,
		`"policy": {"ejection": {"maxEjectedPercent": null}, "retry": {"budgetPercent": null, "minRetriesPerSecond": null}}`} {
		var extra []string
		if omitted != "" {
			extra = append(extra, omitted)
		}
		if got := parse(extra...); !got.Equal(DefaultPolicy()) {
			t.Errorf("%q: policy = %v, want the default %v", omitted, got, DefaultPolicy())
		}
	}
	zeros := parse(`"policy": {"ejection": {"failureRateThreshold": 0, "minRequests": 0, "interval": "0s", "maxEjectedPercent": 0},
		"retry": {"maxAttempts": 0, "budgetPercent": 0, "minRetriesPerSecond": 0}, "concurrency": {"maxInFlight": 0}}`)
	want := DefaultPolicy()
	want.Ejection.MaxEjectedPercent = new(0)
	want.Retry.BudgetPercent, want.Retry.MinRetriesPerSecond = new(0), new(0)
	if !zeros.Equal(want) {
		t.Errorf("written zeros: policy = %v, want %v", zeros, want)
	}
}

func TestDurationJSON(t *testing.T) {
	for _, d := range []time.Duration{time.Second, 90 * time.Second, 1500 * time.Millisecond, 24 * time.Hour} {
		b, err := Duration{d}.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var back Duration
		if err := back.UnmarshalJSON(b); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if back.Duration != d {
			t.Errorf("%v went through %s and came back %v", d, b, back.Duration)
		}
	}
}

func TestLocations(t *testing.T) {
	for _, tc := range []struct {
		name, endpoint string
		valid          bool
	}{
		{"europe-west1", "europe-west1-aiplatform.googleapis.com:443", true},
		{"us-central1", "us-central1-aiplatform.googleapis.com:443", true},
		{"northamerica-northeast2", "northamerica-northeast2-aiplatform.googleapis.com:443", true},
		{"global", "aiplatform.googleapis.com:443", true},
		{"eu", "aiplatform.eu.rep.googleapis.com:443", true},
		{"us", "aiplatform.us.rep.googleapis.com:443", true},
		{"europe-west", "", false},
		{"Europe-west1", "", false},
		{"asia", "", false},
		{"", "", false},
	} {
		if got := ValidLocation(tc.name); got != tc.valid {
			t.Errorf("ValidLocation(%q) = %v, want %v", tc.name, got, tc.valid)
		}
		if tc.valid {
			if got := DefaultEndpoint(tc.name); got != tc.endpoint {
				t.Errorf("DefaultEndpoint(%q) = %q, want %q", tc.name, got, tc.endpoint)
			}
		}
	}
}

// TestRegionEjectableOmitted: a shared region that omits "ejectable" is
// ejectable, as a RegionPool's shared regions are; a written false stays
// false; a provisioned region is never ejectable.
func TestRegionEjectableOmitted(t *testing.T) {
	tb, err := Parse([]byte(doc(pool(`{"name": "us-east5"}, {"name": "us-central1", "ejectable": false}, {"name": "europe-west1", "tier": "provisioned"}`))))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"us-east5": true, "us-central1": false, "europe-west1": false}
	for _, r := range tb.Pools[0].Regions {
		if r.Ejectable != want[r.Name] {
			t.Errorf("%s: ejectable = %v, want %v", r.Name, r.Ejectable, want[r.Name])
		}
	}
}
