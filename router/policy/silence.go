package policy

import "sync/atomic"

// Silence: a region that stops answering is ranked last before any of its
// calls fails.
//
// A region that hangs (a black-holed connection, a frontend that accepts
// and never answers) sends no failure until the callers' deadlines pass:
// minutes with the router's default, and every call sent to it meanwhile
// waits that long and fails. The failure rate cannot see it sooner; what
// can is the absence of answers. A region is silent when
//
//   - at least minRequests attempts were picked for it since its last
//     answer: the evidence the ejection policy asks before judging a
//     region, so a region sent a few calls is never judged on them, and
//   - the first of them has waited longer than the slowest answer the
//     region gave in the last ejection interval (or its last answer's, when
//     it has answered nothing since): none of those attempts is late by the
//     region's own recent measure until then.
//
// While silent, the region ranks as a demoted one (choose): behind every
// region that is not, taking only what none of them has room for. Silence
// is not a verdict: it ends with the region's next answer of any kind
// (success, 429, an error it sends), and it feeds no failure window,
// ejection or demotion; the attempts that never answer do, as timeouts,
// when their deadlines pass. A region that is only slow answers its first
// slow calls about when they are due and is silent at most for the time
// its latency rose by; it is never the reason a call is shed, since it
// still takes what the others cannot. A timeout and a cancelled attempt
// are not answers: the region said nothing.
//
// Before a region's first answer nothing is known of its latency, and it is
// never silent.
type silence struct {
	unanswered atomic.Int64 // attempts picked since the last answer
	since      atomic.Int64 // when the first of them was picked; 0 when none
	slowest    atomic.Int64 // latency of the slowest recent answer, ns; 0 before the first
	slowestAt  atomic.Int64 // when it was answered
}

// picked counts an attempt picked at now.
func (s *silence) picked(now int64) {
	s.unanswered.Add(1)
	if s.since.Load() == 0 {
		s.since.CompareAndSwap(0, now)
	}
}

// answered ends the silence with an answer at now to an attempt picked at
// pickedAt, and keeps the slowest answer of the last interval. The loads
// before the stores keep the common case (answers arriving while others are
// pending) from writing shared words on every answer. Two answers racing
// may keep the other's latency: either is a latency the region answered in
// within the interval.
func (s *silence) answered(now, pickedAt, interval int64) {
	if s.unanswered.Load() != 0 {
		s.unanswered.Store(0)
	}
	if s.since.Load() != 0 {
		s.since.Store(0)
	}
	if lat := now - pickedAt; lat > s.slowest.Load() || now-s.slowestAt.Load() > interval {
		s.slowest.Store(lat)
		s.slowestAt.Store(now)
	}
}

// silent reports whether the region is silent at now (see silence).
func (s *silence) silent(now int64, st *poolState) bool {
	if s.unanswered.Load() < st.minRequests {
		return false
	}
	since, slowest := s.since.Load(), s.slowest.Load()
	return since != 0 && slowest > 0 && now-since > slowest
}
