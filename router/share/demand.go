package share

import (
	"sync/atomic"
	"time"

	"github.com/regionwarden/regionwarden/router/table"
)

// DemandWindow is the span over which a router's demand is counted in a
// pool whose regions all count over a second: long enough that a few calls
// a second give a steady number (Poisson noise of a rate r over w seconds is
// sqrt(r×w)/(r×w): 12% at 7 calls a second), short enough that the share
// follows a client moving to another router within seconds.
const DemandWindow = 10 * time.Second

// DemandWindowFor is the span over which a pool's demand is counted:
// DemandWindow, or the longest window one of its PTs is counted over
// (table.Provisioned.WindowFor: 40 s for an order of up to 3 GSUs), when
// longer. A larger share reaches such a PT only once it has been the target
// for that window (growDelays), while a smaller one applies at once, so a
// move of the demand that comes back within the window costs the PT, each
// time, the part the shrinking routers gave up, for the whole window, and
// brings no router more. Counted over the window, the shares follow the
// moves that last as long as a change takes to apply. (With a store, the
// request quotas are metered in it, not by shares: the share is what the
// routers take of the PTs' tokens, of token quotas and of in-flight
// limits.)
func DemandWindowFor(pool *table.Pool) time.Duration {
	w := DemandWindow
	for _, r := range pool.Regions {
		w = max(w, ptWindow(pool, r))
	}
	return w
}

// ptWindow is the window over which the router meters region r of pool
// when it is a PT (table.Provisioned.WindowFor), 0 when it is not.
func ptWindow(pool *table.Pool, r table.Region) time.Duration {
	if r.Tier != table.TierProvisioned {
		return 0
	}
	return pool.Policy.Provisioned.WindowFor(r.Capacity.GSUs)
}

// Bucket layout of a demand word: the top demandTagBits hold the bucket's
// index in time (modulo 2^24), the rest its count.
const (
	demandBuckets   = 10
	demandTagBits   = 24
	demandCountBits = 64 - demandTagBits
	demandTagMask   = 1<<demandTagBits - 1
	demandCountMask = 1<<demandCountBits - 1
)

// Demand counts the calls a pool receives on one router, admitted and
// refused alike (what its clients ask for, not what it could serve), over a
// sliding window (NewDemand). Add is one atomic add on the hot path, no lock
// and no allocation. The zero value counts over DemandWindow.
type Demand struct {
	b [demandBuckets]atomic.Uint64
	// first is when the first call was counted (nanoseconds since the Unix
	// epoch), 0 before: the window covers no time before it (Rate).
	first atomic.Int64
	// width is a bucket's span in nanoseconds; 0: DemandWindow's tenth.
	width int64
}

// NewDemand returns a Demand that counts over window (at least ten
// nanoseconds; DemandWindow when shorter).
func NewDemand(window time.Duration) *Demand {
	if window < demandBuckets {
		window = DemandWindow
	}
	return &Demand{width: int64(window) / demandBuckets}
}

// bucket is a bucket's span in nanoseconds.
func (d *Demand) bucket() int64 {
	if d.width > 0 {
		return d.width
	}
	return int64(DemandWindow) / demandBuckets
}

// Window is the span d counts over.
func (d *Demand) Window() time.Duration { return time.Duration(d.bucket() * demandBuckets) }

// Add counts one call at now (nanoseconds since the Unix epoch).
func (d *Demand) Add(now int64) {
	if d.first.Load() == 0 {
		d.first.CompareAndSwap(0, now)
	}
	idx := uint64(now) / uint64(d.bucket())
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
	rate, _ := d.Sample(now)
	return rate
}

// Sample is Rate and the calls it counts: how much evidence the rate rests
// on (Allocate weighs a move of the shares against it).
func (d *Demand) Sample(now int64) (rate float64, calls uint64) {
	width := d.bucket()
	idx := uint64(now) / uint64(width)
	var n uint64
	for k := uint64(0); k < demandBuckets && k <= idx; k++ {
		i := idx - k
		if v := d.b[i%demandBuckets].Load(); v>>demandCountBits == i&demandTagMask {
			n += v & demandCountMask
		}
	}
	span := (demandBuckets-1)*width + now%width
	if first := d.first.Load(); first != 0 {
		span = min(span, max(now-first, width))
	}
	return float64(n) / time.Duration(span).Seconds(), n
}
