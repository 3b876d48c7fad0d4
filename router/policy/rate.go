package policy

import (
	"sync/atomic"
	"time"
)

// Capacity is counted in millionths of a window's capacity: over a window of
// one second, a call at a rate of N a second costs 1s/N in microseconds, so
// whatever the rate, a window holds rateCapacity. Over a PT's window of w
// seconds (table.Provisioned.WindowFor), a token costs rateCapacity / (N × w):
// the window holds N × w tokens. A million units keep a window of capacity
// within a bucket's 20-bit count; a capacity above a million calls or tokens
// a window counts as a million.
const (
	// rateWindow is the span over which a region's capacity is counted,
	// but for a PT's tokens, which count over the PT's window: a capacity
	// of N a second admits at most N in any rateWindow, bursts included.
	// In nanoseconds.
	rateWindow = int64(time.Second)
	// costUnit is the unit of a cost in a one-second window.
	costUnit = int64(time.Microsecond)
	// rateCapacity is one window of capacity, in costUnits.
	rateCapacity = rateWindow / costUnit
	// meterWidth is the width of the buckets of a one-second meter, in
	// nanoseconds.
	meterWidth = rateWindow / windowBuckets
)

// meter is a lock-free rate limit over a sliding window: it sums the cost of
// what it admitted in the last window and admits a call when that sum plus
// the call's cost stays within rateCapacity. The window is windowBuckets
// buckets of a width that the caller passes with every call and keeps the
// same (meterWidth for one second; a PT's window / windowBuckets for its
// tokens): a meter whose width changes must be reset.
//
// Unlike a token bucket with a burst of one second (which admits up to twice
// the rate within one second: the burst, then the rate), a sliding window
// never admits more than the capacity in any window, which is how regions
// count their quota. A window admits the rate in a burst when it is empty.
//
// Concurrent takes can each see room for one more call and overshoot the
// limit by the calls that raced; a call costlier than the whole window is
// admitted into an empty one. The zero value is an empty meter.
type meter struct {
	w window // a: cost admitted, in costUnits; b: unused
}

// sum is the cost admitted in the window of buckets of width that ends at
// now.
func (m *meter) sum(now, width int64) int64 {
	a, _ := m.w.sum(bucketOf(now, width))
	return a
}

// add adds cost d >= 0 at now.
func (m *meter) add(now, d, width int64) { m.w.add(bucketOf(now, width), d, 0) }

// refund takes back cost d >= 0 that was added at time at, if the window that
// ends at now still holds it: the call consumed less than it was charged.
func (m *meter) refund(at, now, d, width int64) {
	if at < 0 {
		return
	}
	m.w.addPast(bucketOf(at, width), bucketOf(now, width), -d, 0)
}

// take admits a call of cost at now if the window of buckets of width has
// room for it, and adds its cost. When it has not, wait is how long until
// enough of the window's cost expires, in nanoseconds.
//
// It reads the window once: the refusal's wait comes from the same reading
// as the sum that refused.
func (m *meter) take(now, cost, width int64) (ok bool, wait int64) {
	idx := bucketOf(now, width)
	var v [windowBuckets]uint64
	m.w.load(idx, &v)
	var s int64
	for _, x := range v {
		s += int64(x >> countBits & countMax)
	}
	if !fits(s, cost) {
		return false, waitFor(&v, idx, now, s, cost, width)
	}
	m.w.add(idx, cost, 0)
	return true, 0
}

// fits reports whether a window holding s admits a call of cost: it does when
// the sum stays within one window of capacity, and an empty window admits
// any one call.
func fits(s, cost int64) bool { return s == 0 || s+cost <= rateCapacity }

// waitFor is how long from now until the oldest buckets of a window holding
// s have expired enough to admit cost. v is the window as window.load read
// it, ending at bucket idx.
func waitFor(v *[windowBuckets]uint64, idx uint64, now, s, cost, width int64) int64 {
	for k := uint64(windowBuckets - 1); k > 0; k-- {
		if k > idx {
			continue
		}
		i := idx - k
		if s -= int64(v[k] >> countBits & countMax); fits(s, cost) {
			// Bucket i leaves the window when bucket i+windowBuckets begins.
			return int64(i+windowBuckets)*width - now
		}
	}
	return int64(idx+windowBuckets)*width - now
}

// pacer spaces calls of a capacity under one call per rateWindow, which a
// window of rateWindow cannot express: one call every interval, no burst. It
// is the generic cell rate algorithm with no tolerance, kept as one number:
// the earliest time of the next call. The zero value admits a call at once.
type pacer struct {
	next atomic.Int64 // nanoseconds since the Unix epoch
}

// take admits a call at now if the previous one was at least interval
// nanoseconds before. When it does not, wait is how long until it would.
func (g *pacer) take(now, interval int64) (ok bool, wait int64) {
	for {
		old := g.next.Load()
		if old > now {
			return false, old - now
		}
		if g.next.CompareAndSwap(old, now+interval) {
			return true, 0
		}
	}
}

// tick admits a call at now when the next one is due, once per interval:
// unlike take, a call that comes late by less than an interval does not push
// the schedule back (the next is due interval after this one was due), so
// calls a little sparser than the interval still reach its rate. A call later
// than that starts the schedule afresh. Either way no two calls are admitted
// less than an interval apart on schedule: there is no burst to catch up.
func (g *pacer) tick(now, interval int64) bool {
	for {
		old := g.next.Load()
		if old > now {
			return false
		}
		next := old + interval
		if next <= now {
			next = now + interval
		}
		if g.next.CompareAndSwap(old, next) {
			return true
		}
	}
}
