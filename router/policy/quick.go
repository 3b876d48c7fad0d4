package policy

import "fmt"

// Too late for a region: an attempt is not sent where it is unlikely to end
// in time.
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
// call's deadline, is shorter than the median of the region's latest
// successes (answerSamples of them, each the attempt's whole length, from
// its pick to its end: a stream must end by the deadline too), once it gave
// at least minRequests successes over the ejection interval, and only where
// the whole time the caller gave the call (from its first pick to its
// deadline) is at least that median: where the call's own earlier
// attempts, or its wait for headroom, spent the time it needed there. That
// rule is right by construction, without a latency threshold of its own:
//
//   - Of answers drawn alike, the next is slower than their median with a
//     chance of one half: an attempt left out was more likely to run out
//     its time than to be answered. The place it would take goes to a call
//     judged by the same measure with at least even odds (the rule judges
//     only calls whose caller gave them the median or more), and a first
//     attempt is never left out. The quickest success, the measure this
//     rule had before, left out only attempts with almost no chance (at
//     most 1 in 21 at the default minRequests): a PT answering half its calls with a 504 after most
//     of a 3-s deadline, demoted, had the retries of those 504s fill the
//     quotas that answer in a second, each with half a second left, and a
//     third of what the quotas took ran out, while the first attempts they
//     would have served in time went to the failing PT.
//   - It keys on the region's own latency, as it is now: a region that
//     slows down is judged by its slower answers once they are half of its
//     latest; one that recovers, once its quick answers are.
//   - It never judges a caller by answers that are not like its own. The
//     answers of a shared region are not alike: one tenant's long prompts
//     (a 30-s answer each) would make its median 30 s, and a rule that
//     judged every attempt would leave out every call of another tenant
//     whose deadline is shorter, though it would be answered in a second;
//     left out, those calls would add no quick success to lower the
//     measure, for as long as the slow calls kept coming: a neighbor could
//     lock a caller out of a region, or of the whole pool. A call whose
//     caller gave it less time than the region's median is not judged at
//     all: it is sent as though the rule did not exist, and its answers, if
//     quick, lower the measure for the calls like it. So a first attempt,
//     which has all the time its caller gave, is never left out; what the
//     rule leaves out is the attempt that had the time and spent it (a
//     retry after a slow failure, a call that waited for a quota's room).
//   - Nothing is left out for good. A region is judged only on successes
//     it gave lately: first attempts keep it measured, and where no call
//     has succeeded in it over the ejection interval nothing is left out.
//
// What it may still get wrong: a caller whose calls go first to one region
// and only retry in another, where a neighbor's slower calls set the median
// below this caller's deadline and above its own answers, has its retries
// there with less time left than that median left out, though they might
// have been answered: retries only. So does a caller whose own calls are of
// two kinds, short and long, with more long ones: the retry of a short call
// with less time than the long ones take is left out, though it would end
// in time (TestUnlikeCallsAreJudgedAsOne); the router does not know a
// call's kind before it is answered, and the quickest success sent it. A
// retry left out where the region had
// room to spare (no call would have taken the place) loses its chance,
// under one half. Calls whose answers take no time (a Live session's turns,
// which the router learns as attempts picked and ended at once) make the
// median near zero: the rule then leaves nothing out, which is the safe
// side. The median is of the calls the region answered: those that ran
// out their deadline are not among them, so for a region whose latency tail
// runs past the deadline it is under the median of what the region is
// sent, and the rule errs toward sending.
//
// What it does not do: cut a first attempt short. A region whose latency
// tail runs past the callers' deadlines, for fewer calls than eject or
// demote it, keeps its first attempts, and the calls it answers too late
// are lost: each attempt had the whole deadline, and none is left to
// retry. A PT answering 17% of its calls after a 3-s deadline, a quota
// beside it idle, served 88.6% before any fault (generated-33-9). An
// attempt that gave way to a retry elsewhere (a retry within the budget,
// to a region with room) once the time left fell to the median answer of
// the quickest region the call had not tried served fewer of 33-9's calls
// (73.0 to 69.6%) and about as many of 33-3's (93.75 to 93.95%). The
// median gives the retry an even chance, about what the attempt it cut
// still had (a third of the PT's calls not answered by then were answered
// in time), and the retries spent the budget the regions' failures
// needed. The rule that would be right weighs the attempt's chance of an
// answer in the time left, given none so far (its region's answer times,
// the calls that ran out counted, which successes alone do not show),
// against a retry's chance where there is room; a second attempt in flight
// beside the first (a hedge) would cut nothing. Neither is built: the
// runbook says what an operator can do.
//
// A call that no region can answer in time ends with ErrTooLate (a
// deadline error) at once, instead of at its deadline; a retry refused so
// answers the caller with the attempt before it, as any refused retry.
// Counting calls (Request.Counting) are neither judged nor measured: they
// answer far sooner than the model does.

// ErrTooLate: every region the call may use has, lately, answered most of
// its calls in more time than is left before the call's deadline. It matches
// ErrDeadlineExceeded (and context.DeadlineExceeded).
var ErrTooLate = fmt.Errorf("no region lately answered most of its calls in the time left before the call's deadline: %w", ErrDeadlineExceeded)

// tooSlowFor reports whether region r is too slow for an attempt with left
// nanoseconds before its call's deadline, of a call its caller gave given
// nanoseconds in all (see above): the median of its latest successes is
// over left and no longer than given, and it gave at least minRequests
// successes over the ejection interval. The successes are read only when
// left is under both given (the attempt is not a first one) and the
// region's slowest recent answer (silence), which is rare; with more time
// left than every answer of the last interval took, the attempt is sent.
func (r *region) tooSlowFor(left, given, now int64, st *poolState) bool {
	if left >= given || left >= r.quiet.slowest.Load() {
		return false
	}
	m := r.times.median()
	if m == 0 || left >= m || given < m {
		return false
	}
	answered, failed := r.fails.sum(bucketOf(now, st.failWidth))
	return answered-failed >= st.minRequests
}
