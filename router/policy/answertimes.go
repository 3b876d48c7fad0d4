package policy

import (
	"slices"
	"sync/atomic"
)

// answerSamples is how many places answerTimes keeps for a region's latest
// successes: more than minRequests at its default (20), the evidence the
// rule that reads them asks for; answerBits picks one.
const (
	answerBits    = 5
	answerSamples = 1 << answerBits
)

// answerTimes keeps how long a region's latest successes took, each from its
// pick to its end: answerSamples places, each success taking one at random
// (a hash of when it ended and how long it took), so a success is kept for
// answerSamples later ones on average and the places hold a sample of the
// latest. Its zero value is ready.
//
// A place is taken with one store: a counter that named the next place in
// turn was one more atomic add on a word every success of the region
// shares, and cost the parallel pick-and-answer benchmark (PickDone) a
// tenth of its time on two cores.
type answerTimes struct {
	t [answerSamples]atomic.Int64
}

// add keeps a success that took lat ns and ended at now.
func (a *answerTimes) add(now, lat int64) {
	// Both mixed (rng's finalizer): the low bits of a clock's nanoseconds
	// may move in steps, and calls may end at one tick.
	h := splitMix(uint64(now) ^ splitMix(uint64(lat)))
	a.t[h>>(64-answerBits)].Store(max(lat, 1))
}

// median returns the middle of the successes kept (the slower of the two
// middle ones of an even count), 0 when none is.
func (a *answerTimes) median() int64 {
	var buf [answerSamples]int64
	kept := buf[:0]
	for i := range a.t {
		if v := a.t[i].Load(); v > 0 {
			kept = append(kept, v)
		}
	}
	if len(kept) == 0 {
		return 0
	}
	slices.Sort(kept)
	return kept[len(kept)/2]
}
