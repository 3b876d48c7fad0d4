// Package table is the routing table: the one contract between the operator,
// which renders it from RegionPool and ProvisionedThroughput objects, and the
// router, which parses it and routes by it.
//
// The table is versioned JSON. Rendering is deterministic (regions sorted, no
// timestamps), so the same inputs give byte-identical output and the same hash.
// Parse applies defaults and validates, so a table that parses is complete: the
// router never has to guess a value.
//
// This package imports nothing from the operator: router pods run without the
// Kubernetes API types.
package table

import (
	"encoding/json"
	"reflect"
	"time"
)

// Version is the only table format version this package reads and writes.
const Version = 1

// Names shared by the operator, which writes routing ConfigMaps, and the router,
// which finds and reads them.
const (
	// DataKey is the ConfigMap key (and file name, when mounted) that holds the table.
	DataKey = "routing.json"
	// LabelRoutingTable marks a ConfigMap as a routing table; its value is "true".
	LabelRoutingTable = "capacity.regionwarden.io/routing-table"
	// AnnotationHash holds the table's Hash, so a change is visible without reading the data.
	AnnotationHash = "capacity.regionwarden.io/table-hash"
)

// Table is one routing table document.
type Table struct {
	// Version is the format version; Parse refuses any other than Version.
	Version int `json:"version"`
	// Pools are the region pools this table routes. A table rendered by the
	// operator holds exactly one; a hand-written file may hold several. Pools are
	// unique by Key.
	Pools []Pool `json:"pools"`
}

// Pool is the set of regions that serve one publisher model of one GCP project.
type Pool struct {
	// Namespace and Name identify the RegionPool that rendered this pool; empty
	// for hand-written tables. Informational: the router finds a pool by Key.
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	// Project is the GCP project ID the calls are billed to.
	Project string `json:"project"`
	// Publisher is the model publisher, "google" for Gemini.
	Publisher string `json:"publisher"`
	// Model is the publisher model ID, e.g. "gemini-3.6-flash".
	Model string `json:"model"`
	// Regions are sorted: provisioned first, then by name. At least one.
	Regions []Region `json:"regions"`
	// Policy holds every routing knob, defaults filled in.
	Policy Policy `json:"policy"`
	// Callers says who may call through the pool, defaults filled in.
	Callers Callers `json:"callers"`
}

// Key identifies the pool a request belongs to.
type Key struct {
	Project, Publisher, Model string
}

// Key returns the pool's lookup key.
func (p *Pool) Key() Key { return Key{Project: p.Project, Publisher: p.Publisher, Model: p.Model} }

// Tier says what kind of capacity a region offers.
type Tier string

const (
	// TierProvisioned is reserved, paid-for capacity (Provisioned Throughput).
	TierProvisioned Tier = "provisioned"
	// TierShared is best-effort pay-as-you-go capacity.
	TierShared Tier = "shared"
)

// Source says why a region is in the table with its tier.
type Source string

const (
	// SourceSpec is a region listed in the RegionPool spec with no provisioned capacity.
	SourceSpec Source = "spec"
	// SourceDeclared is a region made provisioned by a ready ProvisionedThroughput object.
	SourceDeclared Source = "declared"
	// SourceDiscovered is a region GCP reports provisioned capacity for that no
	// ProvisionedThroughput object declares.
	SourceDiscovered Source = "discovered"
)

// Region is one Vertex AI location of a pool.
type Region struct {
	// Name is the location: a region such as "europe-west1", or "global", "eu", "us".
	Name string `json:"name"`
	// Endpoint is the host:port of the region's aiplatform API. Defaults to
	// DefaultEndpoint(Name).
	Endpoint string `json:"endpoint"`
	// Tier is provisioned or shared.
	Tier Tier `json:"tier"`
	// Ejectable says whether the router may eject the region on failures.
	// Always false for provisioned regions: their capacity is paid for. A
	// document that omits it gets true for a shared region, as every shared
	// region of a RegionPool is ejectable; Go code that builds a Region sets
	// it.
	Ejectable bool `json:"ejectable"`
	// Source says why the region has its tier. Defaults to "spec" for shared
	// regions and "declared" for provisioned ones.
	Source Source `json:"source"`
	// Capacity is what the region can take; zero fields are unknown.
	Capacity Capacity `json:"capacity"`
	// PayGoTiers are the pay-as-you-go tiers the router may call in the
	// region, in PayGoTiers order. Omitted: DefaultRegionPayGoTiers (standard
	// for a shared region, none for a provisioned one, whose PT's overflow
	// the router sends to standard in spillover mode all the same, last).
	// Capacity hints are
	// the provisioned capacity's (provisioned) or standard pay-as-you-go's
	// (shared): Priority and Flex have no hint, and the router learns their
	// room from their own 429s.
	PayGoTiers []PayGoTier `json:"payGoTiers,omitempty"`
}

// Capacity is what a region can take. A zero field means "not known": the router
// then relies on the region's own 429 answers alone for that dimension.
type Capacity struct {
	// GSUs is the Provisioned Throughput bought in the region (provisioned only).
	GSUs int64 `json:"gsus,omitempty"`
	// TokensPerSecond is the provisioned token limit GCP reports (provisioned only).
	TokensPerSecond float64 `json:"tokensPerSecond,omitempty"`
	// RequestsPerSecond is a hint of how many requests per second the region
	// takes; the router never sends a region more than this.
	RequestsPerSecond float64 `json:"requestsPerSecond,omitempty"`
}

// RequestType is how calls to a provisioned region ask for its capacity, sent
// as the X-Vertex-AI-LLM-Request-Type header (Provisioned.Headers).
type RequestType string

const (
	// RequestTypeSpillover sends no header: PT first, pay-as-you-go beyond it.
	RequestTypeSpillover RequestType = "spillover"
	// RequestTypeDedicated sends "dedicated": PT only, 429 beyond it.
	RequestTypeDedicated RequestType = "dedicated"
)

// Policy is every routing knob of a pool. A field a table omits means its
// default, the same default a RegionPool that omits the field gets: Parse
// (through Default) fills it from the Default constants, so a parsed Policy is
// complete.
//
// Where zero is out of a field's range (a threshold, a duration, a limit),
// zero means the default too, as it always has in version 1 tables. The three
// fields whose zero is a setting of its own (maxEjectedPercent 0: never
// eject; budgetPercent 0: no retries beyond the floor; minRetriesPerSecond 0:
// no floor) are pointers, as they are in the RegionPool API: nil (omitted)
// means the default, and a written 0 means 0.
type Policy struct {
	Ejection    Ejection    `json:"ejection"`
	Retry       Retry       `json:"retry"`
	Provisioned Provisioned `json:"provisioned"`
	Concurrency Concurrency `json:"concurrency"`
	// PayGo is which pay-as-you-go tiers calls of each priority may use.
	PayGo PayGo `json:"payGo"`
	// CapacityShare is the percentage, 1 to 100, of every region's capacity
	// (and quota) that this cluster's routers may use together, when several
	// clusters route to the same orders. Each router takes its own part of it
	// (router/share). Default 100.
	CapacityShare int `json:"capacityShare"`
}

// Equal reports whether p and q hold the same settings; pointer fields are
// compared by the values they point to.
func (p Policy) Equal(q Policy) bool { return reflect.DeepEqual(p, q) }

// String is the policy as JSON, pointer fields as their values.
func (p Policy) String() string {
	b, err := json.Marshal(p)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// Ejection removes a failing best-effort region for a while (Envoy's
// failure-percentage outlier detection).
type Ejection struct {
	// FailureRateThreshold in (0,1]: a region whose failure rate over Interval
	// reaches it is ejected. Default 0.5.
	FailureRateThreshold float64 `json:"failureRateThreshold"`
	// MinRequests is how many requests Interval must hold before the rate counts.
	// Default 20.
	MinRequests int `json:"minRequests"`
	// Interval is the sliding window failures are counted over. Default 10s.
	Interval Duration `json:"interval"`
	// BaseEjectionTime times the number of ejections is how long one lasts. Default 30s.
	BaseEjectionTime Duration `json:"baseEjectionTime"`
	// MaxEjectionTime caps an ejection. Default 5m.
	MaxEjectionTime Duration `json:"maxEjectionTime"`
	// MaxEjectedPercent in [0,100): never more than this share of regions is
	// ejected at once; 0 never ejects. Default 50 (nil).
	MaxEjectedPercent *int `json:"maxEjectedPercent"`
}

// Retry bounds retries (Finagle and Linkerd retry budgets).
type Retry struct {
	// MaxAttempts per request, first attempt included, 1 to 5. Default 2.
	// An attempt answered 429 does not count; past this many, such a call
	// goes on only to capacities it has not tried, at most 5 attempts in all.
	MaxAttempts int `json:"maxAttempts"`
	// BudgetPercent of recent requests that may be retries, 0 to 100. Default
	// 10 (nil). It also spaces a demoted or ejected region's probes: at
	// least 100/BudgetPercent calls apart (100 at 0).
	BudgetPercent *int `json:"budgetPercent"`
	// MinRetriesPerSecond is a floor of retries allowed whatever the ratio; 0
	// is no floor. Default 1 (nil).
	MinRetriesPerSecond *int `json:"minRetriesPerSecond"`
}

// Provisioned says how provisioned regions are called and metered.
type Provisioned struct {
	// RequestType is spillover (default) or dedicated.
	RequestType RequestType `json:"requestType"`
	// Window is the span over which the router meters each PT's token
	// limit: capacity x window tokens in any sliding window of that length,
	// as Google enforces a PT's quota over a window (window.go). Zero
	// (omitted): each region's window follows from its GSUs
	// (DefaultProvisionedWindow). Set: 1s to MaxProvisionedWindow, the same
	// for every provisioned region of the pool.
	Window Duration `json:"window,omitzero"`
}

// Concurrency bounds in-flight calls (bulkheads).
type Concurrency struct {
	// MaxInFlight is the pool-wide cap on calls in flight. Default 1024.
	MaxInFlight int `json:"maxInFlight"`
	// RegionInitialLimit is a region's in-flight limit before it adapts. Default 64.
	RegionInitialLimit int `json:"regionInitialLimit"`
	// RegionMaxLimit caps a region's adaptive in-flight limit. Default 512.
	RegionMaxLimit int `json:"regionMaxLimit"`
}

// Duration is a time.Duration written as a Go duration string ("10s").
type Duration struct {
	time.Duration
}
