package policy

import "time"

// Client-side adaptive throttling, from the SRE book (chapter 21, "Handling
// Overload"): a region that rejects calls (429s, failures) is sent only part
// of the calls that would go to it; the rest go to other regions, or are
// refused here at no cost to anyone.
const (
	// throttleWindow is how far back the throttle looks: a region that
	// recovers is fully back within about this long once its first calls
	// succeed again.
	throttleWindow = 10 * time.Second
	// throttleWidth is the width of the throttle's buckets, in nanoseconds.
	throttleWidth = int64(throttleWindow) / windowBuckets
	// throttleK is the SRE book's K: a region is sent up to K times as many
	// calls as it accepts before the throttle bites.
	throttleK = 2
)

// throttleP is the probability that the throttle turns a call away from the
// lane (a capacity of a region: lane.go) at now:
//
//	p = max(0, (requests − K × accepts) / (requests + 1))
//
// over the last throttleWindow, where requests are attempts the lane
// answered, accepts those it answered with success, and K is 2. Each lane
// counts the attempts that asked for it alone: a 429 of Flex PayGo does not
// turn calls away from the region's Provisioned Throughput or its standard
// pay-as-you-go, which are other quotas. Both a 429
// and a failure are rejections: the book counts every request the backend
// did not accept, and a region that fails most of its calls gains nothing
// from more of them. So p is 0 while a region accepts at least half of what
// it answers (1/K), which covers intermittent failures such as the bursty
// 504s of an upstream incident, and it bites only past that: a region that
// answers only 429s or only errors gets a trickle, and a total outage cannot
// multiply load, since every region's share falls together.
//
// The book counts as requests also the calls the throttle itself turned
// away; here they went to another region instead, and counting them would
// keep p near 1 for most of a minute after the region recovers (each
// rejection raising p). With only answered attempts counted, a dead region
// still gets a trickle of about sqrt(window × demand) calls per window, and p
// falls to 0 within seconds of its first successes.
//
// Like ejection, the throttle judges a region only on minRequests answers
// (in its window): a router that starts in the middle of a burst of failures
// does not turn a region away on its first few answers.
//
// It is 0, without reading the counters, when the region has not rejected a
// call within the window.
//
// The draw is made once a call for each lane (callState.throttleDraw), not
// at each pick: a call that waits for a quota's room (Call.PickWaiting)
// picks again each time it wakes, and a fresh draw at each pick would let
// more than 1 − p of the waiting calls through (k picks pass with a chance
// of 1 − p^k), however many the lane refuses. A lane that accepts nothing,
// a PT's overflow into a location with no pay-as-you-go quota, was asked
// by every waiting call each time it woke: a round trip each for the
// caller and load on Google's front end, for no call served (in
// generated-34-10's surge, the PT's region answered 1,746 429s over a
// minute so and 1,267 with one draw a call, the calls served the same). With
// one draw a call, a
// call the throttle turned away stays turned away while p is above its
// draw, and is let through once p falls below it: the share of calls that
// reach the lane is 1 − p whether they wait or not, and a lane that
// recovers gets the calls it turned away back as p falls, the waiting ones
// among them. The draws of one call at different lanes are independent: a
// call turned away from one throttled quota is not, for that, turned away
// from another.
func (l *lane) throttleP(now int64, st *poolState) float64 {
	if now-l.lastRejected.Load() > int64(throttleWindow) {
		return 0
	}
	req, acc := l.thr.sum(bucketOf(now, throttleWidth))
	if req < st.minRequests {
		return 0
	}
	p := (float64(req) - throttleK*float64(acc)) / (float64(req) + 1)
	return max(p, 0)
}

// throttled records an answer at now in the throttle's window: accepted or
// rejected.
func (l *lane) throttled(now int64, accepted bool) {
	var acc int64
	if accepted {
		acc = 1
	} else {
		l.lastRejected.Store(now)
	}
	l.thr.add(bucketOf(now, throttleWidth), 1, acc)
}

// turnedAway counts, in a PT's overflow lane (slot.overflow), a call its
// throttle turned away at now as a request the lane did not accept: once a
// call, at its first pick (a call that waits and picks again is the same
// request, and its draw the same: throttleDraw). The
// overflow has no hint: nothing but its throttle bounds what it is sent, and
// every call the other capacities have no room for comes to it. Counting
// the calls it turns away, as the SRE book's throttle does, keeps what it
// is sent at about K times what it accepts however many calls come: in a
// surge without that, a location whose pay-as-you-go takes 3 calls a second
// was sent over 20, each refused at once. The other lanes leave them out
// (throttleP) so that a lane that recovers is back within seconds; the
// overflow, the last capacity that answers, recovers by doubling what it is
// sent each window instead, while every other capacity goes first. Unlike
// throttled(now, false) it leaves lastRejected alone: a throttle that its own
// refusals kept alive would never lapse once the region stopped refusing;
// it lapses a window after the region's last refusal, as any lane's.
func (l *lane) turnedAway(now int64) { l.thr.add(bucketOf(now, throttleWidth), 1, 0) }

// throttleP is the highest throttle probability of the region's lanes: the
// share of calls its most throttled capacity turns away.
func (r *region) throttleP(now int64, st *poolState) float64 {
	var p float64
	for i := range r.lanes {
		p = max(p, r.lanes[i].throttleP(now, st))
	}
	return p
}

// throttleDraw is the call's draw, in [0, 1), against the throttle of lane
// l of the pool's slot i: the throttle turns the call away from the lane
// while its probability is above the draw. It is drawn once a call (the
// call's seed, from g, at its first throttled lane) and mixed with the
// lane's place, so it is the same at every pick of the call and independent
// from lane to lane (throttleP says why). A new table may number the slots
// otherwise; a call that spans it draws afresh, as a new call would.
func (cs *callState) throttleDraw(g *rng, i int, l uint8) float64 {
	if cs.draw == 0 {
		cs.draw = g.next() | 1
	}
	return unit(mixAt(cs.draw, uint64(i*laneCount+int(l)+1)))
}
