package policy

import (
	"math"
	"sync/atomic"
	"time"
)

// AIMD constants for a region's in-flight limit.
const (
	// limitDecrease multiplies the limit on a timeout.
	limitDecrease = 0.9
	// limitMin is the smallest limit: a region always admits one call.
	limitMin = 1.0
)

// aimd is a region's adaptive in-flight limit: additive increase,
// multiplicative decrease, as TCP congestion control and Netflix's
// concurrency-limits do it. Each success adds 1/limit (one per limit's worth of
// successes), but only while at least half the limit is in use, so an idle
// region's limit does not drift up; each timeout that waited longer than the
// region's slowest recent answer multiplies it by 0.9 (a 429 does not, nor a
// DEADLINE_EXCEEDED answered sooner: region.done).
// It stays within [1, max]. The value is a float64 kept in one atomic word.
//
// A region that answers is never held to this limit alone: see
// slot.littleLimit.
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

// shrink applies the multiplicative decrease after a timeout, never below
// floor.
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

// Slow is not overloaded. By Little's law, the calls a region holds in flight
// are the rate at which it is sent calls times how long each one takes:
// L = λ × W. A call takes no longer than its deadline (the caller gives up
// then, and the attempt ends), and the rate a region is sent is bounded by
// its capacity, which the meters enforce over every sliding second. So a
// region that answers within its callers' deadlines can never hold more than
//
//	λ × (deadline + rateWindow)
//
// calls (the extra second is the burst a sliding window admits at once; for
// a PT metered over a longer window, that window). That
// many calls in flight is the region being slow, not the region being
// overloaded: an AIMD limit that grows by one per limit's worth of successes
// would shed them for tens of seconds after the region's latency rises, while
// the region answers every one of them in time. The bound needs no latency
// measurement and so no time to learn: it holds from the first call after
// the latency changes.
//
// littleLimit is that bound for a call on lane l whose deadline is deadline.
// λ is the region's capacity in calls a second: its RequestsPerSecond, else
// its TokensPerSecond over its average tokens per call. A lane whose
// capacity is not known (not the hinted lane, no hint, or no call's tokens
// reported yet) is sent calls at no bounded rate, and a call without a
// deadline may take any time: the bound is then regionMaxLimit.
//
// A bound of the region's capacity is not capped by regionMaxLimit. That
// knob caps the AIMD limit, a guess that timeouts shrink; this bound is what
// the capacity allows, and capping it by a constant made a region whose
// capacity times its callers' deadline is over the constant shed calls it
// answers in time: at the default of 512, a PT of 50 calls a second whose
// answers take 20 s (a long generation) was held to 26 calls a second, and
// behind N routers each router's regionMaxLimit is 1/N of it
// (router/share), so adding replicas did not lift that ceiling. What one
// router holds is bounded by the pool's maxInFlight all the same, which
// sheds the lowest priorities first.
//
// The whole bound applies while the region is answering (region.answering):
// not failing and not demoted. A lane's 429s leave it whole: they refuse
// rate, at once, and hold no call in flight. A region
// that is not keeps the share of it that it answers: with answered attempts
// over the ejection interval, failed of them, a call finds room while the
// calls in flight are within
//
//	bound × (answered − failed) / answered
//
// (slot.roomInFlight). A region slow enough that some of its calls run out
// their deadline fails them, and is demoted or ejected once they are half of
// what it ends; it then takes only what the regions that answer have no room
// for, so a call it is sent would otherwise be refused, a certain failure,
// where the region answers that share of them in time. Held to its AIMD
// limit, which those timeouts shrink, such a region took a few calls a
// second and the rest were shed while its capacity stood idle. The share
// makes the bound the whole of it for a region answering every call, and
// nothing for one answering none: a region that holds calls without
// answering them, or that answers only after their deadline, takes no more
// of them than its AIMD limit, and, ranked last (demoted, ejected), none
// beyond its probes, under that limit as over it (Pool.admit): each would
// be lost, where waiting a moment for an answering region's room serves it.
// A bound that is not the region's capacity (regionMaxLimit, for want of
// one) is no measure of what it can answer: such a region ranked last gets
// the share of its AIMD limit instead, and over that limit nothing.
//
// What the share may still get wrong: it reads a region's failures as the
// region's own overload, so that a region answering a fifth of its calls
// holds what a fifth of its capacity finishes before the deadline. Where
// the failures are not its overload (a PT that answers four calls in five
// with a 504 after twelve seconds whatever it is sent) it could serve a
// fifth of its whole bound's calls, and the calls the quotas have no room
// for are refused instead: two generated shapes of that kind (`replay
// --generate 12 --seed 31`, 8 and 12) served 60.2% and 32.7% of their calls
// during the fault where the regions can carry 66.9% and 37.0%, and 63.6%
// and 34.9% with the share lifted for any region that answers some of its
// calls. The answers do not tell the two kinds apart, and a region whose
// failures are its overload, sent its whole bound, queues calls until
// nearly all run out: the collapse the share is there to prevent. Lifted
// only for a call that can wait no longer (its last chance), it changed
// nothing that could be measured (seed 31, twelve shapes: -0.09 points on
// average): the throttle turns most of them away.
//
// known says the bound is one of the region's capacity, not regionMaxLimit
// for want of one.
func (s *slot) littleLimit(l uint8, now, deadline int64) (n int64, known bool) {
	hi := int64(s.st.maxLimit)
	if deadline == 0 || l != s.hinted {
		return hi, false
	}
	var rate float64
	burst := rateWindow
	switch est := s.r.tokEst.Load(); {
	case s.rps > 0:
		rate = s.rps
	case s.tokCost > 0 && est > 0:
		rate = float64(rateCapacity) / (float64(est) * s.tokCost) / (float64(s.tokWindow) / float64(time.Second))
		burst = s.tokWindow
	default:
		return hi, false
	}
	span := float64(deadline-now+burst) / float64(time.Second)
	// No region of the pool holds more than the pool's maxInFlight, which
	// admits a call before its region does: a bound over it bounds nothing,
	// and the product (a token rate over a tiny average per call) stays
	// within an int64.
	return int64(math.Ceil(min(rate*span, float64(s.st.maxInFlight)))), true
}
