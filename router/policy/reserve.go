package policy

import (
	"math/bits"
	"time"
)

// Calls share a capacity that cannot take every call.
//
// A meter admits calls first come, first served: when a pool's capacities
// together cannot take every call (its PT is down and the pay-as-you-go
// quotas carry part of the load), every priority loses the same share, and
// a critical call is refused as often as a sheddable one. The in-flight
// limits already shed the lowest priority first (priorityShare); capacity
// is shed the same way, by the calls that wait for it, in an order of
// classes (Class): priority first, and within a priority a retry before a
// first attempt.
//
//   - A call that every capacity it may use refused because it was full
//     waits for the first of them to have room (Call.PickWaiting), when that
//     comes soon enough, and asks again then. It waits in the order of
//     those capacities alone (a region's metered room: waitPlace), in its
//     attempt's class.
//   - While a call of a higher class waits for a capacity so, an attempt
//     takes no room in it (a region's requests or a PT's tokens: what the
//     waiting call waits for); it may still take the room of a capacity
//     nobody of a higher class waits for, and go where nothing is metered
//     (a pay-as-you-go tier with no hint, which the region's 429s alone
//     bound). Refused for that, it waits too, as a call refused by a full
//     capacity does, until the next moment a meter's room can change
//     (yieldWait), or until the claim it gave way to in a shared store
//     ends (below), and asks again: a lower class waiting so is in turn a
//     waiting call that the ones below it give way to. A call that gives
//     up after giving way to a higher priority is shed (ErrShed: a call of
//     a higher priority was let through); after giving way to a retry of
//     its own priority, it is over capacity, as it would have been had the
//     retry come first. A probe of a demoted PT is not held: it is how the
//     largest capacity a short pool has comes back, one call in each probe
//     interval.
//
// So under a shortage room goes to the highest class that waits for it, as
// from a priority queue, and a lower class gets what no higher one waits
// for. Nothing is kept idle for a class that does not need it: the rule
// holds only while a higher call waits for that capacity, and a waiting
// call wakes when the first capacity it waits for has room (its wait is
// the shortest its meters gave), so the room the lower class was refused is
// taken as soon as it frees. Nothing else frees room earlier: had another
// metered capacity had room, the higher call would have taken it rather
// than wait (unless that region's throttle or in-flight limit turned it
// away, and those turn a lower priority away at least as often). A
// capacity the waiting call may not use (one it tried, another region than
// the one it is pinned to: Call.Pin) or that refused it for another reason
// is no room for it, and nobody leaves it to the call.
//
// Why a retry before a first attempt of its priority. Both are calls of one
// priority; the order between them decides which of them a full capacity
// serves, and with it how many are served:
//
//   - The retry's call came first and has spent part of its deadline:
//     serving it first is first come, first served across calls rather than
//     across attempts, and of calls that all get the same deadline, serving
//     the oldest first loses the fewest to their deadlines (earliest
//     deadline first).
//   - The retry has fewer places to go. A spill or a fallback may use only
//     capacities its call has not tried (a last resort's, only those of
//     them that answer), and any retry prefers them, while a first attempt
//     may use any, the one whose failure made the retry among them: a PT
//     failing part of its calls serves a share of the first attempts that
//     the retry's room left out, where a first attempt that took the room
//     leaves the retry nowhere. Where the pay-as-you-go quotas carry 60% of
//     the load and a PT fails 60% of its calls, first attempts first serve
//     the quotas' 60% of the calls and 40% of the other 40% in the PT (76%);
//     retries first let the first attempts go to the PT, which serves 40%
//     of them, and the quotas serve the 60% it fails as retries: all of
//     them.
//   - Retries cannot crowd first attempts out: a retry follows an attempt
//     that failed or was refused, at most maxAttempts-1 of them a call
//     but for spills past it to capacities the call has not tried,
//     those the budget does not bound go only to capacities their calls
//     have not tried (pick), and each is of a call on which the region
//     already spent an attempt.
//
// A waiting call holds its place until it has asked again after its last
// wait, so a call of a lower class that asks between the waiting call's
// waking and its asking still gives way.
//
// Behind several routers that share a store (SharedMeter), a router holds
// its lower classes back while its own higher calls wait, and the store
// does the same across routers: a request of a higher class that a full
// quota refuses claims, in the store, the room that frees next, for as long
// as its router may take to wake it and ask again (a MeterTick and a round
// trip to the store), and a lower class's request from any router in that
// moment gives way. A router's own meters (no store, or a store that does
// not answer) see only its own calls.

// Class orders the attempts that wait for a capacity's room: by priority
// (table.Priority.Rank), and within a priority a retry before a first
// attempt. The higher class goes first. Classes run from 0 (a sheddable
// call's first attempt) to Classes-1 (a critical call's retry).
type Class uint8

// Classes is how many there are.
const Classes = 2 * priorities

// ClassOf is the class of an attempt of priority pr, a retry or a first.
func ClassOf(pr Priority, retry bool) Class {
	c := Class(2 * pr.Rank())
	if retry {
		c++
	}
	return c
}

// Rank is the rank of the class's priority (table.Priority.Rank).
func (c Class) Rank() int { return int(c / 2) }

// outranked reports whether an attempt of class c leaves the region's
// metered room to a waiting call of a higher class: one waits for it. It
// returns that class (the highest that waits).
func (r *region) outranked(c Class) (Class, bool) {
	for k := Classes - 1; k > int(c); k-- {
		if r.waiting[k].Load() > 0 {
			return Class(k), true
		}
	}
	return 0, false
}

// waitPlace is the place a waiting call holds in the order of the regions
// whose room it waits for: slots (bit i: slot i of st) in class c. The zero
// value holds none.
type waitPlace struct {
	st    *poolState
	slots uint32
	c     Class
}

// move moves the place to to: it takes the new place before it gives the
// old one back, so that the call is never out of the order while it waits.
func (w *waitPlace) move(to waitPlace) {
	old := *w
	*w = to
	w.add(1)
	old.add(-1)
}

// release gives the place back.
func (w *waitPlace) release() {
	w.add(-1)
	*w = waitPlace{}
}

// add counts the call, d = 1, or stops counting it, d = -1, in the regions
// of the place.
func (w *waitPlace) add(d int32) {
	if w.st == nil {
		return
	}
	for m := w.slots; m != 0; m &= m - 1 {
		w.st.slots[bits.TrailingZeros32(m)].r.waiting[w.c].Add(d)
	}
}

// yieldWait is how long a call that gave way to a waiting call of a higher
// class waits before it asks again at now: until the next tick of a
// one-second meter (a quarter of a bucket, 25 ms), when the room of the
// router's own meters can next change (requestMeter). A shared quota can
// free room between ticks; the call asks again at the tick all the same.
func yieldWait(now int64) int64 {
	tick := int64(MeterTick)
	return (fullTick(now)+1)*tick - now
}

// MeterTick is the step in which the room of a one-second meter changes (a
// quarter of a bucket): a call that gave way asks again at the next one,
// and a shared meter holds the room a waiting call of a higher class
// claimed for one more (and a round trip), the time its router takes to
// wake it and ask again (SharedMeter).
const MeterTick = time.Duration(meterWidth / callSlots)
