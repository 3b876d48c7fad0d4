package emulator

import "time"

// windowBuckets is how many buckets a capacity window is cut into: the window
// slides in steps of window/windowBuckets.
const windowBuckets = 10

// quota enforces a Capacity over a sliding window of scenario time: a call is
// admitted when the requests and tokens admitted in the last window, plus
// this call, stay within rate x window for each limited dimension.
// A quota with no limit at all admits nothing: it stands for capacity that
// was not bought. Not safe for concurrent use; the region holds its lock.
type quota struct {
	limitReqs, limitToks float64 // per window; zero = that dimension is not limited
	none                 bool    // no capacity at all
	width                time.Duration
	ids                  [windowBuckets]int64
	reqs                 [windowBuckets]float64
	toks                 [windowBuckets]float64
}

func newQuota(c Capacity, window time.Duration) *quota {
	w := window.Seconds()
	return &quota{
		limitReqs: c.RequestsPerSecond * w,
		limitToks: c.TokensPerSecond * w,
		none:      c.IsZero(),
		width:     window / windowBuckets,
	}
}

// admit takes one call of tokens at scenario time now if it fits, and reports
// whether it did.
func (q *quota) admit(now time.Duration, tokens int) bool {
	if q.none {
		return false
	}
	id := int64(now / q.width)
	var reqs, toks float64
	for i := range windowBuckets {
		if id-q.ids[i] < windowBuckets {
			reqs += q.reqs[i]
			toks += q.toks[i]
		}
	}
	if q.limitReqs > 0 && reqs+1 > q.limitReqs {
		return false
	}
	if q.limitToks > 0 && toks+float64(tokens) > q.limitToks {
		return false
	}
	slot := id % windowBuckets
	if q.ids[slot] != id {
		q.ids[slot], q.reqs[slot], q.toks[slot] = id, 0, 0
	}
	q.reqs[slot]++
	q.toks[slot] += float64(tokens)
	return true
}

// give takes back one call of tokens that admit took at scenario time now:
// the call was refused after all (a 429), and a refused call uses none of
// the capacity. A bucket that has slid on since holds nothing of it.
func (q *quota) give(now time.Duration, tokens int) {
	id := int64(now / q.width)
	if slot := id % windowBuckets; q.ids[slot] == id {
		q.reqs[slot] = max(q.reqs[slot]-1, 0)
		q.toks[slot] = max(q.toks[slot]-float64(tokens), 0)
	}
}
