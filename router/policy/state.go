package policy

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/regionwarden/regionwarden/router/table"
)

// Pool is the adaptive policy for one pool of regions: provisioned regions
// first up to their capacity, spill to pay-as-you-go tiers by the call's
// priority and to shared regions by their capacity hints, a throttle per
// capacity of a region fed by 429s and failures, failure-rate ejection of
// shared regions and demotion of provisioned ones, budgeted retries and
// in-flight limits. It is safe for concurrent use; Pick and Done take no lock.
//
// The zero value is not usable: make one with New.
type Pool struct {
	now    func() time.Time
	rnd    rng
	budget *Budget
	log    *slog.Logger

	_        [64]byte
	inFlight atomic.Int64 // calls in flight in the whole pool
	waiting  atomic.Int64 // calls waiting for headroom (Call.PickWaiting)
	waits    atomic.Int64 // waits for headroom since the pool was made
	calls    atomic.Int64 // calls started since the pool was made: the probes' count (demote.go)
	_        [32]byte
	st       atomic.Pointer[poolState]
	shared   atomic.Pointer[SharedMeter] // nil: each region's own meter alone (SetSharedMeter)

	mu sync.Mutex // serializes Update and ejections

	blame [blameSlots]blameSlot // the callers whose failures the pool watches (blame.go)
}

// poolState is one version of a pool's config, in the units the hot path
// uses. It never changes once published; Update publishes a new one.
type poolState struct {
	pool  table.Pool
	slots []*slot

	threshold     float64 // failure rate that ejects or demotes, in (0, 1]
	minRequests   int64
	interval      time.Duration
	failWidth     int64 // width of a failure window's buckets: interval/windowBuckets
	baseEjection  int64
	maxEjection   int64
	maxEjectedPct int
	// payGo is, per Priority, the pay-as-you-go lanes a call may use in
	// order of preference (table.PayGo).
	payGo        [3][]uint8
	probeEvery   int64 // nanoseconds between a demoted region's probes, at least
	probeCalls   int64 // the pool's calls between them, at least (probeCallsOf)
	maxAttempts  int
	budgetPct    int64
	minRetries   int64
	maxInFlight  int64
	initialLimit float64
	maxLimit     float64
}

// slot is a region as one config version sees it: its live state and its
// config. A slot never changes once published.
type slot struct {
	r  *region
	st *poolState

	name        string
	endpoint    string
	tier        table.Tier
	provisioned bool
	ejectable   bool
	weight      float64 // share of traffic within the region's tier
	rps         float64 // the RequestsPerSecond hint; 0: none
	reqCost     int64   // costUnits per request at the RPS hint; 0: no hint
	tokCost     float64 // costUnits per token at TokensPerSecond over tokWindow; 0: none
	// tokWindow is the window over which a PT's tokens are metered (the
	// pool's provisioned window, or its size's), and tokWidth the width of
	// its buckets, in nanoseconds; zero without tokCost.
	tokWindow, tokWidth int64
	// lanes has bit l set for each lane (lane.go) the region offers: the PT
	// lane when provisioned, and the pay-as-you-go tiers the table lists.
	lanes uint8
	// hinted is the lane the capacity hints (rps, reqCost, tokCost) meter:
	// the PT of a provisioned region, standard pay-as-you-go of a shared
	// one. Other lanes have no hint: their own 429s alone bound them.
	hinted uint8
	// laneWeight is each lane's share of traffic within its rank: weight
	// for the hinted lane, the mean hint of the shared regions for others.
	laneWeight [laneCount]float64
	// overflow: the region's standard lane is its PT's overflow (a
	// provisioned region called in spillover mode that lists no
	// pay-as-you-go tiers), which ranks after the call's pay-as-you-go
	// tiers and before a PT ahead of its pace (rankOverflow).
	overflow bool
}

// offers reports whether the region offers lane l.
func (s *slot) offers(l uint8) bool { return s.lanes&(1<<l) != 0 }

// overflowLane reports whether lane l is the region's PT's overflow
// (slot.overflow).
func (s *slot) overflowLane(l uint8) bool { return s.overflow && l == laneStandard }

// region is the live state of one region, kept across table updates.
type region struct {
	p   *Pool
	cfg atomic.Pointer[slot] // the slot of the latest config that holds the region

	inFlight atomic.Int64
	limit    aimd
	reqs     requestMeter // requests admitted, in costUnits of the region's RPS
	slow     pacer        // requests, for an RPS under one call per rateWindow
	toks     meter        // tokens admitted or consumed, in costUnits of its TokensPerSecond over the slot's tokWindow
	paced    atomic.Int64 // the PT is held to its pace until then (pace.go)
	tokEst   atomic.Int64 // tokens a successful call consumes, on average (EWMA)
	fails    window       // a: answered, b: failed; buckets of the state's failWidth
	// tried is every success and failure the region answered, those the
	// blame rule kept out of fails among them (blame.go: others).
	tried        window
	lanes        [laneCount]lane
	ejectedUntil atomic.Int64 // 0 or a time; ejected while in the future
	timesEjected atomic.Int64
	multiplier   int64 // ejection multiplier (gRFC A50). Guarded by p.mu.

	demoted      atomic.Pointer[demotion] // nil unless demoted
	streak       atomic.Int64             // successes in a row while demoted
	run          successRun               // where the streak began, in the order the region was sent its attempts
	probe        pacer                    // spaces the probes of a demoted region, or one on probation, in time
	probeAt      atomic.Int64             // and in calls: the Pool.calls count its next probe waits for
	timesDemoted atomic.Int64

	quiet silence     // attempts unanswered since its last answer (silence.go)
	times answerTimes // how long its latest successes took (quick.go)
	// held counts in its a the attempts in flight by when they were picked,
	// in buckets of heldWidth (region.freshInFlight).
	held window

	// waiting is, per class, how many calls wait for the room of the
	// region's metered capacity: a call of a lower class leaves it to them
	// (reserve.go).
	waiting [Classes]atomic.Int32

	// blame is, per watched caller (Pool.blame's slots), what its attempts
	// met here (blame.go).
	blame [blameSlots]callerCounts
}

// rng draws random numbers without a lock: SplitMix64 over an atomic counter,
// so a seed fixes the whole sequence.
type rng struct {
	seed uint64
	_    [56]byte
	n    atomic.Uint64
	_    [56]byte
}

// next returns the next 64 random bits.
func (g *rng) next() uint64 { return mixAt(g.seed, g.n.Add(1)) }

// mixAt is the n-th number of the sequence seed names: SplitMix64's step
// (the golden ratio's increment) and finalizer, with no state to advance.
func mixAt(seed, n uint64) uint64 { return splitMix(seed + n*0x9e3779b97f4a7c15) }

// splitMix is SplitMix64's finalizer: every bit of z moves about half the
// bits of the result.
func splitMix(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// float returns a random number in [0, 1).
func (g *rng) float() float64 { return unit(g.next()) }

// unit maps 64 random bits to a number in [0, 1).
func unit(x uint64) float64 { return float64(x>>11) / (1 << 53) }
