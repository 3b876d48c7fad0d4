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
//   - it holds at least minRequests attempts in flight (the evidence the
//     ejection policy asks before judging a region), or at least two and at
//     least as many as it answered with success over the whole ejection
//     interval, and
//   - nothing has come back from it for longer than the slowest answer it
//     gave in the last ejection interval (or its last answer's, when it has
//     answered nothing since), counted from its last answer or from when
//     it last went from no call in flight to one, whichever is later: none
//     of its attempts is late by the region's own recent measure until then.
//
// The second measure of evidence is for a region that answers fewer than
// minRequests calls an interval: a pool with little traffic, or a region
// that gets only a trickle. Held to minRequests in flight, such a region
// could hang for ever unseen (at one call a second and a 10-s deadline it
// never holds more than ten), and every call sent to it would wait out its
// deadline and fail. A region that answers in its usual time holds about
// rate × latency calls (Little's law) and answers rate × interval in an
// interval: holding as many as it answered in the whole interval means its
// calls have been in it about an interval long, far longer than its answers
// take, and nothing has come back for longer than its slowest answer
// besides. A region that answers at all, even with errors, is not silent
// (its answers move the mark); a region that answered many calls in the
// interval is judged on minRequests, as before. Two, not one: a single
// call is no evidence of a region (one stream of a model that thinks for
// longer than the region's slowest first answer pauses that long), and a
// region that hangs holds two soon enough.
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
// An answer is its bytes: a stream may take minutes to end, so the server
// tells the policy of each chunk that arrives (Attempt.Heard). A region
// whose streams are flowing is answering, and its latency is how soon its
// answers begin, not how long its streams last.
//
// Before a region's first answer nothing is known of its latency, and it is
// never silent.
//
// The hot path writes little: the mark moves only when it is older than a
// sixteenth of the slowest answer, on an answer or on a pick into a region
// that had nothing in flight. The mark may so lag the last answer by that
// sixteenth, and silent allows for it: a region is silent only once its
// mark is older than the slowest answer and a sixteenth, so never before
// nothing has come back for longer than the slowest answer, and at most a
// sixteenth of it after.
type silence struct {
	mark      atomic.Int64 // the last answer, or the last pick into an idle region; coarse (above)
	slowest   atomic.Int64 // latency of the slowest recent answer, ns; 0 before the first
	slowestAt atomic.Int64 // when it was answered
}

// busy marks a pick at now into a region that had no attempt in flight: its
// silence, if any, is counted from then.
func (s *silence) busy(now int64) { s.heard(now) }

// heard ends the silence with bytes at now of an answer whose latency was
// measured before (a stream's later chunks, its end).
func (s *silence) heard(now int64) {
	if now-s.mark.Load() > s.slowest.Load()/16 {
		s.mark.Store(now)
	}
}

// answered ends the silence with an answer at now to an attempt picked at
// pickedAt, and keeps the slowest answer of the last interval. Two answers
// racing may keep the other's latency: either is a latency the region
// answered in within the interval.
func (s *silence) answered(now, pickedAt, interval int64) {
	slow := s.slowest.Load()
	if lat := now - pickedAt; lat > slow || now-s.slowestAt.Load() > interval {
		s.slowest.Store(lat)
		s.slowestAt.Store(now)
		slow = lat
	}
	if now-s.mark.Load() > slow/16 {
		s.mark.Store(now)
	}
}

// silent reports whether a region with inFlight attempts in flight and the
// failure window fails is silent at now (see silence). It reads inFlight,
// which every pick and answer write, and the window only when the words
// that rarely change say it may be.
func (s *silence) silent(now int64, inFlight *atomic.Int64, fails *window, st *poolState) bool {
	slow := s.slowest.Load()
	if slow == 0 || now-s.mark.Load() <= slow+slow/16 {
		return false
	}
	n := inFlight.Load()
	if n >= st.minRequests {
		return true
	}
	if n < 2 {
		return false // an idle region is read often; its window need not be
	}
	answered, failed := fails.sum(bucketOf(now, st.failWidth))
	return n >= answered-failed
}

// late reports whether an attempt that lasted d took longer than the slowest
// answer the region gave in the last interval (or its last answer's, when it
// has answered nothing since); before its first answer nothing is known of
// its latency, and every attempt is late.
func (s *silence) late(d int64) bool {
	slow := s.slowest.Load()
	return slow == 0 || d > slow
}
