package policy

import (
	"sync/atomic"
	"time"

	"github.com/regionwarden/regionwarden/router/table"
)

// Lanes: the capacities of one region that an attempt can ask for. A
// provisioned region has its Provisioned Throughput; any region has the
// pay-as-you-go tiers the table lists for it (table.Region.PayGoTiers). Each
// is its own capacity at Google, with its own quota: a 429 from one says
// nothing of the others. So each lane has its own throttle, and the PT lane
// knows when the PT is full; what is the region's own (its failure rate,
// ejection, demotion and in-flight limit) stays the region's, whatever lane
// a call used.
const (
	laneProvisioned = iota // the region's Provisioned Throughput
	laneStandard           // standard pay-as-you-go
	lanePriority           // Priority PayGo
	laneFlex               // Flex PayGo
	laneCount
)

// laneOf is the lane of pay-as-you-go tier t.
func laneOf(t table.PayGoTier) uint8 { return uint8(laneStandard + t.Index()) }

// payGoOf is the pay-as-you-go tier of a lane; "" for the PT lane.
func payGoOf(l uint8) table.PayGoTier {
	if l == laneProvisioned || l >= laneCount {
		return ""
	}
	return table.PayGoTiers[l-laneStandard]
}

// laneNames are the lanes as snapshots and metrics name them.
var laneNames = [laneCount]string{"provisioned", "standard", "priority", "flex"}

// lane is the live state of one capacity of a region.
type lane struct {
	thr          window       // a: answered, b: accepted (success); over throttleWindow
	lastRejected atomic.Int64 // when the lane last answered 429 or failed
	// fullUntil is, on the PT lane, whether the PT is full: 0 while it is
	// not known to be; after Google said it is (ProvisionedFull), the time
	// until which no call asks for it, and from then on the time at which
	// one call may ask again (see ptOpen).
	fullUntil atomic.Int64
	// fullAt is, on the PT lane, when Google last said the PT is full.
	fullAt atomic.Int64
}

// ptFullFor is how long the router keeps calls off a PT that Google said is
// full, before one call asks it again. Google enforces a PT's quota over a
// window of seconds to minutes that depends on the order's size and the
// model ("Use Provisioned Throughput": quota enforcement period), and the
// router cannot see its count. So it waits the shortest such span it meters
// itself (rateWindow) and lets a single call find out: while the PT stays
// full that costs one attempt a second, which Google refuses at once and the
// router spills elsewhere; once the PT frees, it is used again within a
// second. A full PT is never the region's fault: it is not throttled,
// demoted or shrunk for it.
const ptFullFor = time.Second

// markFull records that Google said the PT is full at now.
func (l *lane) markFull(now int64) {
	l.fullAt.Store(now)
	l.fullUntil.Store(now + int64(ptFullFor))
}

// markOpen records that the PT served a call picked at pickedAt: it is not
// full, unless Google said it is full since that call was picked. Outcomes
// arrive out of order (a stream reports when it ends, long after it was
// admitted), and a PT that had room for a call admitted before it filled
// says nothing of now: only a call picked after the last "full" reopens it.
//
// A PT not known to be full is left alone: every success of a PT reports
// here, and an atomic store costs as much as an atomic add. Skipping it
// leaves the state a store of 0 would; with a "full" racing in, the outcome
// is that of this call reporting just before it, which a store could not
// promise either.
func (l *lane) markOpen(pickedAt int64) {
	if l.fullUntil.Load() != 0 && pickedAt > l.fullAt.Load() {
		l.fullUntil.Store(0)
	}
}

// reopen forgets that the PT was full (the region no longer has one).
func (l *lane) reopen() {
	l.fullAt.Store(0)
	l.fullUntil.Store(0)
}

// ptOpen reports whether a call may ask the PT at now: it may while the PT
// is not known to be full; once ptFullFor has passed since Google said it is
// full, one call in each ptFullFor may (the first to take the turn), and
// until its answer says otherwise the PT still counts as full. When the call
// may not, wait is how long until one may.
func (l *lane) ptOpen(now int64) (ok bool, wait int64) {
	for {
		until := l.fullUntil.Load()
		switch {
		case until == 0:
			return true, 0
		case until > now:
			return false, until - now
		case l.fullUntil.CompareAndSwap(until, now+int64(ptFullFor)):
			return true, 0
		}
	}
}

// full reports whether the PT counts as full at now, for snapshots.
func (l *lane) full(now int64) bool { return l.fullUntil.Load() > now }

// reset forgets the lane's throttle.
func (l *lane) reset() {
	l.thr.reset()
	l.lastRejected.Store(0)
}
