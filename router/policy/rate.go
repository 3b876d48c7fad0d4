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
// # The window is one whole window long
//
// The ten buckets that end at now span between 9/10 and all of a window: a
// meter that summed only them would forget a call up to one bucket before a
// window has passed since it, and a region that counts its quota over a full
// window, on its own clock, would see up to 10/9 of the capacity: at a
// saturated quota, a steady stream of 429s. So the meter also reads the
// bucket that is leaving the window (the eleventh back) and counts what of
// it the last window may still hold. Each bucket keeps, beside its cost, how
// many calls it admitted in each quarter of its width (withCall); a quarter's
// calls count until one window after the quarter's end, and the cost left
// is the bucket's cost in proportion to the calls left. No call is let go
// before one window has passed since it was admitted (its quarter ends after
// it), so no span of one window, on any clock, admits more than the capacity,
// but for calls that raced (below) and calls of unequal cost in one bucket
// (tokens), whose cost is spread over its calls. A call is held at most a
// quarter of a bucket (a fortieth of the window) too long: paced calls are
// admitted up to 97.5% of the capacity without a refusal.
//
// Two simpler rules fail where it matters. Counting the leaving bucket's
// cost in proportion to the time it has left (calls spread over the whole
// bucket) lets bunched calls go early, and holds a bucket's one call for
// 1.05 windows on average: a small quota, one call a bucket, loses up to a
// tenth. Counting all of it until its last call has left holds every call up
// to a bucket too long: paced calls at 37 a second on a quota of 40 are
// refused.
//
// Concurrent takes can each see room for one more call and overshoot the
// limit by the calls that raced; a call costlier than the whole window is
// admitted into an empty one. The zero value is an empty meter.
type meter struct {
	w window // a: cost admitted, in costUnits; b: the calls admitted, by quarter (withCall)
}

// A meter's bucket keeps in its b how many calls it admitted in each of
// callSlots equal parts of its width, callBits bits each, saturating.
const (
	callSlots = 4
	callBits  = 5
	callsMax  = 1<<callBits - 1
)

// requestMeter is a region's one-second meter of requests, which knows when
// it is full for a while. Within one fullTick, a quarter of its bucket, what
// it holds only grows: its buckets move on, and its leaving bucket's slots
// end, only at the start of a tick, and it takes no refunds but of requests
// the region never counted (refund), which forget that it was full. So once
// it refuses a call of some cost it refuses every call of that cost or more
// until the next tick or refund, and it keeps the tick and the cost of its
// last refusal: knownFull lets a pick leave the region out without reading
// its window again. A new table that lowers the cost (a larger quota or
// share) finds it not known full at once.
type requestMeter struct {
	m meter
	// full is fullTick+1 of the last refusal, shifted left by countBits,
	// with the cost refused in the low countBits; 0: none. A cost is at
	// most rateCapacity, within countBits; a tick since the epoch within
	// the 63-countBits bits left for millennia.
	full atomic.Int64
}

// fullTick is the part of a one-second meter's bucket (meterWidth) that now
// falls in, counted from the epoch.
func fullTick(now int64) int64 { return now / (meterWidth / callSlots) }

// A tick is a whole part of a bucket: this fails to compile if it is not.
var _ = [1]struct{}{}[meterWidth%callSlots]

// take admits a request of cost at now if the last second has room for it.
func (q *requestMeter) take(now, cost int64) bool {
	if !q.m.take(now, cost, meterWidth) {
		q.full.Store((fullTick(now)+1)<<countBits | cost)
		return false
	}
	return true
}

// refund takes back a request of cost that the meter admitted at at and
// the region never counted (region.uncount). The meter may have room now:
// what it knew of being full is dropped, so the next pick reads its window.
func (q *requestMeter) refund(at, now, cost int64) {
	q.m.refund(at, now, cost, meterWidth)
	q.full.Store(0)
}

// knownFull reports whether the meter refused a request of cost or less in
// now's tick, so that it refuses one of cost now.
func (q *requestMeter) knownFull(now, cost int64) bool {
	f := q.full.Load()
	return f>>countBits == fullTick(now)+1 && cost >= f&countMax
}

// wait is how long from now until the meter has room for a request of cost.
func (q *requestMeter) wait(now, cost int64) int64 { return q.m.wait(now, cost, meterWidth) }

// holdAtLeast makes the last second hold at least cost at now, adding the
// difference to now's bucket as a cost without a call (held until the whole
// bucket has left the window). The read and the add are not one step: a
// request admitted between them is counted on top, which holds more, never
// less.
func (q *requestMeter) holdAtLeast(now, cost int64) {
	if d := cost - q.m.sum(now, meterWidth); d > 0 {
		q.m.w.add(bucketOf(now, meterWidth), d, 0)
	}
}

// slotOf is the part of its bucket of width that now falls in.
func slotOf(now, width int64) int64 { return now % width * callSlots / width }

// withCall is a bucket's b once it records one more call in slot q: b is its
// calls so far when current is set, and none otherwise.
func withCall(b int64, current bool, q int64) int64 {
	if !current {
		b = 0
	}
	if b>>(q*callBits)&callsMax < callsMax {
		b += 1 << (q * callBits)
	}
	return b
}

// calls is how many calls b records in its slots from q on (q <= callSlots).
func calls(b, q int64) int64 {
	b >>= q * callBits
	return b&callsMax + b>>callBits&callsMax + b>>(2*callBits)&callsMax + b>>(3*callBits)&callsMax
}

// leaving is the cost that the window ending at now may still hold of
// bucket x, the one before the window's ten, which began one window before
// the current bucket: its calls in the slots that have not yet ended one
// window ago, elapsed being how far now is into the current bucket, with the
// bucket's cost spread over its calls, rounded up.
func leaving(x uint64, elapsed, width int64) int64 {
	c := int64(x >> countBits & countMax)
	if c == 0 {
		return 0
	}
	b := int64(x & countMax)
	n := calls(b, 0)
	if n == 0 {
		return c // a cost with no call recorded: hold all of it
	}
	// Slot q ended less than a window ago while elapsed < (q+1)×width/4:
	// the slots from elapsed×4/width on.
	return (c*calls(b, elapsed*callSlots/width) + n - 1) / n
}

// held is the cost that the window ending at now holds, of a window read into
// v by window.load (windowSlots buckets ending at bucket idx of width): the
// ten buckets ending at idx, and what is left of the one before (see meter).
func held(v *[windowSlots]uint64, idx uint64, now, width int64) int64 {
	var s int64
	for _, x := range v[:windowBuckets] {
		s += int64(x >> countBits & countMax)
	}
	return s + leaving(v[windowBuckets], now-int64(idx)*width, width)
}

// sum is the cost admitted in the window of buckets of width that ends at
// now.
func (m *meter) sum(now, width int64) int64 {
	idx := bucketOf(now, width)
	var v [windowSlots]uint64
	m.w.load(idx, windowSlots, &v)
	return held(&v, idx, now, width)
}

// add adds cost d >= 0 at now.
func (m *meter) add(now, d, width int64) {
	m.w.addCall(bucketOf(now, width), d, slotOf(now, width))
}

// refund takes back cost d >= 0 that was added at time at, if the window that
// ends at now still holds it: the call consumed less than it was charged. The
// bucket keeps the call in its count of calls: it does not know which call
// it was.
func (m *meter) refund(at, now, d, width int64) {
	if at < 0 {
		return
	}
	m.w.addPast(bucketOf(at, width), bucketOf(now, width), -d, 0)
}

// take admits a call of cost at now if the window of buckets of width has
// room for it, and adds its cost.
func (m *meter) take(now, cost, width int64) bool {
	idx := bucketOf(now, width)
	var v [windowSlots]uint64
	m.w.load(idx, windowSlots, &v)
	if !fits(held(&v, idx, now, width), cost) {
		return false
	}
	m.w.addCall(idx, cost, slotOf(now, width))
	return true
}

// ahead reports whether the last tenth of the window of buckets of width
// that ends at now (the span of one bucket) holds more than a tenth of the
// window's capacity (pace.go): the current bucket, and of the one before it
// the share of its width still in the span, as though its cost were spread
// evenly over it.
func (m *meter) ahead(now, width int64) bool {
	idx := bucketOf(now, width)
	var v [windowSlots]uint64
	m.w.load(idx, 2, &v)
	cur := int64(v[0] >> countBits & countMax)
	prev := int64(v[1] >> countBits & countMax)
	left := width - (now - int64(idx)*width) // of the bucket before, still in the span
	// prev < 2^20 and left <= width (at most 200 s): the product fits.
	return windowBuckets*(cur+prev*left/width) > rateCapacity
}

// wait is how long from now until enough of the window's cost expires to
// admit a call of cost, in nanoseconds; 0 if it fits now. A refusal asks it
// only when every region refused a call (for its Retry-After), so a call
// that another region admits never pays for it.
func (m *meter) wait(now, cost, width int64) int64 {
	idx := bucketOf(now, width)
	var v [windowSlots]uint64
	m.w.load(idx, windowSlots, &v)
	if fits(held(&v, idx, now, width), cost) {
		return 0
	}
	return waitFor(&v, idx, now, cost, width)
}

// fits reports whether a window holding s admits a call of cost: it does when
// the sum stays within one window of capacity, and an empty window admits
// any one call.
func fits(s, cost int64) bool { return s == 0 || s+cost <= rateCapacity }

// waitFor is how long from now until what a window read into v (ending at
// bucket idx) holds has expired enough to admit cost, if nothing more is
// added. In bucket idx+j the window holds the buckets of v from idx on that
// are still among its ten, v[0] to v[9-j], in full, and what is left of the
// one before, v[10-j] (see meter): the first moment at which what it holds
// fits is the wait. In bucket idx+windowBuckets only v[0] is left, leaving,
// so the search ends there.
func waitFor(v *[windowSlots]uint64, idx uint64, now, cost, width int64) int64 {
	var full int64
	for _, x := range v[:windowBuckets] {
		full += int64(x >> countBits & countMax)
	}
	for j := range int64(windowBuckets + 1) {
		x := v[windowBuckets-j]
		if j > 0 {
			// Bucket idx-(10-j) leaves the ten, and is now the leaving one.
			full -= int64(x >> countBits & countMax)
		}
		if !fits(full, cost) {
			continue
		}
		// It fits in this bucket once enough of the leaving one has gone:
		// at its start, or at the end of one of the leaving one's slots.
		start := (int64(idx) + j) * width
		for q := range int64(callSlots + 1) {
			elapsed := (q*width + callSlots - 1) / callSlots // slot q-1 has ended
			if t := start + elapsed; t > now && fits(full+leaving(x, elapsed, width), cost) {
				return t - now
			}
		}
		return 1 // fits now: only a race since the reading refused it
	}
	return width // not reached: the last bucket holds nothing in full
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

// untake takes back the call take admitted at at with interval, when no
// call has been admitted since: the next is due at at again. After a later
// call it does nothing, which leaves the schedule as strict as it was.
func (g *pacer) untake(at, interval int64) {
	g.next.CompareAndSwap(at+interval, at)
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
