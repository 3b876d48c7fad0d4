package share

import (
	"sync/atomic"
	"time"
)

// DemandWindow is the span over which a router's demand is counted: long
// enough that a few calls a second give a steady number (Poisson noise of a
// rate r over w seconds is sqrt(r×w)/(r×w): 12% at 7 calls a second), short
// enough that the share follows a client moving to another router within
// seconds.
const DemandWindow = 10 * time.Second

// Bucket layout of a demand word: the top demandTagBits hold the bucket's
// index in time (modulo 2^24), the rest its count.
const (
	demandBuckets   = 10
	demandWidth     = int64(DemandWindow) / demandBuckets
	demandTagBits   = 24
	demandCountBits = 64 - demandTagBits
	demandTagMask   = 1<<demandTagBits - 1
	demandCountMask = 1<<demandCountBits - 1
)

// Demand counts the calls a pool receives on one router, admitted and
// refused alike (what its clients ask for, not what it could serve), over a
// sliding DemandWindow. Add is one atomic add on the hot path, no lock and no
// allocation. The zero value is ready to use.
type Demand struct {
	b [demandBuckets]atomic.Uint64
	// first is when the first call was counted (nanoseconds since the Unix
	// epoch), 0 before: the window covers no time before it (Rate).
	first atomic.Int64
}

// Add counts one call at now (nanoseconds since the Unix epoch).
func (d *Demand) Add(now int64) {
	if d.first.Load() == 0 {
		d.first.CompareAndSwap(0, now)
	}
	idx := uint64(now) / uint64(demandWidth)
	tag := idx & demandTagMask
	slot := &d.b[idx%demandBuckets]
	for {
		old := slot.Load()
		if old>>demandCountBits == tag {
			// Same bucket: one add, unless the count would overflow.
			if old&demandCountMask == demandCountMask || slot.CompareAndSwap(old, old+1) {
				return
			}
			continue
		}
		if slot.CompareAndSwap(old, tag<<demandCountBits|1) {
			return
		}
	}
}

// Rate is the calls per second of the window that ends at now: the calls of
// the current bucket and the nine before it, over the time they cover.
//
// A window younger than DemandWindow (a router or a pool that just started)
// covers only the time since its first call, and at least one bucket: over
// the whole window, a router started a second ago would count a tenth of its
// demand, and so take a tenth of its share, while one that has run longer,
// sampled at the same moment, counts all of its own. Routers that sample at
// different moments then still agree on each other's rates, as the shares
// computed from them must.
func (d *Demand) Rate(now int64) float64 {
	idx := uint64(now) / uint64(demandWidth)
	var n uint64
	for k := uint64(0); k < demandBuckets && k <= idx; k++ {
		i := idx - k
		if v := d.b[i%demandBuckets].Load(); v>>demandCountBits == i&demandTagMask {
			n += v & demandCountMask
		}
	}
	span := (demandBuckets-1)*demandWidth + now%demandWidth
	if first := d.first.Load(); first != 0 {
		span = min(span, max(now-first, demandWidth))
	}
	return float64(n) / time.Duration(span).Seconds()
}
