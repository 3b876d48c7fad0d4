package policy

import "time"

// Client-side adaptive throttling, from the SRE book (chapter 21, "Handling
// Overload"): a region that answers 429 is sent only part of the calls that
// would go to it, the rest going to other regions at no cost to the region.
const (
	// throttleWindow is how far back the throttle looks: a region that
	// recovers is fully back within about this long once its first calls
	// succeed again.
	throttleWindow = 10 * time.Second
	// throttleK is the SRE book's K: a region is sent up to K times as many
	// calls as it accepts before the throttle bites.
	throttleK = 2
)

// throttleP is the probability that the throttle turns a call away from the
// region at now:
//
//	p = max(0, (requests − K × accepts) / (requests + 1))
//
// over the last throttleWindow, where requests are attempts the region
// answered, accepts those it did not answer with 429, and K is 2. The book
// counts as requests also the calls the throttle itself turned away; here they
// went to another region instead, and counting them would keep p near 1 for
// most of a minute after the region recovers (each rejection raising p). With
// only answered attempts counted, a dead region still gets a trickle of about
// sqrt(window × demand) probes per window, and p falls to 0 within seconds of
// its first successes.
//
// It is 0, without reading the counters, when the region has not answered 429
// within the window.
func (r *region) throttleP(now int64) float64 {
	if now-r.lastCapacity.Load() > int64(throttleWindow) {
		return 0
	}
	req, acc := r.thr.sum(now)
	p := (float64(req) - throttleK*float64(acc)) / (float64(req) + 1)
	return max(p, 0)
}
