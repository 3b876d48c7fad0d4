package policy

import (
	"fmt"
	"sync/atomic"
)

// Too late for a region: an attempt is not sent where it cannot end in time.
//
// A call's attempts share one deadline. A retry after an attempt that
// failed slowly (a 504 after the region's own timeout, a call that hung
// most of the deadline), or a call that waited for headroom, may have less
// time left than a region takes to answer. Sent there anyway, it takes a
// place in the region's quota (its meter, or Google's own) and its load,
// and ends at the deadline with nothing: the place it took is one a new
// call, with all its time ahead, would have been served in. In an outage
// of the provisioned region whose failures come late, those retries are a
// steady share of what the spill regions are sent: a fifth of one
// region's quota in a replay where the PT failed a third of its calls
// after four seconds of a five-second deadline.
//
// So a region is not a candidate for an attempt whose time left, to the
// call's deadline, is shorter than the quickest success the region gave in
// the last one to two ejection intervals (the attempt's whole length, from
// its pick to its end: a stream must end by the deadline too), once it gave
// at least minRequests successes over the ejection interval, and only where
// the whole time the caller gave the call (from its first pick to its
// deadline) is at least that quickest success: where the call's own earlier
// attempts, or its wait for headroom, spent the time it needed there. That
// rule is right by construction, without a latency threshold of its own:
//
//   - Of n answers drawn alike, the next is quicker than all n with a
//     chance of 1/(n+1): an attempt left out had at most that chance of
//     ending in time (1/21 at the default minRequests of 20, less the more
//     calls the region serves; behind many routers minRequests is scaled
//     to each one's share, down to 5: 1/6), against a new call's full
//     chance for the same place.
//   - It keys on the region's own latency, as it is now: a region that
//     slows down is judged by its slower answers once its quick ones are
//     two intervals old (until then it is sent what it may no longer answer
//     in time, as before this rule); one that recovers, by its first quick
//     success.
//   - It never judges a caller by answers that are not like its own. The
//     answers of a shared region are not alike: one tenant's long prompts
//     (a 30-s answer each, 20 an interval) would make its quickest success
//     30 s, and a rule that judged every attempt would leave out every call
//     of another tenant whose deadline is shorter, though it would be
//     answered in a second; left out, those calls would add no quick
//     success to lift the measure, for as long as the slow calls kept
//     coming: a neighbor could lock a caller out of a region, or of the
//     whole pool. A call whose caller gave it less time than the region's
//     quickest success is not judged at all: it is sent as though the rule
//     did not exist, and its answers, if quick, lower the measure for the
//     calls like it. So a first attempt, which has all the time its caller
//     gave, is never left out; what the rule leaves out is the attempt that
//     had the time and spent it (a retry after a slow failure, a call that
//     waited for a quota's room).
//   - Nothing is left out for good. A region is judged only on successes
//     it gave: first attempts keep it measured, and where no call is sent
//     it for two intervals nothing is known and nothing is left out.
//
// What it may still get wrong: a caller whose calls go first to one region
// and only retry in another, where a neighbor's slower calls set the
// quickest success below this caller's deadline and above its own answers,
// has its retries there with less time left than that quickest success left
// out, though they might have been answered: retries only, and only those
// with less time than the quickest answer anyone got there. Calls whose
// answers take no time (a Live session's turns, which the router learns as
// attempts picked and ended at once) make the quickest success near zero:
// the rule then leaves nothing out, which is the safe side.
//
// A call that no region can answer in time ends with ErrTooLate (a
// deadline error) at once, instead of at its deadline; a retry refused so
// answers the caller with the attempt before it, as any refused retry.
// Counting calls (Request.Counting) are neither judged nor measured: they
// answer far sooner than the model does.

// ErrTooLate: every region the call may use has, lately, answered no call
// as quickly as the time left before the call's deadline. It matches
// ErrDeadlineExceeded (and context.DeadlineExceeded).
var ErrTooLate = fmt.Errorf("no region answered as quickly as the time left before the call's deadline: %w", ErrDeadlineExceeded)

// quickBits is the width of a quickest bucket's latency, in nanoseconds:
// up to 18 minutes, beyond which it saturates.
const (
	quickBits = 64 - tagBits
	quickMax  = 1<<quickBits - 1
)

// quickest keeps a region's quickest success in two buckets of the
// ejection interval's width: the current one and the one before, so that
// what it reports covers one to two intervals, never a lone answer of a
// bucket just begun. Each bucket is one atomic word: its index in time
// (modulo 2^tagBits, as window's) over its latency. Its zero value is
// ready.
type quickest struct {
	b [2]atomic.Uint64
}

// add counts a success that lasted lat at now, in buckets of width.
func (q *quickest) add(now, lat, width int64) {
	idx := bucketOf(now, width)
	tag := idx & tagMask
	lat = min(max(lat, 1), quickMax)
	b := &q.b[idx%2]
	for {
		old := b.Load()
		if old>>quickBits == tag && int64(old&quickMax) <= lat {
			return
		}
		if b.CompareAndSwap(old, tag<<quickBits|uint64(lat)) {
			return
		}
	}
}

// get returns the quickest success of the bucket of now and the one
// before it, in buckets of width; 0 when neither holds one.
func (q *quickest) get(now, width int64) int64 {
	idx := bucketOf(now, width)
	var best int64
	for k := range min(idx+1, 2) {
		x := q.b[(idx-k)%2].Load()
		if x>>quickBits != (idx-k)&tagMask {
			continue
		}
		if l := int64(x & quickMax); best == 0 || l < best {
			best = l
		}
	}
	return best
}

// tooSlowFor reports whether region r is too slow for an attempt with left
// nanoseconds before its call's deadline, of a call its caller gave given
// nanoseconds in all (see above): its quickest recent success took longer
// than left and no longer than given, and it gave at least minRequests
// successes over the ejection interval. The window is read only when the
// quickest success is over the time left, which is rare.
func (r *region) tooSlowFor(left, given, now int64, st *poolState) bool {
	q := r.quick.get(now, int64(st.interval))
	if q == 0 || left >= q || given < q {
		return false
	}
	answered, failed := r.fails.sum(bucketOf(now, st.failWidth))
	return answered-failed >= st.minRequests
}
