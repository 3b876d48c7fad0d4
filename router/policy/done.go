package policy

// done learns from an attempt's outcome (see Outcome for what feeds what) and
// frees the attempt's place in flight. The throttle fed is the lane's the
// attempt asked for; the failure window, ejection, demotion and in-flight
// limit are the region's.
//
// A provisioned region's limit never shrinks below the initial limit: its
// capacity is paid for, and intermittent 504s during an upstream incident
// must not starve it down to one call at a time while most calls succeed.
//
// A 429 does not shrink the limit: it is a refusal of rate, answered at once
// (the quota or Google's shared pool has no room this second), not a sign
// that the region holds too many of the router's calls at once. The rate has
// its own brakes, the meters (what the table says the region grants) and the
// lane's throttle (at most K times what the region accepts). Shrinking the
// concurrency too compounds them: at a steady share of 429s the additive
// increase and the multiplicative decrease meet at a limit of a few calls,
// and a region that serves half of what it is sent (Google's dynamic shared
// quota under contention) is sent a trickle. The limit answers timeouts,
// the sign of a region slowing under its load.
//
// And only the timeouts that waited: an attempt that lasted longer than the
// slowest answer the region gave in the ejection interval (silence.late). A
// region that answers DEADLINE_EXCEEDED no later than it answers calls that
// succeed (a deadline deeper in Google than the call's own ran out, or a
// frontend whose backend is gone answers at once) did not keep that call
// waiting behind the router's others, and says nothing of how many calls it
// holds; shrinking for it would settle the limit at a few calls
// while the region serves most of what it is sent quickly. Such an answer
// still counts as a failure: the failure window, ejection or demotion and
// the throttle all see it. An attempt that ran out its deadline with nothing
// back lasted the deadline, longer than any answer the region gives within
// it, and shrinks the limit as before.
func (r *region) done(rep Report) {
	p := r.p
	now := p.nanos()
	n := r.inFlight.Add(-1) + 1
	p.inFlight.Add(-1)
	r.held.addPast(bucketOf(rep.chargedAt, heldWidth), bucketOf(now, heldWidth), -1, 0)
	s := r.cfg.Load()
	st := s.st
	ln := &r.lanes[min(rep.lane, laneCount-1)]
	if rep.counting {
		// No evidence of how the region serves the model, and nothing
		// metered to settle (Request.Counting); a demoted region's run of
		// successes still waits for it if it was in flight when the run
		// began.
		if r.demoted.Load() != nil {
			r.ended(s, now, rep.chargedAt)
		}
		return
	}
	switch {
	case rep.Outcome == Cancelled:
		// Nothing came back, and the caller went away (silence.go).
		r.quiet.dropped(rep.chargedAt)
	case rep.Outcome == Failure && rep.Timeout:
		// Nothing came back: the region said nothing (silence.go).
	case rep.heard:
		// Its answer began to arrive earlier (Attempt.Heard), which is when
		// its latency was measured; the end of a stream only says the
		// region is still there.
		r.quiet.heard(now)
	case rep.Outcome == Capacity || rep.Outcome == ProvisionedFull || rep.Outcome == CallerFault:
		// Refused at the door (a 429, a bad request), or an answer the
		// router counts as the caller's own (blame.go): the region no
		// longer holds the attempt, and the answer says nothing of the
		// calls it let in (silence.go).
		r.quiet.dropped(rep.chargedAt)
	default:
		r.quiet.answered(now, rep.chargedAt, int64(st.interval))
	}
	if r.demoted.Load() != nil {
		r.ended(s, now, rep.chargedAt)
	}
	switch rep.Outcome {
	case Success:
		r.fails.add(bucketOf(now, st.failWidth), 1, 0)
		r.times.add(now, now-rep.chargedAt)
		ln.throttled(now, true)
		r.limit.grow(n, st.maxLimit)
		if r.demoted.Load() != nil {
			r.succeeded(s, now, rep.chargedAt)
		}
		if rep.lane == laneProvisioned {
			if rep.OnDemand {
				ln.markSpilled(now, rep.chargedAt)
			} else {
				ln.markOpen(rep.chargedAt)
			}
		}
	case Capacity:
		ln.throttled(now, false)
	case ProvisionedFull:
		ln.markFull(now, rep.chargedAt)
		if s.tokCost > 0 {
			r.pace(now, s)
		}
	case Failure:
		r.fails.add(bucketOf(now, st.failWidth), 1, 1)
		ln.throttled(now, false)
		if rep.Timeout && r.quiet.late(now-rep.chargedAt) {
			r.limit.shrink(s.limitFloor())
		}
		if r.demoted.Load() != nil {
			r.breakRun(rep.chargedAt)
		}
		switch {
		case s.ejectable:
			p.maybeEject(r, now)
		case s.provisioned:
			r.maybeDemote(s, now)
		}
	}
	if s.tokCost > 0 && rep.lane == s.hinted {
		r.settleTokens(s, rep, now)
	}
	if rep.Uncounted && s.reqCost > 0 && rep.lane == s.hinted {
		r.uncount(s, rep, now)
	}
}

// uncount takes back the request an attempt took from the region's request
// quota, in the router's own meter (or pacer) and in the shared meter, when
// the region counted none (Report.Uncounted: Google refused the caller's
// own credentials, which it checks before any quota). The meters stand for
// what the region counts; a request it did not count left in them is room
// taken from every other caller. Without this, a caller whose token Google
// refuses, or a neighbor sending made-up ones at the quota's rate, would
// fill the pay-as-you-go quotas in the router's meters with requests no
// region counted, and the pool's other callers would wait and be shed for
// room that is free.
//
// A 429 is not given back, though Google counts none of the call either: a
// hint bounds what the router sends a region (table.Capacity), 429s among
// them. Given back, a region refusing half its calls (its shared pool
// short) would be sent up to twice its quota, bounded by the throttle
// alone: the receiver past its headroom that the hint exists to prevent
// (shared-quota-contention's quotas were sent more than their rate for 12
// and 14 s in a row, where they are otherwise never over for more than a
// second). TestRefusedRequestsStayInTheMeters holds it.
func (r *region) uncount(s *slot, rep Report, now int64) {
	if s.metersReqs() {
		r.reqs.refund(rep.chargedAt, now, s.reqCost)
	} else {
		r.slow.untake(rep.chargedAt, s.reqCost*costUnit)
	}
	if rep.ticket != 0 {
		if m := r.p.shared.Load(); m != nil {
			(*m).Forget(s.name, rep.ticket)
		}
	}
}

// tokEstShift sets the weight of a call in the average of tokens per call: 1/8.
const tokEstShift = 3

// settleTokens corrects the token cost charged in advance for an attempt
// with what it consumed: the difference when the call reports its tokens, a
// refund when it was refused, failed at once or was cancelled (it consumed
// none that the region counts), and nothing when it succeeded without
// saying (the estimate stands). A call Google spilled to pay-as-you-go
// (Report.OnDemand) keeps its charge: it consumed none of the PT, but it
// says the PT was full when it came, and giving its tokens back would send
// the PT more calls that spill.
//
// A timeout keeps its charge too (Report.Timeout: the region answered
// DEADLINE_EXCEEDED, or held the call until the deadline cut it; a caller's
// own deadline counts so only when the region kept the attempt longer than
// it answers, server.call.report, so a caller that gives calls less time
// than that, hostile or not, has them refunded as Cancelled). Google
// admits a call into the PT before the model runs, and a call it held that
// long was admitted: whether Google counts the tokens of an answer it never
// finished, the router cannot see, and the meter errs toward full, the side
// it is built to err to. Refunded, such calls left the meter short of
// Google's count by the share of calls that time out: a 3-GSU PT whose
// lognormal latencies ran past a 3-s deadline for a tenth of its calls was
// metered 86% used when Google refused it as full, so the router kept
// sending calls Google refused, and the PT counted as full, asked once a
// second, for most of each window (generated scenario 2-5). A surplus costs
// a few calls sent to pay-as-you-go while the PT had room.
func (r *region) settleTokens(s *slot, rep Report, now int64) {
	switch {
	case rep.Outcome == Success && rep.Tokens > 0:
		cost := int64(float64(rep.Tokens) * s.tokCost)
		if d := cost - rep.charged; d >= 0 {
			r.toks.add(now, d, s.tokWidth)
		} else {
			r.toks.refund(rep.chargedAt, now, -d, s.tokWidth)
		}
		r.learnTokens(rep.Tokens)
	case rep.Outcome == Success, rep.Outcome == Failure && rep.Timeout:
	default:
		r.toks.refund(rep.chargedAt, now, rep.charged, s.tokWidth)
	}
}

// learnTokens moves the average of tokens per call toward a call that
// consumed tokens: an exponentially weighted moving average that weighs the
// call 1/2^tokEstShift, seeded by the first call. Concurrent calls each move
// it: a compare-and-swap loop, so that no update is lost.
func (r *region) learnTokens(tokens int64) {
	for {
		est := r.tokEst.Load()
		next := tokens
		if est != 0 {
			next = est + (tokens-est)>>tokEstShift
		}
		if next == est || r.tokEst.CompareAndSwap(est, next) {
			return
		}
	}
}

// limitFloor is the lowest the region's adaptive in-flight limit may go.
func (s *slot) limitFloor() float64 {
	if s.provisioned {
		return s.st.initialLimit
	}
	return limitMin
}
