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
//   - it has kept quiet for longer than the slowest answer it gave in the
//     last ejection interval (or its last answer's, when it has answered
//     nothing since): nothing has come back from it for that long, counted
//     from its last answer or from when it last went from no call in
//     flight to one, whichever is later; or the first attempt picked after
//     the latest pick it answered, and since it last went from no call in
//     flight to one, has been in flight that long (no attempt picked since
//     has answered, or the mark would have moved past it).
//     Until then none of its attempts is late by the region's own recent
//     measure.
//
// The measure from the first pick after the latest one answered is what
// sees a region that hangs while the calls picked before are still
// answering. Counted from the last answer alone, a region whose answers
// have a long tail (a slowest answer of 7 s) hides a hang for as long as
// its stragglers keep coming back, and then for as long again: up to twice
// its slowest answer, every call sent it meanwhile waiting out its
// deadline. The latest pick answered moves on every answer (an atomic
// maximum: an answer to a call picked earlier does not move it back), and
// the first pick after it is marked by the next pick that finds the mark
// behind it, so it may be a later pick than the first, never an earlier
// one. An attempt that ends with nothing back because its caller went
// away (Cancelled, not a timeout), or that the region refused (a 429, a bad
// request), takes the mark with it, so that silence is never counted from
// an attempt the region no longer holds.
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
// besides. A region that answers new calls at all, even with errors, is
// not silent (its answers move the marks); a region that answered many
// calls in the interval is judged on minRequests, as before. Two, not one:
// a single call is no evidence of a region (one stream of a model that
// thinks for longer than the region's slowest first answer pauses that
// long), and a region that hangs holds two soon enough.
//
// While silent, the region ranks as a demoted one (choose): behind every
// region that is not, taking only what none of them has room for. Silence
// is not a verdict: it ends with the region's next answer (a success, an
// error it sends) to a call picked since the last one it answered, and it
// feeds no failure window, ejection or demotion; the attempts that never
// answer do, as timeouts, when their deadlines pass. A region that is only
// slow answers its first slow calls about when they are due and is silent
// at most for the time its latency rose by; it is never the reason a call
// is shed, since it still takes what the others cannot. A timeout and a
// cancelled attempt are not answers: the region said nothing. Nor is a
// refusal (a 429, a PT found full, a 400 to a bad request) or any answer
// the router counts as the caller's own fault (blame.go): Google refuses a
// call at the door, before the model runs, and what the router counts as
// a caller's own is the caller's, not the region's, so neither says
// anything of the calls the region let in. A region that hangs every call
// it lets in while it refuses others (a PT full for some, its
// pay-as-you-go out of room) is silent as soon as one that refused
// nothing; counted as answers, its quick refusals kept it answering while
// every call it let in waited out its deadline, and a tenant sending bad
// requests could keep a hung region first for every other caller. Nor
// does such an answer's time stand for how long the region takes to
// answer (its slowest answer).
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
	front     atomic.Int64 // the latest pick of an attempt the region answered
	after     atomic.Int64 // the first pick seen after front; none while it is not after front
}

// busy marks a pick at now into a region that had no attempt in flight: its
// silence, if any, is counted from then, on both measures. What its earlier
// attempts left unanswered (one that timed out) says nothing of calls that
// have been in it for no time at all.
func (s *silence) busy(now int64) {
	s.heard(now)
	s.after.Store(now)
}

// sent marks an attempt picked at now: the first pick after the latest
// answered one is the attempt the region is late on first, if it hangs.
// Two picks racing may keep the later one: silence is then counted from
// an attempt picked after the first, later than it could be, never sooner.
func (s *silence) sent(now int64) {
	if a := s.after.Load(); a <= s.front.Load() {
		s.after.CompareAndSwap(a, now)
	}
}

// dropped says the attempt picked at pickedAt ended with no answer of the
// region's to it (its caller went away, the region refused it at the door,
// or what came back was the caller's own fault): if it was the first pick
// after the latest answered one, the mark is dropped, and the next pick
// sets it. An attempt that timed out stays: it was late.
func (s *silence) dropped(pickedAt int64) { s.after.CompareAndSwap(pickedAt, 0) }

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
	for {
		f := s.front.Load()
		if pickedAt <= f || s.front.CompareAndSwap(f, pickedAt) {
			break
		}
	}
}

// silent reports whether a region with inFlight attempts in flight and the
// failure window fails is silent at now (see silence). It reads inFlight,
// which every pick and answer write, and the window only when the words
// that rarely change say it may be.
func (s *silence) silent(now int64, inFlight *atomic.Int64, fails *window, st *poolState) bool {
	slow := s.slowest.Load()
	if slow == 0 {
		return false
	}
	if now-s.mark.Load() <= slow+slow/16 {
		if a := s.after.Load(); a <= s.front.Load() || now-a <= slow {
			return false
		}
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
