package policy

import (
	"sync/atomic"
	"time"
)

// Bucket layout of a window word: the top tagBits hold the bucket's index in
// time (modulo 2^tagBits), then two counts of countBits each.
const (
	windowBuckets = 10
	tagBits       = 24
	countBits     = 20
	countMax      = 1<<countBits - 1
	tagMask       = 1<<tagBits - 1
)

// window counts two numbers, a and b, over a sliding span of time, without a
// lock. The span is split into windowBuckets buckets that rotate as time
// moves; a sum covers the current bucket and the windowBuckets-1 before it, so
// it spans between 9/10 of the span and the whole span.
//
// Each bucket is one atomic word holding its tag (its index in time, modulo
// 2^24) and two counts that saturate at 2^20-1 per bucket. A bucket whose tag
// is not the one being read is stale and counts as zero; writing to it starts
// it afresh. Tags repeat every 2^24 bucket widths (19 days at the finest width
// the package uses, 100 ms): a bucket written exactly that long ago and never
// since could be read once as current. Times are nanoseconds since the Unix
// epoch and are not negative.
type window struct {
	width int64 // nanoseconds per bucket, at least 1
	b     [windowBuckets]atomic.Uint64
}

// newWindow returns an empty window over span.
func newWindow(span time.Duration) *window {
	w := &window{}
	w.init(span)
	return w
}

// init sets the window's span; it must be called before the window is shared.
func (w *window) init(span time.Duration) {
	w.width = bucketWidth(span)
}

// bucketWidth is the width of one bucket of a window over span, in nanoseconds.
func bucketWidth(span time.Duration) int64 {
	return max(int64(span)/windowBuckets, 1)
}

// add adds da and db to the bucket that holds now.
func (w *window) add(now int64, da, db uint64) {
	idx := uint64(now) / uint64(w.width)
	tag := idx & tagMask
	slot := &w.b[idx%windowBuckets]
	for {
		old := slot.Load()
		var a, b uint64
		if old>>(2*countBits) == tag {
			a, b = (old>>countBits)&countMax, old&countMax
		}
		a, b = min(a+da, countMax), min(b+db, countMax)
		v := tag<<(2*countBits) | a<<countBits | b
		if v == old || slot.CompareAndSwap(old, v) {
			return
		}
	}
}

// sum returns the totals of a and b over the window that ends at now.
func (w *window) sum(now int64) (a, b uint64) {
	idx := uint64(now) / uint64(w.width)
	for k := uint64(0); k < windowBuckets && k <= idx; k++ {
		i := idx - k
		v := w.b[i%windowBuckets].Load()
		if v>>(2*countBits) == i&tagMask {
			a += (v >> countBits) & countMax
			b += v & countMax
		}
	}
	return a, b
}

// reset forgets every count.
func (w *window) reset() {
	for i := range w.b {
		w.b[i].Store(0)
	}
}
