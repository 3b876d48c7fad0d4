package table

import (
	"fmt"
	"slices"
)

// PayGoTier is a pay-as-you-go tier of Vertex AI, chosen per call with the
// X-Vertex-AI-LLM-Shared-Request-Type header (Google's "Priority PayGo" and
// "Flex PayGo" pages):
//
//   - standard: no header. Dynamic shared quota: a 429 "Resource exhausted,
//     please try again later." when the shared pool has no room.
//   - priority: "priority". Priority PayGo: a higher price per token for more
//     consistent performance, for critical, latency-sensitive work.
//   - flex: "flex". Flex PayGo: half the standard price, longer latency and
//     more throttling, for work that can wait.
//
// Priority and Flex are offered for some models and at some locations only
// (the pages name the global endpoint; Priority also the eu and us
// multi-regions for some models), so a pool says where it may use them
// (Region.PayGoTiers) and which calls may (PayGo).
type PayGoTier string

const (
	// PayGoStandard is standard pay-as-you-go: no shared request type.
	PayGoStandard PayGoTier = "standard"
	// PayGoPriority is Priority PayGo.
	PayGoPriority PayGoTier = "priority"
	// PayGoFlex is Flex PayGo.
	PayGoFlex PayGoTier = "flex"
)

// PayGoTiers are the tiers, in the order tables list them.
var PayGoTiers = [...]PayGoTier{PayGoStandard, PayGoPriority, PayGoFlex}

// Index is the tier's place in PayGoTiers, -1 for an unknown tier.
func (t PayGoTier) Index() int {
	for i, v := range PayGoTiers {
		if v == t {
			return i
		}
	}
	return -1
}

// Header names and values that pick the capacity of a call (Google's "Use
// Provisioned Throughput", "Priority PayGo" and "Flex PayGo" pages). Over
// gRPC they travel as metadata under the same names, in lower case.
const (
	// HeaderRequestType picks provisioned or pay-as-you-go capacity:
	// "dedicated" is Provisioned Throughput only (beyond it a 429 "Too many
	// requests. Exceeded the Provisioned Throughput."), "shared" is
	// pay-as-you-go only, and no header is Provisioned Throughput first,
	// then spillover to pay-as-you-go.
	HeaderRequestType = "X-Vertex-AI-LLM-Request-Type"
	// HeaderSharedRequestType picks the pay-as-you-go tier: "priority" or
	// "flex"; no header is standard. With Provisioned Throughput active and
	// no request type, it is the tier the PT's overflow spills into.
	HeaderSharedRequestType = "X-Vertex-AI-LLM-Shared-Request-Type"

	// RequestTypeShared is the HeaderRequestType value of pay-as-you-go only.
	RequestTypeShared = "shared"
)

// Headers are the HeaderRequestType and HeaderSharedRequestType values ("":
// no header) of an attempt that asks for capacity of kind tier (the region's
// Provisioned Throughput, or pay-as-you-go alone) and pay-as-you-go tier
// payGo, in a pool whose provisioned regions are called as p says. They are
// derived here alone, from the attempt, where it is sent:
//
//   - provisioned, dedicated: "dedicated" and no tier. Beyond the PT Google
//     answers 429 "Exceeded the Provisioned Throughput", and the router, not
//     Google, decides where the call spills.
//   - provisioned, spillover: no request type, so the PT's overflow spills
//     within the region, into payGo (no shared request type for standard, or
//     when the region lists none of the call's tiers: Google's default).
//   - shared: "shared", so that pay-as-you-go capacity is all the attempt
//     uses and it never draws on a PT bought for another route, with payGo's
//     shared request type.
func (p Provisioned) Headers(tier Tier, payGo PayGoTier) (requestType, sharedRequestType string) {
	switch {
	case tier == TierProvisioned && p.RequestType == RequestTypeDedicated:
		return string(RequestTypeDedicated), ""
	case tier == TierProvisioned:
		return "", payGo.header()
	}
	return RequestTypeShared, payGo.header()
}

// header is the HeaderSharedRequestType value of the tier: "" for standard
// (and for none).
func (t PayGoTier) header() string {
	switch t {
	case PayGoPriority, PayGoFlex:
		return string(t)
	}
	return ""
}

// Default pay-as-you-go tiers by priority: the tiers a call may use, in
// order, once the provisioned capacity it would take first is full. They
// cost nothing extra until a pool lists Priority or Flex for a region
// (Region.PayGoTiers lists standard alone by default): a tier no region
// offers is skipped.
var (
	DefaultPayGoCritical  = []PayGoTier{PayGoPriority, PayGoStandard}
	DefaultPayGoDefault   = []PayGoTier{PayGoStandard}
	DefaultPayGoSheddable = []PayGoTier{PayGoFlex, PayGoStandard}
)

// DefaultRegionPayGoTiers is what a region that lists no pay-as-you-go
// tiers offers: standard, if it is a shared region. A provisioned region
// that lists none is called for its Provisioned Throughput, and in
// spillover mode also for the PT's overflow, which Google spills into the
// location's standard pay-as-you-go: the router calls that as the last of
// the capacities that answer (policy: rankOverflow), for the calls no other
// has room for. Listing tiers for it lets the router call them directly,
// ranked as any region's (Priority PayGo on global while the PT there is
// full, say).
func DefaultRegionPayGoTiers(t Tier) []PayGoTier {
	if t == TierProvisioned {
		return nil
	}
	return []PayGoTier{PayGoStandard}
}

// PayGo maps a call's priority to the pay-as-you-go tiers it may use, in
// order of preference. Provisioned capacity always comes first: it is paid
// for, so any call it can serve costs nothing more there. A tier a region
// does not offer (Region.PayGoTiers) is skipped there; a call whose tiers no
// region offers is served by provisioned capacity alone.
type PayGo struct {
	// Critical calls. Default [priority, standard]: Priority PayGo where a
	// region offers it, standard pay-as-you-go else.
	Critical []PayGoTier `json:"critical"`
	// Default calls. Default [standard].
	Default []PayGoTier `json:"default"`
	// Sheddable calls. Default [flex, standard]: Flex PayGo where a region
	// offers it, standard pay-as-you-go else.
	Sheddable []PayGoTier `json:"sheddable"`
}

// Tiers returns the tiers of calls of priority pr; an unknown priority is
// treated as default.
func (g *PayGo) Tiers(pr Priority) []PayGoTier {
	switch pr {
	case PriorityCritical:
		return g.Critical
	case PrioritySheddable:
		return g.Sheddable
	}
	return g.Default
}

// fill sets each omitted list to its default. It never writes into a list:
// a policy copied from a parsed table shares them.
func (g *PayGo) fill() {
	if len(g.Critical) == 0 {
		g.Critical = DefaultPayGoCritical
	}
	if len(g.Default) == 0 {
		g.Default = DefaultPayGoDefault
	}
	if len(g.Sheddable) == 0 {
		g.Sheddable = DefaultPayGoSheddable
	}
}

// validate checks each list: known tiers, each at most once.
func (g *PayGo) validate() error {
	for _, l := range []struct {
		name  string
		tiers []PayGoTier
	}{{"critical", g.Critical}, {"default", g.Default}, {"sheddable", g.Sheddable}} {
		if err := validTiers(l.tiers); err != nil {
			return fieldError("payGo."+l.name, "%v", err)
		}
	}
	return nil
}

// validTiers refuses an unknown tier and a tier listed twice.
func validTiers(ts []PayGoTier) error {
	for i, t := range ts {
		if t.Index() < 0 {
			return fmt.Errorf("unknown pay-as-you-go tier %q (standard, priority or flex)", t)
		}
		if slices.Contains(ts[:i], t) {
			return fmt.Errorf("tier %q listed twice", t)
		}
	}
	return nil
}

// sortedTiers is ts in PayGoTiers order, a new slice (a table's lists may be
// shared), unknown tiers last as they came, for Validate to name.
func sortedTiers(ts []PayGoTier) []PayGoTier {
	out := slices.Clone(ts)
	slices.SortStableFunc(out, func(a, b PayGoTier) int {
		ia, ib := a.Index(), b.Index()
		if ia < 0 {
			ia = len(PayGoTiers)
		}
		if ib < 0 {
			ib = len(PayGoTiers)
		}
		return ia - ib
	})
	return out
}

// Offers reports whether the region lists pay-as-you-go tier t.
func (r *Region) Offers(t PayGoTier) bool { return slices.Contains(r.PayGoTiers, t) }
