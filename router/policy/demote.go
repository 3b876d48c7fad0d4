package policy

import "time"

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
//   - It keeps a probe trickle: one first attempt every interval/minRequests
//     goes to it before any other region, so it answers minRequests calls per
//     ejection interval, the evidence the failure rate is judged on, however
//     much room the other regions have.
//   - It is restored after restoreAfter successes in a row (7 at the default
//     threshold of 50%; see restoreAfter), and gets its full share back at
//     once: its failure and throttle windows start afresh. A success makes
//     the next call a probe at once (failures pace the probes, successes do
//     not), so a recovered region is restored one probe interval and
//     restoreAfter calls after it recovers.
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
}

// maybeDemote demotes provisioned region r after a failure at now, if it is
// failing and not demoted yet; a failure of a demoted region breaks its run
// of successes.
func (r *region) maybeDemote(s *slot, now int64) {
	if r.demoted.Load() != nil {
		r.streak.Store(0)
		return
	}
	answered, failed := r.fails.sum(bucketOf(now, s.st.failWidth))
	if !s.st.isFailing(answered, failed) {
		return
	}
	d := &demotion{since: now, answered: answered, failed: failed}
	if !r.demoted.CompareAndSwap(nil, d) {
		return
	}
	r.streak.Store(0)
	r.probe.next.Store(now + s.st.probeEvery)
	r.timesDemoted.Add(1)
	tp := &s.st.pool
	r.p.log.Warn("provisioned region demoted: its failure rate is at or over the ejection threshold; "+
		"it takes calls only when no answering region has room, and probes",
		"project", tp.Project, "publisher", tp.Publisher, "model", tp.Model, "region", s.name,
		"failureRate", float64(failed)/float64(answered), "failed", failed, "answered", answered,
		"threshold", s.st.threshold, "interval", s.st.interval,
		"probeEvery", time.Duration(s.st.probeEvery), "restoreAfter", s.st.restoreAfter)
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
func (r *region) succeeded(s *slot, now int64) {
	if r.streak.Add(1) >= s.st.restoreAfter {
		r.restore(s, now, "it answered its probes")
		return
	}
	r.probe.next.Store(now)
}

// restore ends r's demotion, if any, with a fresh failure and throttle
// window: the failures that demoted it no longer count, so it gets its full
// share back at once.
func (r *region) restore(s *slot, now int64, why string) {
	d := r.demoted.Load()
	if d == nil || !r.demoted.CompareAndSwap(d, nil) {
		return
	}
	r.fails.reset()
	for i := range r.lanes {
		r.lanes[i].reset()
	}
	tp := &s.st.pool
	r.p.log.Info("provisioned region restored: "+why,
		"project", tp.Project, "publisher", tp.Publisher, "model", tp.Model, "region", s.name,
		"demotedFor", time.Duration(now-d.since), "successesInARow", r.streak.Load())
}
