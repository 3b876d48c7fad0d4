package policy

// Ejection follows Envoy's failure-percentage outlier detection and gRFC A50,
// evaluated when a failure is reported rather than on a timer:
//
//   - A region is failing when, over the ejection interval, it answered at
//     least minRequests attempts (successes and failures; 429s do not count)
//     and failures/answered >= failureRateThreshold.
//   - Only an ejectable shared region is ejected. A provisioned region is never
//     ejected: its capacity is paid for. A failing one is demoted instead
//     (demote.go).
//   - An ejection lasts min(baseEjectionTime × multiplier, maxEjectionTime),
//     shortened by a random 0-10% so that regions ejected together do not
//     return together. The multiplier grows by one per ejection and falls by one
//     per ejection interval the region spent un-ejected (gRFC A50).
//   - Ejected is not removed: an ejected region ranks behind every region
//     that is not, as a demoted provisioned region does, and takes only the
//     calls none of them has room for (choose says why).
//   - When the ejection ends, the region is on probation, a circuit
//     breaker's half-open state: it ranks last still, takes a probe every
//     interval/minRequests and 100/budgetPercent of the pool's calls (any
//     lane the call may use), and is restored to
//     its full share after restoreAfter successes in a row, as a demoted
//     provisioned region is (demote.go: the probes, the run of successes
//     and the restoration are the same). Without it a region whose
//     ejection ends while it still fails looks healthy (the failures that
//     ejected it have aged out of its window) and takes its full share of
//     first attempts until minRequests of them have failed again: for a
//     region that hangs past the callers' deadlines, every call it is sent
//     for a deadline and more, lost each time an ejection ends. The
//     failure window is not reset at ejection: the calls an ejected region
//     takes for want of room elsewhere are judged on what it answered.
//   - An ejection happens only if, after it, at most maxEjectedPercent of the
//     pool's regions are ejected or on probation. maxEjectedPercent < 100,
//     so one region is always left.
//   - Panic (Envoy's healthy panic threshold): when fewer than half the
//     regions are left neither ejected nor on probation, ejections and
//     probations are ignored.

// failing reports whether the region's failure rate over the ejection interval
// reaches the threshold with enough answered attempts to count.
func (r *region) failing(now int64, st *poolState) bool {
	return st.isFailing(r.fails.sum(bucketOf(now, st.failWidth)))
}

// isFailing reports whether a failure window of answered attempts, failed of
// them failures, reaches the threshold with enough answered to count.
func (st *poolState) isFailing(answered, failed int64) bool {
	return answered >= st.minRequests && float64(failed) >= st.threshold*float64(answered)
}

// maybeEject ejects the region if it is ejectable, failing and the
// maxEjectedPercent cap allows it. The check without the lock is the common,
// cheap case; the decision is made again under p.mu.
func (p *Pool) maybeEject(r *region, now int64) {
	if r.ejectedUntil.Load() > now || !r.failing(now, r.cfg.Load().st) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.st.Load()
	s := r.cfg.Load()
	if s.st != st || !s.ejectable || r.ejectedUntil.Load() > now || !r.failing(now, st) {
		return
	}
	out := st.ejected(now)
	if !r.onProbation() {
		out++
	}
	if out*100 > st.maxEjectedPct*len(st.slots) {
		return
	}
	if last := r.ejectedUntil.Load(); last > 0 {
		healthy := (now - last) / int64(st.interval)
		r.multiplier = max(r.multiplier-healthy, 0)
	}
	r.multiplier++
	d := st.maxEjection
	if r.multiplier < d/st.baseEjection {
		d = st.baseEjection * r.multiplier
	}
	d -= int64(float64(d) * 0.1 * p.rnd.float())
	r.ejectedUntil.Store(now + d)
	r.timesEjected.Add(1)
	if r.demoted.Load() == nil {
		answered, failed := r.fails.sum(bucketOf(now, st.failWidth))
		r.demoted.Store(&demotion{since: now, answered: answered, failed: failed, ejected: true})
	}
	r.streak.Store(0)
	r.probe.next.Store(now + d)
	r.probeAt.Store(0) // the ejection's end is its first probe's time
}

// capEjections lifts ejections, soonest-ending first, until at most
// maxEjectedPercent of the regions are ejected: after an update that removed
// regions or lowered the cap. Caller must hold p.mu.
func (st *poolState) capEjections(now int64) {
	for (st.ejected(now))*100 > st.maxEjectedPct*len(st.slots) {
		var first *slot
		for _, s := range st.slots {
			if !s.r.onProbation() && s.r.ejectedUntil.Load() <= now {
				continue
			}
			if first == nil || s.r.ejectedUntil.Load() < first.r.ejectedUntil.Load() {
				first = s
			}
		}
		first.r.ejectedUntil.Store(min(first.r.ejectedUntil.Load(), now))
		first.r.restore(first, now, "too many regions were out for the pool's ejection cap")
	}
}
