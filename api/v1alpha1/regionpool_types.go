package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RequestType is how calls to a provisioned region ask for its capacity.
// +kubebuilder:validation:Enum=Spillover;Dedicated
type RequestType string

const (
	// RequestTypeSpillover uses the provisioned capacity first and lets GCP serve
	// the excess as pay-as-you-go.
	RequestTypeSpillover RequestType = "Spillover"
	// RequestTypeDedicated uses only the provisioned capacity; GCP answers 429
	// beyond it and the router takes the call elsewhere.
	RequestTypeDedicated RequestType = "Dedicated"
)

// PayGoTier is a pay-as-you-go tier of Vertex AI, chosen per call with the
// X-Vertex-AI-LLM-Shared-Request-Type header: Standard (none), Priority
// (Priority PayGo: a higher price for more consistent performance) or Flex
// (Flex PayGo: half the price, slower and throttled more).
// +kubebuilder:validation:Enum=Standard;Priority;Flex
type PayGoTier string

const (
	PayGoStandard PayGoTier = "Standard"
	PayGoPriority PayGoTier = "Priority"
	PayGoFlex     PayGoTier = "Flex"
)

// RegionPoolSpec is the set of regions that serve one publisher model of one
// project, and how the router treats them.
type RegionPoolSpec struct {
	// Project is the GCP project ID the calls go to, e.g. "acme-prod".
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9-]{4,28}[a-z0-9]$`
	Project string `json:"project"`

	// Publisher is the model's publisher.
	// +kubebuilder:default=google
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9-]{0,62}$`
	// +optional
	Publisher string `json:"publisher,omitempty"`

	// Model is the publisher model ID the pool serves, e.g. "gemini-3.6-flash",
	// or "claude-sonnet-4-5@20250929" of publisher anthropic: a partner
	// model's version follows an "@", as in the path its calls name.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9.@-]{0,126}[a-z0-9])?$`
	Model string `json:"model"`

	// Regions the router may send calls to, unique by name. Locations with a
	// ready ProvisionedThroughput are added to the routing table even when not
	// listed here.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	Regions []PoolRegion `json:"regions"`

	// ProvisionedThroughputSelector selects the ProvisionedThroughput objects of
	// this namespace that protect regions of this pool. When empty, every
	// ProvisionedThroughput of the namespace with the pool's project, publisher
	// and model is selected.
	// +optional
	ProvisionedThroughputSelector *metav1.LabelSelector `json:"provisionedThroughputSelector,omitempty"`

	// Policy is how the router picks regions, ejects failing ones and retries.
	// +kubebuilder:default={}
	// +optional
	Policy RoutingPolicy `json:"policy,omitempty"`

	// Output says where the routing table is written.
	// +kubebuilder:default={}
	// +optional
	Output Output `json:"output,omitempty"`

	// Discovery says what the operator does with Provisioned Throughput that
	// GCP reports in the pool's regions and no ProvisionedThroughput declares.
	// +kubebuilder:default={}
	// +optional
	Discovery Discovery `json:"discovery,omitempty"`

	// CapacityShare is the percentage, 1 to 100, of every region's capacity
	// (Provisioned Throughput and pay-as-you-go quotas alike) that this
	// cluster's routers may use together, when several clusters route to the
	// same orders: 60 and 40 for two clusters that share them. Each router
	// of the cluster meters its own part of it. A lost cluster's share does
	// not move by itself: raise the others' (see docs/architecture.md).
	// +kubebuilder:default=100
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	CapacityShare *int32 `json:"capacityShare,omitempty"`

	// Callers says who may call through the pool and the highest priority
	// each may claim.
	// +kubebuilder:default={}
	// +optional
	Callers Callers `json:"callers,omitempty"`
}

// Priority is how a call asks to be treated when the router sheds load
// (the X-Regionwarden-Priority header): Sheddable calls are shed first,
// Critical ones last.
// +kubebuilder:validation:Enum=Critical;Default;Sheddable
type Priority string

const (
	PriorityCritical  Priority = "Critical"
	PriorityDefault   Priority = "Default"
	PrioritySheddable Priority = "Sheddable"
)

// Callers says who may call through a pool. A caller never gets a priority
// above its ceiling: a higher one is lowered to it.
type Callers struct {
	// MaxPriority is the highest priority a caller may claim when the router
	// does not authenticate it as a ServiceAccount: under --caller-auth
	// forward (the caller's own Google token goes with its call) and none.
	// +kubebuilder:default=Default
	// +optional
	MaxPriority Priority `json:"maxPriority,omitempty"`

	// ServiceAccounts are the Kubernetes ServiceAccounts that may call
	// through the pool when the router authenticates callers by their
	// ServiceAccount token (--caller-auth kubernetes). None listed admits
	// none. An entry naming an account wins over its namespace's "*".
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=256
	// +optional
	ServiceAccounts []CallerServiceAccount `json:"serviceAccounts,omitempty"`
}

// CallerServiceAccount admits the ServiceAccounts it names.
type CallerServiceAccount struct {
	// Name is a ServiceAccount as "namespace/name", or "namespace/*" for
	// every ServiceAccount of the namespace.
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?/(\*|[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)$`
	// +kubebuilder:validation:XValidation:rule="self.split('/')[0].size() <= 63",message="the namespace part of name must be at most 63 characters"
	// +kubebuilder:validation:XValidation:rule="self.split('/')[1].size() <= 253",message="the ServiceAccount part of name must be at most 253 characters"
	Name string `json:"name"`

	// MaxPriority is the highest priority these callers may claim.
	// +kubebuilder:default=Default
	// +optional
	MaxPriority Priority `json:"maxPriority,omitempty"`
}

// DiscoveryMode says what the operator does with Provisioned Throughput that
// GCP reports and no ProvisionedThroughput object declares.
// +kubebuilder:validation:Enum=Protect;Warn;Off
type DiscoveryMode string

const (
	// DiscoveryProtect routes a discovered region as provisioned, never
	// ejected, and warns until a ProvisionedThroughput declares it.
	DiscoveryProtect DiscoveryMode = "Protect"
	// DiscoveryWarn leaves the routing table as the declarations make it and
	// warns.
	DiscoveryWarn DiscoveryMode = "Warn"
	// DiscoveryOff makes no discovery calls to GCP.
	DiscoveryOff DiscoveryMode = "Off"
)

// DefaultDiscoveryInterval is how often a pool asks GCP when
// spec.discovery.interval is unset; the schema's default is the same value.
const DefaultDiscoveryInterval = 5 * time.Minute

// Discovery configures how the pool finds Provisioned Throughput in its
// regions that GCP reports and nobody declared.
type Discovery struct {
	// Mode is Protect (route discovered regions as provisioned and warn),
	// Warn (warn only) or Off (make no discovery calls).
	// +kubebuilder:default=Protect
	// +optional
	Mode DiscoveryMode `json:"mode,omitempty"`

	// Interval between discoveries, at least 30s. GCP is asked once per project
	// and interval, in a call shared with ProvisionedThroughput verification.
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('30s')",message="interval must be at least 30s"
	// +optional
	Interval *metav1.Duration `json:"interval,omitempty"`

	// GracePeriod is how long GCP must report no Provisioned Throughput in a
	// discovered region, in answers it gave, before the region loses
	// discovered protection. Time in which GCP could not be asked never counts.
	// +kubebuilder:default="1h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`
	// +optional
	GracePeriod *metav1.Duration `json:"gracePeriod,omitempty"`
}

// PoolRegion is one Vertex AI location of a pool.
type PoolRegion struct {
	// Name is the location: a GCP region such as "europe-west4", or "global",
	// "eu" or "us".
	// +kubebuilder:validation:Pattern=`^([a-z]+-[a-z]+[0-9]{1,2}|global|eu|us)$`
	Name string `json:"name"`

	// RequestsPerSecond is a hint of the region's capacity for this model; the
	// router never sends the region more. Unset means unknown: the region's own
	// 429 answers bound it.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	RequestsPerSecond *int32 `json:"requestsPerSecond,omitempty"`

	// Endpoint overrides the aiplatform host:port for this region: a Google
	// API host (a name under googleapis.com, such as a Private Service
	// Connect endpoint, aiplatform-NAME.p.googleapis.com or
	// aiplatform.REGION.p.rep.googleapis.com), or a loopback address for an
	// emulator beside the router. Credentials go with every call, so no other
	// host is accepted; a router calls a loopback address only when its
	// --allow-endpoint-host names it. Default: Google's endpoint for the
	// location.
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?:[0-9]{1,5}$`
	// +kubebuilder:validation:MaxLength=261
	// +kubebuilder:validation:XValidation:rule="self.matches('(?i)^([a-z0-9]([a-z0-9-]*[a-z0-9])?[.])+googleapis[.]com:[0-9]+$') || self.matches('^(localhost|127([.][0-9]{1,3}){3}):[0-9]+$')",message="endpoint must be a Google API host (*.googleapis.com, Private Service Connect names included) or a loopback address: the router sends credentials nowhere else"
	// +optional
	Endpoint string `json:"endpoint,omitempty"`

	// PayGoTiers are the pay-as-you-go tiers the router may call at this
	// location: Standard, Priority, Flex. Google offers Priority and Flex
	// PayGo for some models and locations only (the global endpoint), and
	// they cost differently, so the router uses them only where they are
	// listed, for the calls spec.policy.payGo gives them to. Unset: Standard
	// while the location holds no Provisioned Throughput. While it does,
	// with requestType Spillover the router calls the location's Standard
	// as the PT's overflow (where Google spills it), only for calls no other
	// capacity that answers has room for; with Dedicated, not at all.
	// Listing tiers lets the router call them directly, ranked as any
	// region's, e.g. Priority PayGo on global while the PT there is full.
	// +listType=set
	// +kubebuilder:validation:MaxItems=3
	// +optional
	PayGoTiers []PayGoTier `json:"payGoTiers,omitempty"`
}

// RoutingPolicy holds the router's knobs for a pool.
type RoutingPolicy struct {
	// Ejection puts failing pay-as-you-go regions behind the others for a
	// while: an ejected region takes only the calls no other region has
	// room for.
	// +kubebuilder:default={}
	// +optional
	Ejection EjectionPolicy `json:"ejection,omitempty"`
	// Retry bounds retries.
	// +kubebuilder:default={}
	// +optional
	Retry RetryPolicy `json:"retry,omitempty"`
	// Provisioned says how provisioned regions are called.
	// +kubebuilder:default={}
	// +optional
	Provisioned ProvisionedPolicy `json:"provisioned,omitempty"`
	// PayGo says which pay-as-you-go tiers calls of each priority may use.
	// +kubebuilder:default={}
	// +optional
	PayGo PayGoPolicy `json:"payGo,omitempty"`
}

// PayGoPolicy maps a call's priority (X-Regionwarden-Priority, capped by
// spec.callers) to the pay-as-you-go tiers it may use once provisioned
// capacity is full, in order of preference (each list is atomic: its order
// is the preference, and a tier appears once). Provisioned Throughput always
// comes first: it is paid for. A tier no region lists in payGoTiers is
// skipped, so the defaults cost nothing extra until a region lists Priority
// or Flex.
type PayGoPolicy struct {
	// Critical calls: by default Priority PayGo where a region offers it,
	// else Standard.
	// +kubebuilder:default={Priority,Standard}
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=3
	// +kubebuilder:validation:XValidation:rule="self.all(t, self.filter(u, u == t).size() == 1)",message="a tier is listed once"
	// +optional
	Critical []PayGoTier `json:"critical,omitempty"`
	// Default calls: by default Standard.
	// +kubebuilder:default={Standard}
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=3
	// +kubebuilder:validation:XValidation:rule="self.all(t, self.filter(u, u == t).size() == 1)",message="a tier is listed once"
	// +optional
	Default []PayGoTier `json:"default,omitempty"`
	// Sheddable calls: by default Flex PayGo where a region offers it, else
	// Standard.
	// +kubebuilder:default={Flex,Standard}
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=3
	// +kubebuilder:validation:XValidation:rule="self.all(t, self.filter(u, u == t).size() == 1)",message="a tier is listed once"
	// +optional
	Sheddable []PayGoTier `json:"sheddable,omitempty"`
}

// EjectionPolicy is failure-rate outlier detection for pay-as-you-go regions.
// Provisioned regions are never ejected.
// +kubebuilder:validation:XValidation:rule="!has(self.maxEjectionTime) || !has(self.baseEjectionTime) || duration(self.maxEjectionTime) >= duration(self.baseEjectionTime)",message="maxEjectionTime must be at least baseEjectionTime",fieldPath=".maxEjectionTime"
type EjectionPolicy struct {
	// FailureRateThreshold in (0, 1]: a region whose failure rate over the
	// interval reaches it is ejected. 429 answers never count as failures.
	// +kubebuilder:default=0.5
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:ExclusiveMinimum=true
	// +kubebuilder:validation:Maximum=1
	// +optional
	FailureRateThreshold float64 `json:"failureRateThreshold,omitempty"`

	// MinRequests is how many calls the interval must hold before its failure
	// rate counts.
	// +kubebuilder:default=20
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	MinRequests int32 `json:"minRequests,omitempty"`

	// Interval is the sliding window failures are counted over, 1s to 1h.
	// +kubebuilder:default="10s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('1h')",message="interval must be between 1s and 1h"
	// +optional
	Interval *metav1.Duration `json:"interval,omitempty"`

	// BaseEjectionTime times the number of times a region was ejected is how
	// long an ejection lasts, 1s to 1h.
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('1h')",message="baseEjectionTime must be between 1s and 1h"
	// +optional
	BaseEjectionTime *metav1.Duration `json:"baseEjectionTime,omitempty"`

	// MaxEjectionTime caps an ejection, at most 24h.
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('24h')",message="maxEjectionTime must be at most 24h"
	// +optional
	MaxEjectionTime *metav1.Duration `json:"maxEjectionTime,omitempty"`

	// MaxEjectedPercent in [0, 100): never more than this share of the pool's
	// regions is ejected at once. 0 turns ejection off.
	// +kubebuilder:default=50
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=99
	// +optional
	MaxEjectedPercent *int32 `json:"maxEjectedPercent,omitempty"`
}

// RetryPolicy bounds retries so that they cannot multiply load.
type RetryPolicy struct {
	// MaxAttempts per call, the first included, each to another region where
	// one is left. An attempt answered 429 (no room: Google refused it before
	// the model ran) does not count; past this many, such a call goes on
	// only to capacities it has not tried, at most 5 attempts in all.
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=5
	// +optional
	MaxAttempts int32 `json:"maxAttempts,omitempty"`

	// BudgetPercent of recent calls that may be retries, 0 to 100. It also
	// spaces the probes of a demoted or ejected region: at least
	// 100/budgetPercent calls apart (100 at 0), so that the probes that
	// fail are at most this share of the calls, at any rate.
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	BudgetPercent *int32 `json:"budgetPercent,omitempty"`

	// MinRetriesPerSecond is a floor of retries allowed whatever the ratio.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	// +optional
	MinRetriesPerSecond *int32 `json:"minRetriesPerSecond,omitempty"`
}

// ProvisionedPolicy says how provisioned regions are called.
type ProvisionedPolicy struct {
	// RequestType is Spillover (provisioned capacity first, GCP serves the
	// excess as pay-as-you-go) or Dedicated (provisioned capacity only; the
	// router takes the excess elsewhere).
	// +kubebuilder:default=Spillover
	// +optional
	RequestType RequestType `json:"requestType,omitempty"`

	// Window is the span over which the router meters each provisioned
	// region's token limit: capacity x window tokens in any sliding window
	// of that length, as Google enforces a PT's quota over a window that
	// depends on the order's size. Unset: each region's window follows from
	// its GSUs, the shortest of Google's range for the size (up to 3 GSUs
	// 40s, under 50 GSUs 5s, 50 or more and unknown 1s), so the router never
	// sends a burst Google's window refuses. Set it, 1s to 2000s, when
	// Google documents another window for the model; a window longer than
	// Google's comes back as a full PT, and the router spills.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('2000s')",message="window must be between 1s and 2000s"
	// +optional
	Window *metav1.Duration `json:"window,omitempty"`
}

// Output says where the routing table is written.
type Output struct {
	// ConfigMapName is the ConfigMap, in the pool's namespace, that receives the
	// routing table. Default: "<pool name>-routing".
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	ConfigMapName string `json:"configMapName,omitempty"`
}

// RegionStatus is how the routing table treats one region.
type RegionStatus struct {
	// Name is the location.
	Name string `json:"name"`
	// Tier is provisioned or shared.
	Tier string `json:"tier"`
	// Ejectable says whether the router may eject the region.
	Ejectable bool `json:"ejectable"`
	// Source says why the region has its tier: spec, declared (a ready
	// ProvisionedThroughput) or discovered.
	// +optional
	Source string `json:"source,omitempty"`
	// ProvisionedThroughput names the object that makes the region provisioned.
	// +optional
	ProvisionedThroughput string `json:"provisionedThroughput,omitempty"`
}

// DiscoveredRegion is Provisioned Throughput that GCP reports in one of the
// pool's regions for the pool's model.
type DiscoveredRegion struct {
	// Name is the location.
	Name string `json:"name"`
	// GSUs is the dedicated GSU limit GCP last reported.
	GSUs int64 `json:"gsus"`
	// TokensPerSecond is the dedicated token limit GCP last reported.
	// +optional
	TokensPerSecond float64 `json:"tokensPerSecond,omitempty"`
	// LastSeenTime is the time of the last GCP answer that reported it.
	LastSeenTime metav1.Time `json:"lastSeenTime"`
	// MissingSince is the time of the first GCP answer, since LastSeenTime,
	// that did not report it; empty while GCP reports it.
	// +optional
	MissingSince *metav1.Time `json:"missingSince,omitempty"`
	// Utilization is the dedicated tokens per second GCP counted over its
	// last 5-minute window, over TokensPerSecond: how full the order is, with
	// every cluster and caller that uses it counted, as GCP counts it. 1 is
	// full; absent when GCP reports no token limit.
	// +optional
	Utilization float64 `json:"utilization,omitempty"`
	// SaturatedSince is the time of the first of an unbroken run of GCP
	// answers with utilization at or over SaturationThreshold; empty when the
	// last answer was under it.
	// +optional
	SaturatedSince *metav1.Time `json:"saturatedSince,omitempty"`
	// ProvisionedThroughput names the objects that declare the capacity;
	// empty when none does: the capacity is undeclared.
	// +optional
	ProvisionedThroughput string `json:"provisionedThroughput,omitempty"`
}

// RegionPoolStatus is what the operator rendered.
type RegionPoolStatus struct {
	// Conditions: Ready, CapacityDeclared, CapacitySaturated, Reconciling and
	// Stalled.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ObservedGeneration is the generation the status describes: the
	// operator reconciled it in full, or is stalled on it (Stalled says
	// why). The schema's default, 0, makes a new object read as not yet
	// observed, so Flux (kstatus) and Argo CD wait for the operator rather
	// than take a status nobody wrote for a current one.
	// +kubebuilder:default=0
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// ProtectedRegions are the regions routed as provisioned, never ejected.
	// +optional
	ProtectedRegions []string `json:"protectedRegions,omitempty"`
	// Regions is every region of the routing table with its tier.
	// +optional
	Regions []RegionStatus `json:"regions,omitempty"`
	// RegionCount is how many regions the routing table holds.
	// +optional
	RegionCount *int32 `json:"regionCount,omitempty"`
	// ProvisionedCount is how many of them are provisioned, never ejected.
	// +optional
	ProvisionedCount *int32 `json:"provisionedCount,omitempty"`
	// Summary says the same in words, with the provisioned regions' names:
	// "4 regions, 1 provisioned: europe-west1".
	// +optional
	Summary string `json:"summary,omitempty"`
	// ConfigMapName is the ConfigMap that holds the routing table.
	// +optional
	ConfigMapName string `json:"configMapName,omitempty"`
	// TableHash is the hash of the routing table last written.
	// +optional
	TableHash string `json:"tableHash,omitempty"`
	// Discovered is the Provisioned Throughput GCP reports in the pool's
	// regions for its model, declared or not, kept through GCP outages and
	// operator restarts.
	// +listType=map
	// +listMapKey=name
	// +optional
	Discovered []DiscoveredRegion `json:"discovered,omitempty"`
	// LastDiscoveryTime is when GCP last answered a discovery.
	// +optional
	LastDiscoveryTime *metav1.Time `json:"lastDiscoveryTime,omitempty"`
}

// RegionPool is the set of Vertex AI regions that serve one model of one
// project. The operator renders it, with the ProvisionedThroughput objects that
// select it, into a routing-table ConfigMap that routers read.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=rpool,categories=regionwarden
// +kubebuilder:printcolumn:name="Model",type=string,JSONPath=`.spec.model`
// +kubebuilder:printcolumn:name="Regions",type=integer,JSONPath=`.status.regionCount`
// +kubebuilder:printcolumn:name="Provisioned",type=integer,JSONPath=`.status.provisionedCount`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Summary",type=string,JSONPath=`.status.summary`,priority=1
// +kubebuilder:printcolumn:name="Declared",type=string,JSONPath=`.status.conditions[?(@.type=="CapacityDeclared")].status`,priority=1
// +kubebuilder:printcolumn:name="Table",type=string,JSONPath=`.status.configMapName`,priority=1
type RegionPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the pool's regions and policy.
	Spec RegionPoolSpec `json:"spec"`
	// Status is what the operator rendered.
	// +kubebuilder:default={}
	// +optional
	Status RegionPoolStatus `json:"status,omitempty"`
}

// RegionPoolList is a list of RegionPool.
// +kubebuilder:object:root=true
type RegionPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RegionPool `json:"items"`
}

// GetPublisher returns the publisher, defaulted.
func (p *RegionPool) GetPublisher() string { return publisherOrDefault(p.Spec.Publisher) }

// GetConfigMapName returns the output ConfigMap's name, defaulted to "<name>-routing".
func (p *RegionPool) GetConfigMapName() string {
	if p.Spec.Output.ConfigMapName != "" {
		return p.Spec.Output.ConfigMapName
	}
	return p.Name + "-routing"
}

// DefaultCapacityShare is spec.capacityShare when unset: the whole capacity.
// It is router/table's default too (a test compares them).
const DefaultCapacityShare = 100

// GetCapacityShare returns the cluster's capacity share in percent, defaulted.
func (p *RegionPool) GetCapacityShare() int {
	if v := p.Spec.CapacityShare; v != nil && *v > 0 {
		return int(*v)
	}
	return DefaultCapacityShare
}

// GetDiscoveryMode returns the discovery mode, defaulted to Protect.
func (p *RegionPool) GetDiscoveryMode() DiscoveryMode {
	if p.Spec.Discovery.Mode == "" {
		return DiscoveryProtect
	}
	return p.Spec.Discovery.Mode
}

// GetDiscoveryInterval returns the discovery interval, defaulted.
func (p *RegionPool) GetDiscoveryInterval() time.Duration {
	if v := p.Spec.Discovery.Interval; v != nil && v.Duration > 0 {
		return v.Duration
	}
	return DefaultDiscoveryInterval
}

// GetDiscoveryGracePeriod returns the discovery grace period, defaulted to
// the ProvisionedThroughput default.
func (p *RegionPool) GetDiscoveryGracePeriod() time.Duration {
	if v := p.Spec.Discovery.GracePeriod; v != nil && v.Duration >= 0 {
		return v.Duration
	}
	return DefaultGracePeriod
}

// Discovery's condition on a RegionPool.
const (
	// ConditionCapacityDeclared is True when every region in which GCP reports
	// Provisioned Throughput for the pool's model has a ProvisionedThroughput
	// object that declares it.
	ConditionCapacityDeclared = "CapacityDeclared"
	// ReasonUndeclaredProvisionedThroughput: GCP reports Provisioned
	// Throughput that no ProvisionedThroughput object declares.
	ReasonUndeclaredProvisionedThroughput = "UndeclaredProvisionedThroughput"
	// ReasonDeclared: every Provisioned Throughput GCP reports is declared.
	ReasonDeclared = "Declared"
	// ReasonDiscoveryOff: discovery makes no GCP calls.
	ReasonDiscoveryOff = "DiscoveryOff"
)

// Headroom of the pool's Provisioned Throughput, from GCP's answers to
// discovery.
const (
	// ConditionCapacitySaturated is True when a provisioned region's
	// utilization, as GCP counts it, has stayed at or over
	// SaturationThreshold for SaturationPeriod: capacity to buy, or a share
	// to move, before callers see 429s or spillover.
	ConditionCapacitySaturated = "CapacitySaturated"
	// ReasonSaturated: a region has stayed over the threshold.
	ReasonSaturated = "Saturated"
	// ReasonHeadroom: no region has.
	ReasonHeadroom = "Headroom"
	// SaturationThreshold is the utilization at which a region counts as
	// saturated.
	SaturationThreshold = 0.9
	// SaturationPeriod is how long GCP's answers must show a region
	// saturated: three 5-minute windows of Monitoring, so that one busy
	// window (a batch job, a retry storm) is not capacity to buy.
	SaturationPeriod = 15 * time.Minute
)

// GetConditions returns the status conditions.
func (p *RegionPool) GetConditions() []metav1.Condition { return p.Status.Conditions }

// SetConditions replaces the status conditions.
func (p *RegionPool) SetConditions(c []metav1.Condition) { p.Status.Conditions = c }

// SetObservedGeneration records the generation the status describes.
func (p *RegionPool) SetObservedGeneration(g int64) { p.Status.ObservedGeneration = g }
