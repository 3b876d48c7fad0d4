package policy

import (
	"sync/atomic"
	"time"
)

// Demotion: a provisioned region is never removed, but it is not always
// first either.
//
//   - A provisioned region is demoted when a failure leaves its failure rate
//     over the ejection interval at or over failureRateThreshold, with at
//     least minRequests answered: the rule that ejects a shared region.
//   - A demoted region stays a candidate for every call: first attempts go
//     to the regions that are answering and have headroom, and it takes what
//     none of them has room for (within its throttle, which the same failures
//     feed). It is never out of the candidates, so "no regions" cannot happen.
//   - It keeps a probe trickle: a first attempt goes to it before any other
//     region once interval/minRequests has passed since its last probe and
//     the pool has started 100/budgetPercent calls since (probeCallsOf), so
//     it answers up to minRequests calls per ejection interval, the
//     evidence the failure rate is judged on, however much room the other
//     regions have, and the probes that fail are never more than the share
//     of the pool's calls the retry budget grants its retries: a tenth by
//     default, in a pool of six calls a second as in one of a thousand.
//   - It is restored after restoreAfter successes in a row (at the default
//     threshold of 50%, 7 after one failure in the ejection interval, 11
//     after 20, at most minRequests: each failure is a try at such a run,
//     poolState.restoreAfter), and gets its full share back at
//     once: its failure and throttle windows start afresh. A success makes
//     the next call a probe at once (failures pace the probes, successes do
//     not), so a recovered region is restored one probe interval (and
//     100/budgetPercent calls) and restoreAfter calls after it recovers.
//     A slower probe costs no call: while the other regions have room a
//     recovered PT left demoted costs only the pay-as-you-go price of what
//     they serve, and while they have none it takes what they cannot, whose
//     successes restore it as its probes' do.
//   - The successes are in a row in the order the region was sent them, not
//     the order they end in (successRun): a region that answers some calls
//     at once and lets others run out their deadline ends its quick
//     successes first, and a run of them in the order they end says nothing
//     of the calls still in it. The run counts once the attempts in flight
//     when it began have ended, or once it has lasted longer than the
//     region's slowest recent answer; a failure of an attempt sent before
//     the run's first one does not break it.
//
// An intermittently failing region (the bursty 504s of an upstream incident,
// 5-10% of calls) stays under the threshold and is never demoted: it keeps its
// share of first attempts, and its failed calls fall back to other regions.
//
// Each demotion and restoration is logged once (Options.Logger), and the
// snapshot shows a demoted region with its failure rate and since when.

// demotion is why and since when a provisioned region is demoted. It never
// changes once published.
type demotion struct {
	since            int64 // nanoseconds since the Unix epoch
	answered, failed int64 // the failure window when the region was demoted
	// ejected: the probation of a shared region after an ejection
	// (eject.go), not the demotion of a provisioned one.
	ejected bool
	// paced: the PT was held to its pace when it was demoted (pace.go),
	// which its restoration takes up again.
	paced bool
}

// onProbation reports whether r is an ejected region or one on probation
// after an ejection: out of the regions that answer, for panic's count.
func (r *region) onProbation() bool {
	d := r.demoted.Load()
	return d != nil && d.ejected
}

// breakRun: a failure of an attempt picked at pickedAt breaks demoted (or
// probation) region r's run of successes, unless the attempt was sent
// before the run's first (successRun).
func (r *region) breakRun(pickedAt int64) {
	if pickedAt >= r.run.sent.Load() {
		r.streak.Store(0)
	}
}

// maybeDemote demotes provisioned region r after a failure at now, if it is
// failing and not demoted yet. (A failure of a region already demoted, or
// on probation, breaks its run of successes: breakRun, in done.)
func (r *region) maybeDemote(s *slot, now int64) {
	if r.demoted.Load() != nil {
		return
	}
	answered, failed := r.fails.sum(bucketOf(now, s.st.failWidth))
	if !s.st.isFailing(answered, failed) {
		return
	}
	d := &demotion{since: now, answered: answered, failed: failed, paced: r.paced.Load() > now}
	if !r.demoted.CompareAndSwap(nil, d) {
		return
	}
	r.streak.Store(0)
	r.probe.next.Store(now + s.st.probeEvery)
	r.probeAt.Store(r.p.calls.Load() + s.st.probeCalls)
	r.timesDemoted.Add(1)
	tp := &s.st.pool
	r.p.log.Warn("provisioned region demoted: its failure rate is at or over the ejection threshold; "+
		"it takes calls only when no answering region has room, and probes",
		"project", tp.Project, "publisher", tp.Publisher, "model", tp.Model, "region", s.name,
		"failureRate", float64(failed)/float64(answered), "failed", failed, "answered", answered,
		"threshold", s.st.threshold, "interval", s.st.interval,
		"probeEvery", time.Duration(s.st.probeEvery), "probeCalls", s.st.probeCalls, "restoreAfter", s.st.restoreAfter(failed))
}

// succeeded counts a success of demoted region r at now, and restores it
// after restoreAfter in a row. Until then the next call probes it at once:
// failures pace the probes, successes do not. The pace is there so that a
// region that is down costs few calls; a region that answers costs none, and
// it is restored after restoreAfter calls rather than restoreAfter probe
// intervals. That matters most behind several routers, which each probe at
// a share of the pace (their ejection evidence is scaled by their share)
// and each must see the recovery for itself. The evidence a restoration
// needs is unchanged: restoreAfter successes in a row.
func (r *region) succeeded(s *slot, now, pickedAt int64) {
	n := r.streak.Add(1)
	if n == 1 {
		// The count first: every attempt it counts was picked no later
		// than the time taken after it.
		inFlight := r.inFlight.Load()
		r.run.begin(inFlight, pickedAt, r.p.nanos())
	}
	if r.restores(s, now) {
		r.restore(s, now, "it answered its probes")
		return
	}
	r.probe.next.Store(now)
	r.probeAt.Store(0)
}

// probeDue reports whether demoted (or probation) region r's next probe is
// due at now: its time has come and the pool has started the calls it
// waits for.
func (r *region) probeDue(now int64) bool {
	return r.probe.next.Load() <= now && r.p.calls.Load() >= r.probeAt.Load()
}

// takeProbe takes r's probe at now when it is due, once: the next waits for
// st.probeEvery and for st.probeCalls more of the pool's calls, unless a
// success makes it due at once (succeeded).
func (r *region) takeProbe(now int64, st *poolState) bool {
	calls := r.p.calls.Load()
	if calls < r.probeAt.Load() || !r.probe.tick(now, st.probeEvery) {
		return false
	}
	r.probeAt.Store(calls + st.probeCalls)
	return true
}

// ended counts an attempt of demoted region r, picked at pickedAt, that
// ended at now with any outcome: one that was in flight when the run of
// successes began leaves the run's count of them, and may be what the run
// waited for to restore the region.
func (r *region) ended(s *slot, now, pickedAt int64) {
	if r.streak.Load() == 0 || pickedAt > r.run.from.Load() {
		return
	}
	r.run.before.Add(-1)
	if r.restores(s, now) {
		r.restore(s, now, "it answered its probes")
	}
}

// restores reports whether demoted region r's run of successes restores it
// at now: restoreAfter of them, and the attempts in flight when the run
// began have ended, or the run has lasted longer than the region's slowest
// recent answer (silence.late).
func (r *region) restores(s *slot, now int64) bool {
	settled := r.run.before.Load() <= 0 || r.quiet.late(now-r.run.from.Load())
	return settled && r.streak.Load() >= r.restoreAfter(s, now)
}

// restoreAfter is how many successes in a row restore demoted (or
// probation) region r at now, for the failures of its last ejection
// interval (poolState.restoreAfter).
func (r *region) restoreAfter(s *slot, now int64) int64 {
	_, failed := r.fails.sum(bucketOf(now, s.st.failWidth))
	return s.st.restoreAfter(failed)
}

// successRun is where a demoted region's run of successes began. Its
// successes are in a row in the order the region was sent them only once
// the attempts it was sent before the run began have ended: a region
// answering some calls quickly and letting the others run out their
// deadline ends its quick successes first, and restoreAfter of them in a
// row as they end, while the calls sent with them still wait, is no
// evidence that it fails less than the threshold. Those attempts settle the
// run when the last of them ends, or once the run has lasted longer than
// the region's slowest recent answer (silence): an attempt in flight longer
// than that is late by the region's own measure, or a stream whose answer
// began long ago, and waiting for it would hold a recovered region back for
// as long as a stream lasts.
type successRun struct {
	sent   atomic.Int64 // when the attempt whose success began the run was picked
	from   atomic.Int64 // when the run began: its first success ended
	before atomic.Int64 // the attempts in flight when it began that have not ended
}

// begin starts a run at from with inFlight attempts in flight, read before
// from was taken; its first success's attempt was picked at pickedAt.
func (u *successRun) begin(inFlight, pickedAt, from int64) {
	u.before.Store(inFlight)
	u.sent.Store(pickedAt)
	u.from.Store(from)
}

// restore ends r's demotion, if any, with a fresh failure and throttle
// window: the failures that demoted it no longer count, so it gets its full
// share back at once.
//
// A PT held to its pace when it was demoted is held to it again for a
// window from its restoration, as though its window had filled then. The
// pace says the load is above the PT's rate, and lapses a window after the
// window last filled (pace.go); a demoted PT takes almost nothing, so its
// window cannot fill, and a demotion longer than a window let the pace lapse
// for want of calls, not because the load fell. Restored so, a PT came
// back to an empty window and took the whole of it at once, the quotas
// idle beside it, and then nothing for a window while the calls it had
// taken aged out (generated scenario 38-1: a 3-GSU PT back from 55 s of
// outage took 420 calls in 10 s at the start of a surge and none in the 30
// s after, while a quota's latency ran past the deadline). Nothing else
// said the load fell while it was out, and if it did the pace costs what
// it costs after any fill: a window in which a fluctuation over a tenth of
// it may go to pay-as-you-go.
func (r *region) restore(s *slot, now int64, why string) {
	d := r.demoted.Load()
	if d == nil || !r.demoted.CompareAndSwap(d, nil) {
		return
	}
	r.fails.reset()
	for i := range r.lanes {
		r.lanes[i].reset()
	}
	if d.paced && s.tokCost > 0 {
		r.pace(now, s)
	}
	tp := &s.st.pool
	what := "provisioned region restored: "
	if d.ejected {
		what = "region back from its ejection: "
	}
	r.p.log.Info(what+why,
		"project", tp.Project, "publisher", tp.Publisher, "model", tp.Model, "region", s.name,
		"demotedFor", time.Duration(now-d.since), "successesInARow", r.streak.Load())
}
