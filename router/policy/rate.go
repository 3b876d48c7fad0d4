package policy

import (
	"sync/atomic"
	"time"
)

// rateWindow is the span over which a region's capacity is counted: a
// capacity of N a second admits at most N in any rateWindow, bursts included.
const rateWindow = int64(time.Second)

// Bucket layout of a meter word: the top meterTagBits hold the bucket's index
// in time (modulo 2^meterTagBits), the rest its count.
const (
	meterTagBits   = 24
	meterCountBits = 64 - meterTagBits
	meterCountMax  = 1<<meterCountBits - 1
	meterWidth     = rateWindow / windowBuckets
)

// meter is a lock-free rate limit over a sliding window: it sums the cost of
// what it admitted in the last rateWindow and admits a call when that sum plus
// the call's cost stays within the limit. Costs are in nanoseconds of capacity
// (a call at a rate of N a second costs 1s/N), so the limit of a window of one
// second is one second of capacity whatever the rate.
//
// Unlike a token bucket with a burst of one second (which admits up to twice
// the rate within one second: the burst, then the rate), a sliding window
// never admits more than the capacity in any window, which is how regions
// count their quota. A window admits the rate in a burst when it is empty.
//
// The window is windowBuckets buckets of meterWidth, each one atomic word:
// its tag (its index in time modulo 2^24: tags repeat every 19 days) and a
// count that saturates at 2^40-1 nanoseconds of capacity. Concurrent takes
// can each see room for one more call and overshoot the limit by the calls
// that raced; a call costlier than the whole window is admitted into an
// empty one. Times are nanoseconds since the Unix epoch and are not negative.
type meter struct {
	b [windowBuckets]atomic.Uint64
}

// sum is the cost admitted in the window that ends at now.
func (m *meter) sum(now int64) int64 {
	idx := uint64(now) / uint64(meterWidth)
	var s int64
	for k := uint64(0); k < windowBuckets && k <= idx; k++ {
		i := idx - k
		if v := m.b[i%windowBuckets].Load(); v>>meterCountBits == i&tagMask {
			s += int64(v & meterCountMax)
		}
	}
	return s
}

// add adds cost d >= 0 at now.
func (m *meter) add(now, d int64) {
	m.update(uint64(now)/uint64(meterWidth), d, true)
}

// refund takes back cost d >= 0 that was added at time at, if the window that
// ends at now still holds it: the call consumed less than it was charged.
func (m *meter) refund(at, now, d int64) {
	idx, cur := uint64(at)/uint64(meterWidth), uint64(now)/uint64(meterWidth)
	if at < 0 || idx > cur || cur-idx >= windowBuckets {
		return
	}
	m.update(idx, -d, false)
}

// update adds d to the count of bucket idx. A stale bucket is started afresh
// when fresh is set and left alone otherwise. Counts saturate at 0 and at
// meterCountMax.
func (m *meter) update(idx uint64, d int64, fresh bool) {
	tag := idx & tagMask
	slot := &m.b[idx%windowBuckets]
	for {
		old := slot.Load()
		var c int64
		if old>>meterCountBits == tag {
			c = int64(old & meterCountMax)
		} else if !fresh {
			return
		}
		c = min(max(c+d, 0), meterCountMax)
		v := tag<<meterCountBits | uint64(c)
		if v == old || slot.CompareAndSwap(old, v) {
			return
		}
	}
}

// take admits a call of cost at now if the window has room for it, and adds
// its cost. When it has not, wait is how long until enough of the window's
// cost expires.
func (m *meter) take(now, cost int64) (ok bool, wait int64) {
	s := m.sum(now)
	if !fits(s, cost) {
		return false, m.wait(now, s, cost)
	}
	m.add(now, cost)
	return true, 0
}

// fits reports whether a window holding s admits a call of cost: it does when
// the sum stays within one window of capacity, and an empty window admits
// any one call.
func fits(s, cost int64) bool { return s == 0 || s+cost <= rateWindow }

// wait is how long from now until the oldest buckets of a window holding s
// have expired enough to admit cost.
func (m *meter) wait(now, s, cost int64) int64 {
	idx := uint64(now) / uint64(meterWidth)
	for k := uint64(windowBuckets - 1); k > 0; k-- {
		if k > idx {
			continue
		}
		i := idx - k
		if v := m.b[i%windowBuckets].Load(); v>>meterCountBits == i&tagMask {
			s -= int64(v & meterCountMax)
		}
		if fits(s, cost) {
			// Bucket i leaves the window when bucket i+windowBuckets begins.
			return int64(i+windowBuckets)*meterWidth - now
		}
	}
	return int64(idx+windowBuckets)*meterWidth - now
}

// pacer spaces calls of a capacity under one call per rateWindow, which a
// window of rateWindow cannot express: one call every cost nanoseconds, no
// burst. It is the generic cell rate algorithm with no tolerance, kept as one
// number: the earliest time of the next call.
type pacer struct {
	next atomic.Int64 // nanoseconds since the Unix epoch
}

// take admits a call at now if the previous one was at least cost before.
// When it does not, wait is how long until it would.
func (g *pacer) take(now, cost int64) (ok bool, wait int64) {
	for {
		old := g.next.Load()
		if old > now {
			return false, old - now
		}
		if g.next.CompareAndSwap(old, now+cost) {
			return true, 0
		}
	}
}
