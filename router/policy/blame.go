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
//     judged on at least minRequests of theirs;
//   - and in at least one such region the other callers' attempts are
//     judged and not failing: the region serves them.
//
// Why these hold by construction. A region that is down fails every
// caller's calls there: where the others are judged they are failing
// (second rule), and where none are judged there is no evidence the region
// serves anyone (third rule); either way the failure is the region's, as
// before. A caller whose calls fail in one region only (that region broken
// for what it sends) is failing in one region, and the region's failures
// count (first rule). Only a caller whose calls fail wherever they go while
// the same regions serve the others is excused from the regions' windows.
// The others' counts are the region's own failure window less what it
// counted of this caller, so a caller whose failures the policy has
// excused does not make the others look healthier than they are, and its
// own counts keep every attempt, so excusing its failures does not make it
// look healthier either. Once its failures are its own its calls are no
// longer retried, so they fail in the one region they are sent to: the
// caller stays so while they fail there and the region serves the others,
// and is judged anew (two regions) once it has not been.
//
// With one caller, or callers the router cannot tell apart (no key), every
// failure counts, as before. A caller with no slot free (blameSlots callers
// failing at once: a region is down for everyone) counts too.

// blameSlots is how many callers a pool watches at once.
const blameSlots = 32

// blameSlot is a caller the pool watches: its key and the last time it
// reported, in nanoseconds of the pool's clock. Its counts live in each
// region (region.blame), at the slot's index.
type blameSlot struct {
	key  atomic.Uint64
	last atomic.Int64
	// own is set while the caller's failures are its own, so that the
	// change is logged once each way.
	own atomic.Bool
}

// callerCounts is one watched caller's attempts in one region: all that
// answered (a) and failed (b), and those the region counted in its failure
// window.
type callerCounts struct {
	all, counted window
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
			s.last.Store(now)
			s.own.Store(false)
			return int(i)
		}
	}
	return -1
}

// blameCaller is the outcome an attempt of caller key's, which region r
// answered with o (a success or a failure), counts as: CallerFault for a
// failure that is the caller's own (see Blame), o otherwise. It notes the
// attempt in the caller's counts when the pool watches the caller, and
// starts watching it on a failure.
func (p *Pool) blameCaller(key uint64, r *region, o Outcome) Outcome {
	i := p.slotOf(key)
	if i < 0 && o != Failure {
		return o // the common case: a caller the pool does not watch
	}
	st := r.cfg.Load().st
	now := p.nanos()
	if i < 0 {
		if i = p.claimSlot(key, now, st); i < 0 {
			return o
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
			return CallerFault
		}
	}
	c.counted.add(idx, 1, failed)
	return o
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
		ra, rf := r.fails.sum(idx)
		ca, cf := r.blame[i].counted.sum(idx)
		oa, of := max(ra-ca, 0), max(rf-cf, 0)
		if oa >= st.minRequests {
			if st.isFailing(oa, of) {
				return false
			}
			servesOthers = true
		}
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
