package policy

import (
	"fmt"
	"sync/atomic"
)

// Blame: a caller whose calls fail where the pool's other callers' calls do
// not is failing itself (blame.go).
//
// A region's failure rate ejects or demotes it for every caller of the
// pool. In a shared cluster one caller can drive that rate alone: calls
// whose content fails them (a document Google cannot process answers 500
// INTERNAL, a generation longer than Google's own limit 504) fail in every
// region they reach, and each retry carries the failure to one more
// region. A neighbor's batch of such calls would demote the PT the other
// teams' calls are served by, and eject the pay-as-you-go regions behind
// it: the outage's cascade, started by one tenant, while the regions serve
// everyone else.
//
// So the policy keeps, for the few callers whose calls have failed lately
// (blameSlots of them per pool, each taken by a caller's first failure and
// given up once its counts have left the window), what their attempts met
// in each region over the ejection interval: all of them, and those the
// region's own failure window counted. A failure is the caller's own
// (CallerFault: counted toward nothing, never retried) when
//
//   - the caller answered at least minRequests attempts over the interval,
//     and is failing (the ejection threshold) in at least two regions and
//     in every region that answered it: whatever region its calls go to,
//     they fail;
//   - in no region where it fails are the other callers' attempts failing,
//     judged on at least minRequests of theirs, and on those since the
//     caller was first watched, one at least (others says why);
//   - and in at least one such region the other callers' attempts are
//     judged and not failing: the region serves them.
//
// A caller fails alone in a region when its attempts there, at least
// minRequests of them, are failing, and the other callers' attempts there,
// judged as above, are not: the region serves everyone but it. Its further
// failures there are then retried as any (the region may be broken for
// what it sends alone, a feature that has not rolled out there) but
// counted toward nothing of the region's: not its failure window,
// ejection, demotion nor throttle. And its calls rank the region last, as
// a demoted one (and take none of its probes), so they go first to the
// regions that may serve them (fail there too, and the first rule makes
// its failures its own).
//
// Why these hold by construction. A region that is down fails every
// caller's calls there: where the others are judged they are failing
// (second rule, and a caller does not fail alone there), and where none
// are judged there is no evidence the region serves anyone (third rule);
// either way the failure is the region's, as before. Only a caller whose
// calls fail wherever they go while the same regions serve the others is
// excused from the regions' windows, and only a caller whose calls fail in
// a region that serves the others is excused from that region's.
//
// Why a region's failures do not count a caller that fails alone there.
// Ejection and demotion move every caller's calls; they are for a region
// that fails its callers. One that serves all but one of them is not
// failing the others, and moving them would send the whole pool to
// pay-as-you-go (the outage's cascade) for what one caller sends, while
// it helps that caller no more than ranking the region last for its calls
// alone does. It matters most where the caller's failures cannot go to a
// second region at all: a stream that Google breaks off after it began is
// committed to its region and never retried, and a call that names a
// cached content is held to the content's region, so a neighbor whose
// calls of that kind Google fails in the PT fails there alone and, without
// this, demoted the PT for everyone once its failures outnumbered the
// others' successes. (A Live session seldom does: its setup counts as a
// success in the region, so its sessions ending at their first turn fail
// half of what the region counts of it at most.) The others' counts are
// every success and failure the region answered (region.tried) less this
// caller's: not the region's failure window, from which the failures of a
// caller already excused are missing while its successes are not. Judged
// on that window, a region failing 60% of four callers' calls excused each
// caller in turn (the others looking healthier with each) and was never
// demoted. Once its failures are its own its calls are no longer
// retried, so they fail in the one region they are sent to: the caller
// stays so while they fail there and the region serves the others, and is
// judged anew (two regions) once it has not been; such a caller's calls
// are no longer ranked away from a region (they fail wherever they go).
//
// With one caller, or callers the router cannot tell apart (no key), every
// failure counts, as before: no other caller is judged. A caller with no
// slot free (blameSlots callers failing at once: a region is down for
// everyone) counts too. Nor can a burst into a pool with no history be
// told apart: the region's first answers are the burst's own, and its
// failures count until the caller has minRequests of them there.

// blameSlots is how many callers a pool watches at once.
const blameSlots = 32

// blameSlot is a caller the pool watches: its key and the last time it
// reported, in nanoseconds of the pool's clock. Its counts live in each
// region (region.blame), at the slot's index.
type blameSlot struct {
	key  atomic.Uint64
	last atomic.Int64
	// from is the bucket of the failure window in which the slot was
	// taken: the others' counts are judged from it on (others).
	from atomic.Uint64
	// own is set while the caller's failures are its own, so that the
	// change is logged once each way.
	own atomic.Bool
}

// callerCounts is one watched caller's attempts in one region: all that
// answered (a) and failed (b), and those the region counted in its failure
// window.
type callerCounts struct {
	all, counted window
	// alone is set while the caller fails alone in the region, so that the
	// change is logged once each way.
	alone atomic.Bool
	// before is what the region had answered (region.tried) in the
	// slot's first bucket (blameSlot.from) when the slot was taken,
	// answered<<32 | failed: attempts of the time before it (others).
	before atomic.Uint64
}

// slotOf is the index of caller key's slot, or -1 when it has none. A key
// has two candidate slots, from its low and high bits.
func (p *Pool) slotOf(key uint64) int {
	for _, i := range [2]uint64{key % blameSlots, (key >> 32) % blameSlots} {
		if p.blame[i].key.Load() == key {
			return int(i)
		}
	}
	return -1
}

// claimSlot gives key a slot, one that is free or whose counts have all left
// the window (its caller reported nothing for an interval); -1 when neither
// candidate is.
func (p *Pool) claimSlot(key uint64, now int64, st *poolState) int {
	for _, i := range [2]uint64{key % blameSlots, (key >> 32) % blameSlots} {
		s := &p.blame[i]
		old := s.key.Load()
		if (old == 0 || now-s.last.Load() > int64(st.interval)+st.failWidth) && s.key.CompareAndSwap(old, key) {
			from := bucketOf(now, st.failWidth)
			s.last.Store(now)
			s.from.Store(from)
			s.own.Store(false)
			for _, rs := range st.slots {
				c := &rs.r.blame[i]
				c.alone.Store(false)
				a, f := rs.r.tried.sumSince(from, from) // that bucket alone
				c.before.Store(uint64(a)<<32 | uint64(f))
			}
			return int(i)
		}
	}
	return -1
}

// blameCaller is how an attempt of caller key's, which region r answered
// with o (a success or a failure), counts: learned, what the caller is
// told (CallerFault for a failure that is the caller's own, see Blame, o
// otherwise), and counted, what the region learns (CallerFault, nothing,
// for a failure that is the caller's own or one in a region the caller
// fails alone in; o otherwise). It notes the attempt
// in the caller's counts when the pool watches the caller, and starts
// watching it on a failure.
func (p *Pool) blameCaller(key uint64, r *region, o Outcome) (learned, counted Outcome) {
	i := p.slotOf(key)
	if i < 0 && o != Failure {
		return o, o // the common case: a caller the pool does not watch
	}
	st := r.cfg.Load().st
	now := p.nanos()
	if i < 0 {
		if i = p.claimSlot(key, now, st); i < 0 {
			return o, o
		}
	}
	p.blame[i].last.Store(now)
	failed := int64(0)
	if o == Failure {
		failed = 1
	}
	idx := bucketOf(now, st.failWidth)
	c := &r.blame[i]
	c.all.add(idx, 1, failed)
	if o == Failure {
		own := p.callersOwn(i, now, st)
		p.judged(i, key, own, st)
		if own {
			return CallerFault, CallerFault
		}
		alone := p.failsAlone(i, r, idx, st)
		p.judgedIn(i, r, key, alone, st)
		if alone {
			return Failure, CallerFault
		}
	}
	c.counted.add(idx, 1, failed)
	return o, o
}

// tally counts a success or failure of r in its tried window, whatever the
// blame rule makes of it.
func (r *region) tally(o Outcome) {
	failed := int64(0)
	if o == Failure {
		failed = 1
	}
	r.tried.add(bucketOf(r.p.nanos(), r.cfg.Load().st.failWidth), 1, failed)
}

// failsAlone reports whether the caller of slot i fails alone in r over
// the ejection interval ending in bucket idx: its attempts there are
// failing, and the others', judged, are not (see Blame).
func (p *Pool) failsAlone(i int, r *region, idx uint64, st *poolState) bool {
	if a, f := r.blame[i].all.sum(idx); !st.isFailing(a, f) {
		return false
	}
	judged, failing := p.others(i, r, idx, st)
	return judged && !failing
}

// others judges the attempts of the pool's other callers in r, every one
// it answered (tried) over the interval ending in bucket idx less the ones
// of the caller of slot i: judged when there are enough of
// them, failing when they fail at or over the ejection threshold.
//
// Judged twice. Over the whole window, on at least minRequests: the
// evidence that the region serves the others. And over the part of it
// since the slot was taken (blameSlot.from, callerCounts.before), on at
// least one attempt: the caller was not watched before its first failure,
// so its own successes of that time are in the region's window but not in
// its counts, and pass for the others'. Judged over the whole window
// alone, a region going down for everyone would find each caller failing
// where "the others", its own successes of a moment before among them,
// are served; and each caller's failures would be excused in turn. Since
// the slot was taken, the others' attempts are truly the others': where
// the region fails everyone, they fail, the first of them already.
//
// Why one attempt, not more. Until the others are judged, a caller whose
// calls fail everywhere is retried, and its retries' failures count in
// the pay-as-you-go regions they reach; the longer the wait, the more of
// them, and a caller sending several times the others' calls ejected one
// of those regions while the others made half of minRequests attempts.
// The first of the others' attempts since comes as soon as any does. A
// region failing most but not all of everyone's calls may pass that one
// lucky attempt, and a failure of the caller's is excused; but each later
// failure is judged again, on every attempt of the others' since, and the
// whole window must not be failing either (TestACallerFailingEverywhere
// FailsItself: a PT failing 60% of four callers' calls is demoted).
func (p *Pool) others(i int, r *region, idx uint64, st *poolState) (judged, failing bool) {
	ca, cf := r.blame[i].all.sum(idx)
	ra, rf := r.tried.sum(idx)
	oa, of := max(ra-ca, 0), max(rf-cf, 0)
	from := p.blame[i].from.Load()
	sa, sf := r.tried.sumSince(idx, from)
	if idx-from < windowBuckets {
		// The slot's first bucket is in the sum: less what it held
		// before the slot was taken.
		b := r.blame[i].before.Load()
		sa, sf = sa-int64(b>>32), sf-int64(b&(1<<32-1))
	}
	sa, sf = max(sa-ca, 0), max(sf-cf, 0)
	failing = st.isFailing(oa, of) || (sa > 0 && float64(sf) >= st.threshold*float64(sa))
	return oa >= st.minRequests && sa > 0, failing
}

// avoided has bit k set for each region of the pool (its k-th) that caller
// key fails alone in: its calls rank them last (choose). None for a caller
// the pool does not watch, or whose failures are its own: its calls fail
// wherever they go, and moving them would only spend other regions'
// quotas on them.
func (p *Pool) avoided(key uint64, now int64, st *poolState) uint32 {
	if key == 0 {
		return 0
	}
	i := p.slotOf(key)
	if i < 0 || p.blame[i].own.Load() {
		return 0
	}
	idx := bucketOf(now, st.failWidth)
	var m uint32
	for k, s := range st.slots {
		if p.failsAlone(i, s.r, idx, st) {
			m |= 1 << k
		}
	}
	return m
}

// judged logs the change of caller key's judgement, in slot i, to own.
// The log names the caller by its key; the router's request log names its
// ServiceAccount's namespace (under --caller-auth=kubernetes).
func (p *Pool) judged(i int, key uint64, own bool, st *poolState) {
	if p.blame[i].own.Swap(own) == own {
		return
	}
	tp := &st.pool
	if own {
		p.log.Warn("a caller's calls fail in every region they reach while the regions serve the pool's other callers: "+
			"its failures are its own, not retried and counted toward no region's ejection or demotion",
			"project", tp.Project, "publisher", tp.Publisher, "model", tp.Model, "caller", fmt.Sprintf("%016x", key))
		return
	}
	p.log.Info("a caller's failures count toward the regions again",
		"project", tp.Project, "publisher", tp.Publisher, "model", tp.Model, "caller", fmt.Sprintf("%016x", key))
}

// judgedIn logs the change of caller key's judgement in region r, in slot
// i, to alone.
func (p *Pool) judgedIn(i int, r *region, key uint64, alone bool, st *poolState) {
	if r.blame[i].alone.Swap(alone) == alone {
		return
	}
	tp := &st.pool
	region := r.cfg.Load().name
	if alone {
		p.log.Warn("a caller's calls fail in a region that serves the pool's other callers: "+
			"its failures there count toward nothing of the region's, and its calls go to other regions first",
			"project", tp.Project, "publisher", tp.Publisher, "model", tp.Model, "region", region, "caller", fmt.Sprintf("%016x", key))
		return
	}
	p.log.Info("a caller's failures count toward the region again",
		"project", tp.Project, "publisher", tp.Publisher, "model", tp.Model, "region", region, "caller", fmt.Sprintf("%016x", key))
}

// callersOwn reports whether the failures of the caller of slot i are its
// own (see Blame), over the ejection interval ending at now.
func (p *Pool) callersOwn(i int, now int64, st *poolState) bool {
	idx := bucketOf(now, st.failWidth)
	var answered int64
	failingIn, servesOthers := 0, false
	for _, s := range st.slots {
		r := s.r
		a, f := r.blame[i].all.sum(idx)
		answered += a
		if a == 0 {
			continue
		}
		if float64(f) < st.threshold*float64(a) {
			// A region serves the caller's calls: they do not fail
			// wherever they go, and its retries must go on reaching it.
			return false
		}
		failingIn++
		judged, failing := p.others(i, r, idx, st)
		if failing {
			return false
		}
		servesOthers = servesOthers || judged
	}
	// Once its failures are its own, the caller's calls are no longer
	// retried, so they fail in the one region they go to: it stays so
	// while they fail there and the region serves the others.
	need := 2
	if p.blame[i].own.Load() {
		need = 1
	}
	return answered >= st.minRequests && failingIn >= need && servesOthers
}
