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
	// askedAt is, on the PT lane, when the last call that asked a full PT
	// again (ptOpen's turn) was picked; refusedIn is how long Google's
	// recent PT-full refusals took to come back, from the call's pick to
	// its report (see markFull).
	askedAt   atomic.Int64
	refusedIn atomic.Int64
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

// refusedGrace is how many times the slowest recent PT-full refusal the
// call that asks a full PT again must go unrefused before the PT counts as
// open (ptOpen). Google refuses a call over the PT's quota when it admits
// it, before the model runs: a refusal takes a round trip and the
// admission, a served call that plus the model's time. A call not refused
// in twice the time the slowest recent refusal took was let in (the margin
// absorbs a round trip's jitter and the router's own scheduling), and so
// the PT had room for it: later calls may ask it at once, without waiting
// for that call's answer, which may be a whole generation away (seconds,
// and minutes for a long stream). Were the PT still full after all, the
// next call's quick refusal marks it full again, at the cost of the calls
// picked in between, each spilled at once outside the retry budget.
const refusedGrace = 2

// markFull records that Google said the PT is full at now, refusing a call
// picked at pickedAt. The refusal's time feeds refusedIn: it takes a slower
// one at once and moves an eighth of the way toward a faster one, so it
// stays near the slowest refusal of late.
func (l *lane) markFull(now, pickedAt int64) {
	l.setFull(now)
	took := max(now-pickedAt, 0)
	for {
		old := l.refusedIn.Load()
		nv := took
		if took < old {
			nv = old - (old-took)/8
		}
		if nv == old || l.refusedIn.CompareAndSwap(old, nv) {
			return
		}
	}
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

// markSpilled records that a call picked at pickedAt on a PT called in
// spillover was served by pay-as-you-go (Report.OnDemand) while the PT
// counts as full: Google had no room for it in the PT, which is as good as
// a refusal for the PT's state (but says nothing of how long a refusal
// takes).
func (l *lane) markSpilled(now, pickedAt int64) {
	if l.fullUntil.Load() != 0 && pickedAt > l.fullAt.Load() {
		l.setFull(now)
	}
}

// setFull records that the PT was found full at now: no call asks it for
// ptFullFor.
func (l *lane) setFull(now int64) {
	l.fullAt.Store(now)
	l.fullUntil.Store(now + int64(ptFullFor))
}

// reopen forgets that the PT was full (the region no longer has one).
func (l *lane) reopen() {
	l.fullAt.Store(0)
	l.fullUntil.Store(0)
	l.askedAt.Store(0)
}

// ptOpen reports whether a call may ask the PT at now: it may while the PT
// is not known to be full; once ptFullFor has passed since Google said it is
// full, one call in each ptFullFor may (the first to take the turn: asked
// is true for it), and the PT counts as full until that call's answer
// says otherwise, or until it has gone unrefused for refusedGrace times the
// slowest recent refusal (the PT let it in: it has room), whichever comes
// first. When the call may not, wait is how long until one may.
func (l *lane) ptOpen(now int64) (ok, asked bool, wait int64) {
	for {
		until := l.fullUntil.Load()
		switch {
		case until == 0:
			return true, false, 0
		case until > now:
			at := l.askedAt.Load()
			if at == 0 || at <= l.fullAt.Load() {
				// No call asked since the last refusal.
				return false, false, until - now
			}
			open := at + refusedGrace*l.refusedIn.Load()
			if open >= now {
				return false, false, min(until, open+1) - now
			}
			if l.fullUntil.CompareAndSwap(until, 0) {
				return true, false, 0
			}
		case l.fullUntil.CompareAndSwap(until, now+int64(ptFullFor)):
			l.askedAt.Store(now)
			return true, true, 0
		}
	}
}

// unask takes back the turn that ptOpen gave a call picked at now, when the
// call was refused before it was sent: no call asked the PT, and its
// silence would say nothing.
func (l *lane) unask(now int64) { l.askedAt.CompareAndSwap(now, 0) }

// full reports whether the PT counts as full at now, for snapshots.
func (l *lane) full(now int64) bool { return l.fullUntil.Load() > now }

// reset forgets the lane's throttle.
func (l *lane) reset() {
	l.thr.reset()
	l.lastRejected.Store(0)
}
