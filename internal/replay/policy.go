package replay

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/regionwarden/regionwarden/internal/emulator"
	"github.com/regionwarden/regionwarden/router/table"
)

// ErrUnavailable marks a policy that cannot run on this machine (a missing
// binary or runtime). Run reports it as skipped, with the error as the reason.
var ErrUnavailable = errors.New("not available here")

// Policy is one column of a replay: a way of sending the scenario's calls to
// the emulated regions.
type Policy struct {
	// Name is the column's name in tables and charts.
	Name string
	// MaxScale, when above zero, is the fastest time scale at which the
	// policy keeps up on this machine (a gateway in another runtime may
	// need milliseconds of CPU per call). A replay at a higher scale runs
	// this policy in a pass of its own at MaxScale: the same scenario time,
	// seed and load, more real time.
	MaxScale float64
	// Start prepares the policy against one set of emulated regions; the
	// clock has not started yet. An error wrapping ErrUnavailable skips the
	// policy; any other error fails the replay.
	Start func(ctx context.Context, env *Env) (Caller, error)
}

// Env is what a policy is given to reach one set of emulated regions.
type Env struct {
	// Scenario is the scenario being replayed, defaulted and valid.
	Scenario *emulator.Scenario
	// Regions are where the emulated regions listen, in the scenario's order.
	Regions []emulator.RegionAddr
	// Clock is the shared scenario clock; it starts after every policy has
	// started.
	Clock *emulator.ScaledClock
	// Seed is the replay's seed, the same for every policy.
	Seed uint64
	// Pool is the routing table's pool for the scenario, as the operator
	// would render it, with the emulated regions as endpoints.
	Pool table.Pool
	// Prompt is the text of every call: the scenario's typical input size.
	Prompt string
	// Logf, when set, receives a policy's diagnostics.
	Logf func(format string, args ...any)
}

// logger is a structured logger that writes to Logf, or discards what it
// hears when Logf is not set.
func (e *Env) logger() *slog.Logger {
	if e.Logf == nil {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(logfWriter(e.Logf), nil))
}

// logfWriter writes each line it is given to a Logf.
type logfWriter func(format string, args ...any)

func (w logfWriter) Write(b []byte) (int, error) {
	w("%s", strings.TrimSuffix(string(b), "\n"))
	return len(b), nil
}

// Now is the policies' clock: scenario time on a fixed epoch, so that
// ejection times and windows run at the emulator's speed.
func (e *Env) Now() time.Time { return epoch.Add(e.Clock.Elapsed()) }

// epoch is scenario time zero on the policies' clock.
var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// Caller sends one call through a policy.
type Caller interface {
	// Call makes one call of the load, retrying as the policy does, and
	// says how it ended. A policy that knows no priorities treats every call
	// alike.
	Call(ctx context.Context, c LoadCall) CallResult
	// Close releases what Start acquired.
	Close() error
}

// ErrorKind is why a call failed, as its caller saw it.
type ErrorKind uint8

const (
	// NoError: the call succeeded.
	NoError ErrorKind = iota
	// NoRegions: the policy had no region left to try ("no regions to run").
	NoRegions
	// Shed: the policy refused the call early with a Retry-After (over
	// capacity or over a concurrency limit).
	Shed
	// Throttled: the last attempt was answered 429 by a region.
	Throttled
	// Failed: the last attempt failed (5xx, unavailable, connection).
	Failed
	// Timeout: the deadline passed.
	Timeout
	// Other: anything else (a caller fault, an unexpected answer).
	Other
)

// String names the kind for tables and logs.
func (k ErrorKind) String() string {
	switch k {
	case NoError:
		return "ok"
	case NoRegions:
		return "no regions"
	case Shed:
		return "shed"
	case Throttled:
		return "429"
	case Failed:
		return "failed"
	case Timeout:
		return "timeout"
	default:
		return "other"
	}
}

// LoadCall is one call of a scenario's load.
type LoadCall struct {
	// Deadline is how long the call may take, in scenario time.
	Deadline time.Duration
	// Priority is the priority it is sent with.
	Priority table.Priority
	// Stream makes it a streamGenerateContent call: it succeeds when its
	// last chunk arrives, and once a chunk has reached the caller it
	// cannot be retried elsewhere.
	Stream bool
}

// CallResult is how one call ended.
type CallResult struct {
	// Err is NoError exactly when the call succeeded.
	Err ErrorKind
	// Provisioned says the answer's usageMetadata.trafficType was
	// PROVISIONED_THROUGHPUT.
	Provisioned bool
	// Traffic is the answer's usageMetadata.trafficType (PROVISIONED_THROUGHPUT,
	// ON_DEMAND, ON_DEMAND_PRIORITY, ON_DEMAND_FLEX); empty for a failed call.
	Traffic string
}

// served is the result of a call answered with traffic type traffic.
func served(traffic string) CallResult {
	return CallResult{Provisioned: traffic == trafficProvisioned, Traffic: traffic}
}

// Traffic types (usageMetadata.trafficType) of the capacities that serve a
// call: the PT, and standard, Priority and Flex pay-as-you-go.
const (
	trafficProvisioned = "PROVISIONED_THROUGHPUT"
	trafficStandard    = "ON_DEMAND"
	trafficPriority    = "ON_DEMAND_PRIORITY"
	trafficFlex        = "ON_DEMAND_FLEX"
)

// regionPool is the routing-table pool for a scenario, as the operator would
// render it: provisioned regions with the GSUs and token limit GCP reports,
// shared regions with their quota as the requests-per-second hint, and the
// default policy. Endpoints are the emulated regions' gRPC addresses.
//
// A region that offers Priority or Flex PayGo lists the pay-as-you-go tiers
// it offers (standard too where it has a pay-as-you-go quota), as a pool
// that wants them must; any other region takes the table's default. A
// scenario whose load sends priorities lets its callers claim them up to
// critical, as a pool must for the router to honor them.
func regionPool(sc *emulator.Scenario, addrs []emulator.RegionAddr) table.Pool {
	p := table.Pool{Project: sc.Project, Publisher: sc.Publisher, Model: sc.Model, Policy: table.DefaultPolicy()}
	for i, r := range sc.Regions {
		tr := table.Region{Name: r.Name, Tier: table.TierShared, Ejectable: true, Source: table.SourceSpec}
		if i < len(addrs) {
			tr.Endpoint = addrs[i].GRPC
		}
		if r.Provisioned != nil {
			tr.Tier, tr.Ejectable, tr.Source = table.TierProvisioned, false, table.SourceDeclared
			tr.Capacity = table.Capacity{GSUs: r.Provisioned.GSUs, TokensPerSecond: r.Provisioned.TokensPerSecond}
		} else {
			tr.Capacity.RequestsPerSecond = sc.RequestsPerSecond(&sc.Regions[i])
		}
		if r.Priority != nil || r.Flex != nil {
			if !r.Capacity.IsZero() {
				tr.PayGoTiers = append(tr.PayGoTiers, table.PayGoStandard)
			}
			if r.Priority != nil {
				tr.PayGoTiers = append(tr.PayGoTiers, table.PayGoPriority)
			}
			if r.Flex != nil {
				tr.PayGoTiers = append(tr.PayGoTiers, table.PayGoFlex)
			}
		}
		p.Regions = append(p.Regions, tr)
	}
	if !sc.Load.Priorities.IsZero() {
		p.Callers.MaxPriority = table.PriorityCritical
	}
	p.Default()
	return p
}

// prompt is a text of about n tokens as the emulator counts them (four
// characters a token).
func prompt(n int) string {
	const sentence = "Which regions hold reserved capacity for this model today? "
	b := make([]byte, 0, 4*n)
	for len(b) < 4*n {
		b = append(b, sentence...)
	}
	return string(b[:4*n])
}
