package policy

import (
	"slices"
	"sync/atomic"
)

// answerSamples is how many of a region's latest successes answerTimes
// keeps: more than minRequests at its default (20), the evidence the rule
// that reads them asks for.
const answerSamples = 32

// answerTimes keeps how long a region's latest successes took, each from its
// pick to its end: the last answerSamples of them, in the order they ended.
// Its zero value is ready. Two successes racing for a place may leave one of
// them out: either is a time the region answered in.
type answerTimes struct {
	n atomic.Uint64
	t [answerSamples]atomic.Int64
}

// add keeps a success that took lat ns.
func (a *answerTimes) add(lat int64) {
	a.t[(a.n.Add(1)-1)%answerSamples].Store(max(lat, 1))
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
