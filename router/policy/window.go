package policy

import "sync/atomic"

// Bucket layout of a window word: the top tagBits hold the bucket's index in
// time (modulo 2^tagBits), then two counts of countBits each.
const (
	windowBuckets = 10
	// windowSlots is one more bucket than a sum covers: the meter also
	// reads the bucket that is leaving the window (see meter.take), so that
	// bucket must not be reused until the one after the current begins.
	windowSlots = windowBuckets + 1
	tagBits     = 24
	countBits   = 20
	countMax    = 1<<countBits - 1
	tagMask     = 1<<tagBits - 1
)

// window counts two numbers, a and b, over a sliding span of time, without a
// lock. It is the one rotating-bucket counter of the package: the failure
// rate, the throttle, the retry budget and the capacity meters all count
// with it.
//
// Time is cut into buckets of a width that the caller owns (a constant, or
// the table's ejection interval); callers pass a bucket's index in time,
// now / width (see bucketOf), so a window needs no setup and its zero value
// is ready. A sum covers the bucket of now and the windowBuckets-1 before it,
// so it spans between 9/10 of windowBuckets widths and all of them.
//
// The meters also read the bucket before those, the one leaving the window,
// so a window keeps windowSlots buckets: one more than a sum covers.
//
// Each bucket is one atomic word holding its tag (its index, modulo 2^24)
// and two counts that stay within [0, 2^20-1] (they saturate rather than
// wrap into each other or into the tag). A bucket whose tag is not the one
// being read is stale and counts as zero; adding to it starts it afresh.
// Tags repeat every 2^24 buckets (19 days at the finest width the package
// uses, 100 ms): a bucket written exactly that long ago and never since could
// be read once as current. Times are nanoseconds since the Unix epoch and
// are not negative.
type window struct {
	b [windowSlots]atomic.Uint64
}

// bucketOf is the index in time of the bucket of width nanoseconds that holds
// now.
func bucketOf(now, width int64) uint64 { return uint64(now) / uint64(width) }

// add adds da and db to bucket idx.
func (w *window) add(idx uint64, da, db int64) { w.update(idx, da, db, true, false) }

// addCall adds da to bucket idx's a and records a call at moment st of the
// bucket in its b, as the meters keep it (see callsOf).
func (w *window) addCall(idx uint64, da, st int64) { w.update(idx, da, st, true, true) }

// addPast adds da and db to bucket idx if the window that ends at bucket cur
// still holds it (the leaving bucket included) and it has not been reused
// since: a correction of what was counted then. A correction of a bucket that
// has left the window is dropped.
func (w *window) addPast(idx, cur uint64, da, db int64) {
	if idx > cur || cur-idx >= windowSlots {
		return
	}
	w.update(idx, da, db, false, false)
}

// update adds da and db to the counts of bucket idx, within [0, countMax], or
// with call, adds da and records in b a call at moment db of the bucket. A
// stale bucket is started afresh when fresh is set and left alone otherwise.
func (w *window) update(idx uint64, da, db int64, fresh, call bool) {
	tag := idx & tagMask
	slot := &w.b[idx%windowSlots]
	for {
		old := slot.Load()
		var a, b int64
		if old>>(2*countBits) == tag {
			a, b = int64(old>>countBits&countMax), int64(old&countMax)
		} else if !fresh {
			return
		}
		if call {
			b = withCall(b, old>>(2*countBits) == tag, db)
		} else {
			b += db
		}
		a, b = min(max(a+da, 0), countMax), min(max(b, 0), countMax)
		v := tag<<(2*countBits) | uint64(a)<<countBits | uint64(b)
		if v == old || slot.CompareAndSwap(old, v) {
			return
		}
	}
}

// sum returns the totals of a and b over the window that ends at bucket idx.
func (w *window) sum(idx uint64) (a, b int64) {
	var v [windowSlots]uint64
	w.load(idx, windowBuckets, &v)
	for _, x := range v[:windowBuckets] {
		a, b = a+int64(x>>countBits&countMax), b+int64(x&countMax)
	}
	return a, b
}

// sumSince returns the totals of a and b over the window that ends at
// bucket idx, of its buckets from bucket from on.
func (w *window) sumSince(idx, from uint64) (a, b int64) {
	if from > idx {
		return 0, 0
	}
	var v [windowSlots]uint64
	w.load(idx, min(idx-from+1, windowBuckets), &v)
	for _, x := range v[:windowBuckets] {
		a, b = a+int64(x>>countBits&countMax), b+int64(x&countMax)
	}
	return a, b
}

// load reads the n buckets (at most windowSlots) that end at bucket idx into
// v, v[k] holding bucket idx-k: each bucket once, one atomic load each, its
// tag cleared and a stale bucket (or one before bucket 0) as zero.
func (w *window) load(idx, n uint64, v *[windowSlots]uint64) {
	// Walk the slots down from idx's, wrapping, rather than taking
	// (idx-k) % windowSlots for every k.
	i := idx % windowSlots
	for k := range n {
		if k > idx {
			return
		}
		x := w.b[i].Load()
		if x>>(2*countBits) == (idx-k)&tagMask {
			v[k] = x & (1<<(2*countBits) - 1)
		}
		if i == 0 {
			i = windowSlots
		}
		i--
	}
}

// reset forgets every count.
func (w *window) reset() {
	for i := range w.b {
		w.b[i].Store(0)
	}
}
