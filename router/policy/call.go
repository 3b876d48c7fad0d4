package policy

import (
	"context"
	"errors"
	"math/bits"
	"time"

	"github.com/regionwarden/regionwarden/router/table"
)

// maxAttemptsLimit is the most attempts one call can make: the table's bound on
// retry.maxAttempts.
const maxAttemptsLimit = 5

// Request is what the router knows of a call before it picks a region.
type Request struct {
	// Priority orders calls for shedding. Zero is PriorityDefault.
	Priority Priority
	// Deadline bounds every attempt of the call; zero means none. It is read
	// against the router's clock.
	Deadline time.Time
	// Region, when set, is the only region the call may use (Call.Pin says
	// why); empty: any.
	Region string
	// Caller tells the call's caller from the pool's others (a hash of its
	// credentials, say); 0: the caller is not known. A caller whose calls
	// fail wherever they go while the regions serve the others fails
	// itself, not the regions (blame.go).
	Caller uint64
	// Counting marks a call that runs the model's tokenizer, not the model:
	// Vertex AI's countTokens and computeTokens. Google serves them free,
	// under a quota of their own (countTokens: 3,000 requests a minute),
	// and they take none of a PT's throughput nor of the model's
	// pay-as-you-go quota. So a counting call takes and is charged nothing
	// of a region's metered capacity (its tokens, its requests, the shared
	// meter; nor does it wait behind or reserve that room: reserve.go),
	// and how it went is no evidence of how the region serves the model:
	// it feeds no failure window, ejection, demotion or restoration,
	// in-flight limit, throttle, latency or blame, and is never a demoted
	// region's probe. Otherwise it is routed as any call (the same order of
	// regions, its place in flight, the retry budget), so it goes where the
	// model answers.
	//
	// Without it, a caller that counts a prompt's tokens before sending it,
	// a common pattern, is charged a PT's average call twice for each call
	// it makes, and the PT spills half its paid throughput to
	// pay-as-you-go; and a region whose model hangs while its tokenizer
	// answers looks, to the failure rate, as healthy as the share of
	// counting calls in its traffic.
	Counting bool
}

// NewRequest returns a request of priority pr bounded by ctx's deadline.
func NewRequest(ctx context.Context, pr Priority) Request {
	d, _ := ctx.Deadline()
	return Request{Priority: pr, Deadline: d}
}

// Call is one request's bookkeeping across its attempts: how many it made,
// which regions it tried, how the last one went and the overall deadline. It is
// a value: starting a call allocates nothing. A Call belongs to one request
// and is not safe for concurrent use; the Pool that started it is.
//
//	call := pool.Start(policy.Request{Priority: pr, Deadline: d})
//	for {
//		a, err := call.Pick()
//		if err != nil {
//			return err // over capacity, shed, budget, attempts, deadline
//		}
//		o := send(a.Region, a.Tier, a.PayGo)
//		a.Done(o)
//		if !o.Retryable() {
//			return nil
//		}
//	}
type Call struct {
	p  *Pool
	st callState
}

// callState is the part of a Call that the pool reads and updates.
type callState struct {
	deadline int64 // nanoseconds since the Unix epoch; 0: none
	begun    int64 // when the call's first pick began (nanoseconds since the Unix epoch): deadline-begun is the time its caller gave it
	prio     Priority
	n        uint8 // attempts picked so far
	done     uint8 // bit i: attempt i has been reported
	full     uint8 // bit i: attempt i found the PT full (ProvisionedFull)
	refused  uint8 // bit i: attempt i was answered 429 (Capacity or ProvisionedFull): not counted toward maxAttempts
	heard    uint8 // bit i: attempt i's answer has begun to arrive (Attempt.Heard)
	probed   uint8 // bit i: attempt i was a demoted region's probe
	resort   uint8 // bit i: attempt i went to a region ranked last, no answering capacity having room (lastResortRetry)
	last     Outcome
	caller   uint64                    // Request.Caller
	counting bool                      // Request.Counting
	waiting  bool                      // its picks wait for headroom (PickWaiting)
	waited   time.Duration             // for so long so far, in this PickWaiting
	pin      string                    // the only region the call may use; "": any
	class    Class                     // the attempt's place in the order of calls waiting for a capacity's room (reserve.go)
	targets  [maxAttemptsLimit]*region // the regions tried, in order
	lanes    [maxAttemptsLimit]uint8   // the lane of each attempt
	charged  [maxAttemptsLimit]int64   // token cost charged in advance, per attempt
	at       [maxAttemptsLimit]int64   // when each attempt was picked
	tickets  [maxAttemptsLimit]uint64  // the shared meter's name of each attempt's request (SharedAnswer.Ticket); 0: none
	ticket   uint64                    // the ticket of the attempt being picked, for record
	draw     uint64                    // the seed of the call's throttle draws (throttleDraw); 0: none drawn yet
}

// start sets up the zero state of a new call for req.
func (cs *callState) start(req Request) {
	cs.prio, cs.pin, cs.caller, cs.counting = req.Priority, req.Region, req.Caller, req.Counting
	if !req.Deadline.IsZero() {
		cs.deadline = req.Deadline.UnixNano()
	}
}

// Pick chooses the region and capacity for the call's next attempt. The
// first Pick is the first attempt; each later one is a retry, allowed only
// after a retryable outcome (Outcome.Retryable; or while the previous
// attempt is still running), within the pool's maxAttempts, the deadline and
// the retry budget. A retry prefers a region the call has not tried; after a
// 429 of one of the region's quotas (a full PT, a pay-as-you-go tier), the
// region's other capacities count as untried (callState.hasTried).
func (c *Call) Pick() (Attempt, error) {
	if c.p == nil {
		return Attempt{}, errNotStarted
	}
	// The call's state is updated in place, not copied in and out: it is
	// most of a Call's size.
	s, l, err := c.p.pick(&c.st)
	if err != nil {
		return Attempt{}, err
	}
	return s.attempt(l, c), nil
}

// Pin holds the call to region: its attempts go there or nowhere. A call
// that names a resource living in one location, a cached content
// (projects/P/locations/L/cachedContents/ID), is served only in L: sent to
// another region, Google refuses it. Other regions are no alternative for
// it, however full or failing L is.
//
// first is the call's first attempt, picked and not sent: the router admits
// a REST call before it reads the body that names the cache. When first went
// to region it is returned as it is. Otherwise it is withdrawn, counting for
// nothing (its place in flight and its tokens given back, the retry budget's
// count of it undone; the one request it took from a request meter stays
// counted for that meter's second), and the call picks its first attempt
// again, in region alone. A call Start pinned (Request.Region) needs no Pin.
func (c *Call) Pin(first Attempt, region string) (Attempt, error) {
	c.st.pin = region
	if first.Region == region || c.p == nil || c.st.n != 1 {
		return first, nil
	}
	first.Finish(Report{Outcome: Cancelled})
	c.p.budget.unrequest(c.st.at[0], c.p.nanos())
	pin, prio, deadline, begun, counting := c.st.pin, c.st.prio, c.st.deadline, c.st.begun, c.st.counting
	c.st = callState{pin: pin, prio: prio, deadline: deadline, begun: begun, counting: counting}
	return c.Pick()
}

// MaxHeadroomWait is the longest a call waits in all, before one attempt,
// for a region's capacity to have room (PickWaiting): the longest
// a full one-second meter takes to have room, one second and the quarter
// of a bucket that it may hold a call longer (meter). A PT's tokens, metered
// over a longer window, may take longer: a call does not wait for them.
const MaxHeadroomWait = time.Duration(rateWindow + meterWidth/callSlots)

// PickWaiting is Pick, but that an attempt refused only because the
// capacities it may use are full, when one has room again within
// MaxHeadroomWait (in all, for this attempt) and the wait leaves the call at
// least as long again before its deadline, sleeps until then with sleep (on
// the pool's clock) and picks again. A refusal otherwise (a retry the budget
// refuses does not wait), a sleep that fails (ctx done), or more calls
// waiting in the pool than its in-flight cap allows for the call's
// priority: it returns what Pick returned.
//
// Why wait. A meter frees room at a known moment: when a call it admitted
// leaves its window. A call refused a moment before is answered 429 with a
// Retry-After of a whole second, while the room it needed goes to waste
// until the next call happens to arrive; behind several routers, each
// metering its share, those idle moments add up on every router (a router
// with a third of the load and a third of the quota loses a larger part of
// it than one router with all of both). Waiting for the room costs the
// caller less than the Retry-After would, sends the region nothing over its
// quota, and is bounded: in time by MaxHeadroomWait and the deadline, in
// calls by the in-flight cap. A retry waits too: the attempt that failed
// (a probe of a demoted PT, say) would otherwise lose the call while a
// quota is about to have room for it, and a retry is admitted, and waits,
// only within the retry budget (or as the spill after a 429, or the
// fallback of a provisioned region, to a capacity the call has not tried:
// pick).
func (c *Call) PickWaiting(ctx context.Context, sleep func(context.Context, time.Duration) error) (Attempt, error) {
	var place waitPlace
	c.st.waiting, c.st.waited = true, 0
	defer func() { c.st.waiting = false }()
	for {
		a, err := c.Pick()
		if err == nil {
			return a, nil
		}
		ce, ok := c.st.roomWithin(err, c.p.nanos())
		if !ok {
			return a, err
		}
		d, at := ce.Headroom, ce.place
		if c.st.waited == 0 {
			if !c.p.startWaiting(c.st.prio) {
				return a, err
			}
			defer c.p.stopWaiting()
			defer place.release()
			c.p.waits.Add(1)
		}
		// The call waits for the capacities that refused it for want of
		// room: it holds its place in their order until it has picked again
		// after its last wait, so a call of a lower class that asks between
		// its waking and its pick must still find it waiting (reserve.go).
		place.move(at)
		if sleep(ctx, d) != nil {
			return a, err
		}
		c.st.waited += d
	}
}

// repick reports whether the call is picking again after a wait, in one
// PickWaiting: the same request as its first pick there, not a new one.
func (cs *callState) repick() bool { return cs.waiting && cs.waited > 0 }

// roomWithin reports whether a call whose Pick was refused with err at now
// may wait for the room it lacks (PickWaiting): the refusal is one a call
// waits out, and its headroom comes within MaxHeadroomWait of all the call
// has waited and half the time left before the deadline. It returns the
// refusal, with how long to wait and the place to wait in.
func (cs *callState) roomWithin(err error, now int64) (*CapacityError, bool) {
	var ce *CapacityError
	if !errors.As(err, &ce) || !ce.waits() || cs.waited+ce.Headroom > MaxHeadroomWait {
		return nil, false
	}
	if cs.deadline != 0 && now+2*int64(ce.Headroom) > cs.deadline {
		return nil, false
	}
	return ce, true
}

// startWaiting takes a place among the pool's calls waiting for headroom,
// as many as its in-flight cap allows a call of priority pr.
func (p *Pool) startWaiting(pr Priority) bool {
	if p.waiting.Add(1) > ceiling(p.st.Load().maxInFlight, pr) {
		p.waiting.Add(-1)
		return false
	}
	return true
}

// stopWaiting gives back a place startWaiting took.
func (p *Pool) stopWaiting() { p.waiting.Add(-1) }

// mayUse reports whether the call may use region s: any region, or the one
// it is pinned to (Call.Pin).
func (cs *callState) mayUse(s *slot) bool { return cs.pin == "" || s.name == cs.pin }

// Attempts is how many attempts the call has picked.
func (c *Call) Attempts() int { return int(c.st.n) }

// check refuses a further attempt after a final outcome, past maxAttempts or
// past the deadline.
//
// An attempt answered 429 (Capacity, ProvisionedFull) does not count toward
// maxAttempts, as gRPC does not count its transparent retries of calls the
// server never processed: Google refused it before the model ran, so the
// attempt repeated no work and cost the region nothing, the same as the
// router's own meter refusing that capacity, which costs no attempt. Where
// it counted, a 429 took one of a call's attempts (two by default) for a
// refusal the router's meters could not foresee: a location's
// pay-as-you-go that Google fills with other projects' calls, a PT counted
// over a window that does not line up with Google's, routers whose shares
// of a quota lag its use. The call was then lost when its one attempt left
// failed or was refused too, while a third capacity had room. In 20
// generated pools at a fifth of their rate the calls served rose from
// 89.77% to 90.4% on average, by up to 3.2 points (and by up to 1.3 points
// in pools at full rate), none lower but within the runs' noise.
//
// What bounds such a call instead: an attempt past maxAttempts goes
// only to a capacity the call has not tried (pick), never back, so a call
// makes at most maxAttempts attempts plus one to each other capacity, and
// at most maxAttemptsLimit in all; the spills are outside the retry budget
// as before, and a failure's retry is within it as before.
func (cs *callState) check(now int64, maxAttempts int) error {
	if cs.deadline != 0 && now >= cs.deadline {
		return ErrDeadlineExceeded
	}
	if cs.n == 0 {
		return nil
	}
	if cs.done&(1<<(cs.n-1)) != 0 && !cs.last.Retryable() {
		return ErrNotRetryable
	}
	if int(cs.n) >= maxAttemptsLimit || int(cs.n)-bits.OnesCount8(cs.refused) >= maxAttempts {
		return ErrAttemptsExhausted
	}
	return nil
}

// hasTried reports whether the call already tried lane l of region t: it
// did if it asked that lane, or any lane of the region but for an attempt
// that one quota of the region refused, which says nothing of its other
// capacities: a PT found full (ProvisionedFull), or a pay-as-you-go tier
// answering 429 (Capacity on a lane that is not the PT's). Each is a quota
// of its own, as the throttle counts them (lane.throttleP). A pay-as-you-go
// 429 taken for the whole region left a call that went to a PT's overflow
// while the PT was only ahead of its pace (pace.go), its window with room,
// no way back to that PT but the retry budget. At a few calls a second,
// under the throttle's minRequests, the overflow of a location whose
// pay-as-you-go had no room was sent about a call a second, each answered
// 429 (generated-16-1 at a fifth of its rate: 52 in 50 s). In 20 generated
// pools at a fifth of their rate the calls served rose from 90.42% to
// 90.60% on average (16-11: 85.54 -> 86.90%, 13-1: 69.80 -> 70.63%).
//
// A failure says the region fails, whichever capacity it was asked for; a
// 429 of a spillover PT's attempt says the PT and the tier Google spilled
// it into were both full: either counts for every lane of the region.
func (cs *callState) hasTried(t *region, l uint8) bool {
	for i := range int(cs.n) {
		if cs.targets[i] != t {
			continue
		}
		bit := uint8(1) << i
		quota := cs.full&bit != 0 || cs.refused&bit != 0 && cs.lanes[i] != laneProvisioned
		if cs.lanes[i] == l || !quota {
			return true
		}
	}
	return false
}

// record counts an attempt on lane l of region t, picked at now, that
// charged the region cost in advance.
func (cs *callState) record(t *region, l uint8, charged, now int64) {
	n := cs.n
	cs.targets[n], cs.lanes[n] = t, l
	cs.charged[n], cs.at[n], cs.tickets[n] = charged, now, cs.ticket
	cs.n++
	t.quiet.sent(now)
	t.held.add(bucketOf(now, heldWidth), 1, 0)
}

// Report is how an attempt went, with what the caller measured.
type Report struct {
	// Outcome is what happened.
	Outcome Outcome
	// Tokens is how many tokens the attempt consumed, if known. It counts
	// against a provisioned region's TokensPerSecond.
	Tokens int64
	// Timeout marks a Failure that was a timeout (DEADLINE_EXCEEDED, or the
	// region did not answer in time): a sign of overload that shrinks the
	// region's in-flight limit, which a 429 does not (done.go).
	Timeout bool
	// OnDemand marks a Success that pay-as-you-go served (the answer's
	// usageMetadata.trafficType is ON_DEMAND, ON_DEMAND_PRIORITY or
	// ON_DEMAND_FLEX). For an attempt that asked for a PT it says the PT was
	// full: a PT Google said was full stays so (lane.go), and its token
	// charge stands.
	OnDemand bool
	// Uncounted marks an attempt that the region counted against no quota:
	// Google refused its caller's own credentials (401, 403), which it
	// checks before any quota. The request meters that admitted it take it
	// back (done.go), and, a call's first attempt, the retry budget's count
	// of requests; it feeds nothing else, as any CallerFault.
	Uncounted bool

	// charged and chargedAt are the token cost charged to the region in
	// advance and when (the attempt was picked then), and lane the capacity
	// the attempt asked for: set from the call's state when the attempt
	// reports.
	charged, chargedAt int64
	lane               uint8
	// ticket is the shared meter's name of the attempt's request; 0: none.
	ticket uint64
	// counting marks an attempt of a counting call (Request.Counting).
	counting bool
	// heard: the attempt's answer began to arrive before it was reported
	// (Attempt.Heard), and its latency was measured then.
	heard bool
}

// Attempt is one try of a call against one region. Every attempt must be
// reported exactly once, with Done, DoneTokens or Finish; an abandoned attempt
// is reported as Cancelled. Later reports of the same attempt are ignored.
type Attempt struct {
	// Region is the location to call, e.g. "europe-west1".
	Region string
	// Endpoint is the region's host:port from the table.
	Endpoint string
	// Tier is the capacity the attempt asks for: provisioned (the region's
	// Provisioned Throughput, which spills over into PayGo when the pool's
	// request type is spillover) or shared (pay-as-you-go alone, tier
	// PayGo). The capacity headers follow from Tier and PayGo where the call
	// is sent (table.Provisioned.Headers).
	Tier table.Tier
	// PayGo is the pay-as-you-go tier of a shared attempt, and the tier a
	// provisioned attempt's overflow spills into ("" for Google's default,
	// standard, or none when the pool's request type is dedicated): the
	// first of the call's tiers (table.PayGo) the region offers.
	PayGo table.PayGoTier

	// The attempt's region is call.st.targets[n]: reached through the Call,
	// not held here, so that reporting the attempt does not make the Call
	// escape to the heap.
	call *Call
	n    uint8
}

// Number is the attempt's place in its call: 1 for the first attempt.
func (a *Attempt) Number() int { return int(a.n) + 1 }

// Done reports how the attempt went.
func (a *Attempt) Done(o Outcome) { a.Finish(Report{Outcome: o}) }

// DoneTokens reports how the attempt went and how many tokens it consumed.
func (a *Attempt) DoneTokens(o Outcome, tokens int64) {
	a.Finish(Report{Outcome: o, Tokens: tokens})
}

// Heard says that bytes of the region's answer to the attempt arrived (each
// chunk of a stream), before the attempt is reported: the region is
// answering, not silent (silence.go), however long the stream lasts. The
// first call measures how soon the region began to answer; later ones only
// say it still does. Optional; a report of any outcome but a timeout or a
// cancellation counts as hearing from the region too.
func (a *Attempt) Heard() {
	if a.call == nil {
		return
	}
	st := &a.call.st
	if st.targets[a.n] == nil || st.done&(1<<a.n) != 0 {
		return
	}
	r := st.targets[a.n]
	if st.heard&(1<<a.n) != 0 {
		r.quiet.heard(r.p.nanos())
		return
	}
	st.heard |= 1 << a.n
	r.quiet.answered(r.p.nanos(), st.at[a.n], int64(r.cfg.Load().st.interval))
}

// Late reports whether the attempt has lasted longer than the slowest answer
// its region gave in the last ejection interval (or before the region's
// first answer, when nothing is known of its latency): a region that answers
// takes no longer than that. The server asks it of an attempt the caller's
// own deadline cut off, to tell a region that kept the call too long (a
// failure, a timeout) from a caller that gave it less time than it answers
// in (the caller giving up).
func (a *Attempt) Late() bool {
	if a.call == nil || a.call.st.targets[a.n] == nil {
		return false
	}
	r := a.call.st.targets[a.n]
	return r.quiet.late(r.p.nanos() - a.call.st.at[a.n])
}

// Finish reports how the attempt went, with everything the caller measured,
// and returns the outcome the policy learned: r.Outcome, but CallerFault
// for a failure that is the caller's own (blame.go), which the caller must
// not retry, and Capacity for a full PT reported of an attempt that did not
// ask for one. An attempt reported before returns r.Outcome. A failure of a
// caller that fails alone in the region returns Failure, but the region
// learns nothing of it (blame.go).
func (a *Attempt) Finish(r Report) Outcome {
	if a.call == nil || a.call.st.targets[a.n] == nil {
		return r.Outcome
	}
	bit := uint8(1) << a.n
	if a.call.st.done&bit != 0 {
		return r.Outcome
	}
	a.call.st.done |= bit
	r.lane = a.call.st.lanes[a.n]
	if r.Outcome == ProvisionedFull {
		if r.lane != laneProvisioned {
			r.Outcome = Capacity // only a PT can be full
		} else {
			a.call.st.full |= bit
		}
	}
	if r.Outcome == Capacity || r.Outcome == ProvisionedFull {
		a.call.st.refused |= bit
	}
	// What the caller is told and what the region learns differ for a
	// failure of a caller that fails alone in the region (blame.go): it is
	// retried as any, and counts toward nothing of the region's.
	learned := r.Outcome
	r.counting = a.call.st.counting
	if !r.counting && (r.Outcome == Success || r.Outcome == Failure) {
		t := a.call.st.targets[a.n]
		t.tally(r.Outcome)
		if key := a.call.st.caller; key != 0 {
			learned, r.Outcome = a.call.p.blameCaller(key, t, r.Outcome)
		}
	}
	if a.n+1 == a.call.st.n {
		a.call.st.last = learned
	}
	r.charged, r.chargedAt, r.ticket = a.call.st.charged[a.n], a.call.st.at[a.n], a.call.st.tickets[a.n]
	r.heard = a.call.st.heard&bit != 0
	if r.Uncounted && a.n == 0 {
		// Nor does the retry budget count the call among its requests:
		// calls that Google refused for their callers' credentials, at
		// any rate, must not raise the retries other calls may make.
		a.call.p.budget.unrequest(r.chargedAt, a.call.p.nanos())
	}
	a.call.st.targets[a.n].done(r)
	return learned
}

// priorityShare is the percentage of a concurrency limit that calls of a
// priority may fill: sheddable calls are refused first, at 75%, default calls
// at 90%, critical calls only at the limit itself.
func priorityShare(pr Priority) int64 {
	switch pr {
	case PriorityCritical:
		return 100
	case PrioritySheddable:
		return 75
	default:
		return 90
	}
}

// ceiling is how many calls of priority pr may be in flight under limit; at
// least one, so that a limit of one still admits every priority.
func ceiling(limit int64, pr Priority) int64 {
	return max(limit*priorityShare(pr)/100, 1)
}
