package policy

import (
	"math"
	"sync/atomic"
)

// AIMD constants for a region's in-flight limit.
const (
	// limitDecrease multiplies the limit on a 429 or a timeout.
	limitDecrease = 0.9
	// limitMin is the smallest limit: a region always admits one call.
	limitMin = 1.0
)

// aimd is a region's adaptive in-flight limit: additive increase,
// multiplicative decrease, as TCP congestion control and Netflix's
// concurrency-limits do it. Each success adds 1/limit (one per limit's worth of
// successes), but only while at least half the limit is in use, so an idle
// region's limit does not drift up; each 429 or timeout multiplies it by 0.9.
// It stays within [1, max]. The value is a float64 kept in one atomic word.
type aimd struct {
	bits atomic.Uint64
}

// get returns the current limit.
func (l *aimd) get() float64 { return math.Float64frombits(l.bits.Load()) }

// set replaces the limit.
func (l *aimd) set(v float64) { l.bits.Store(math.Float64bits(v)) }

// grow applies the additive increase after a success that ended with
// inFlight calls running (itself included), capped at hi.
func (l *aimd) grow(inFlight int64, hi float64) {
	for {
		old := l.bits.Load()
		v := math.Float64frombits(old)
		// Half of the whole calls the limit admits: a limit of 2.5 admits
		// two, so one in flight is half used and the limit can grow again.
		if float64(inFlight)*2 < math.Floor(v) || v >= hi {
			return
		}
		nv := min(v+1/v, hi)
		if l.bits.CompareAndSwap(old, math.Float64bits(nv)) {
			return
		}
	}
}

// shrink applies the multiplicative decrease after a 429 or a timeout, never
// below floor.
func (l *aimd) shrink(floor float64) {
	for {
		old := l.bits.Load()
		v := math.Float64frombits(old)
		nv := max(v*limitDecrease, floor, limitMin)
		if v <= floor {
			return
		}
		if nv == v || l.bits.CompareAndSwap(old, math.Float64bits(nv)) {
			return
		}
	}
}

// clamp brings the limit within [1, hi], after the table changed hi.
func (l *aimd) clamp(hi float64) {
	for {
		old := l.bits.Load()
		v := math.Float64frombits(old)
		nv := min(max(v, limitMin), hi)
		if nv == v || l.bits.CompareAndSwap(old, math.Float64bits(nv)) {
			return
		}
	}
}
