package policy

import "time"

// Priorities share a capacity that cannot take every call.
//
// A meter admits calls first come, first served: when a pool's capacities
// together cannot take every call (its PT is down and the pay-as-you-go
// quotas carry part of the load), every priority loses the same share, and
// a critical call is refused as often as a sheddable one. The in-flight
// limits already shed the lowest priority first (priorityShare); capacity
// is shed the same way, by the calls that wait for it:
//
//   - A call that every capacity it may use refused because it was full
//     waits for the first of them to have room (Call.PickWaiting), when that
//     comes soon enough, and asks again then.
//   - While a call of a higher priority waits so, a call takes no room in a
//     metered capacity (a region's requests or a PT's tokens: what the
//     waiting call waits for); it may still go where nothing is metered (a
//     pay-as-you-go tier with no hint, which the region's 429s alone
//     bound). Refused for that, it waits too, as a call refused by a full
//     capacity does, until the next moment a meter's room can change
//     (yieldWait), or until the claim it gave way to in a shared store
//     ends (below), and asks again: a lower priority waiting so is in
//     turn a waiting call that the ones below it give way to. A call that
//     gives up is shed (ErrShed): a call of a higher priority was let
//     through. A probe of a demoted PT is not held: it is how the largest
//     capacity a short pool has comes back, one call in each probe
//     interval.
//
// So under a shortage room goes to the highest priority that waits for it,
// as from a priority queue, and a lower priority gets what no higher one
// waits for. Nothing is kept idle for a priority that does not need it: the
// rule holds only while a higher call waits, and a waiting call wakes when
// the first capacity it may use has room (its wait is the shortest its
// meters gave), so the room the lower priority was refused is taken as soon
// as it frees. Nothing else frees room earlier: had another metered
// capacity had room, the higher call would have taken it rather than wait
// (unless that region's throttle or in-flight limit turned it away, and
// those turn a lower priority away at least as often). A pool of one
// priority never has a higher one waiting.
//
// A waiting call holds its place until it has asked again after its last
// wait, so a call of a lower priority that asks between the waiting call's
// waking and its asking still gives way. A call pinned to one region (a
// cached content: Call.Pin) waits for that region alone, and nobody gives
// way to it: it would hold every other region's room from the lower
// priorities for nothing.
//
// Behind several routers that share a store (SharedMeter), a router holds
// its lower priorities back while its own higher calls wait, and the store
// does the same across routers: a request of a higher priority that a full
// quota refuses claims, in the store, the room that frees next, for as long
// as its router may take to wake it and ask again (a MeterTick and a round
// trip to the store), and a lower priority's request from any router in
// that moment gives way. A router's own meters
// (no store, or a store that does not answer) see only its own calls.

// yields reports whether a call of priority pr leaves metered capacities to
// a waiting call of a higher priority: one does wait for headroom.
func (p *Pool) yields(pr Priority) bool {
	for r := pr.Rank() + 1; r < priorities; r++ {
		if p.waitingBy[r].Load() > 0 {
			return true
		}
	}
	return false
}

// yieldWait is how long a call that gave way to a waiting call of a higher
// priority waits before it asks again at now: until the next tick of a
// one-second meter (a quarter of a bucket, 25 ms), when the room of the
// router's own meters can next change (requestMeter). A shared quota can
// free room between ticks; the call asks again at the tick all the same.
func yieldWait(now int64) int64 {
	tick := int64(MeterTick)
	return (fullTick(now)+1)*tick - now
}

// MeterTick is the step in which the room of a one-second meter changes (a
// quarter of a bucket): a call that gave way asks again at the next one,
// and a shared meter holds the room a waiting call of a higher priority
// claimed for one more (and a round trip), the time its router takes to
// wake it and ask again (SharedMeter).
const MeterTick = time.Duration(meterWidth / callSlots)
