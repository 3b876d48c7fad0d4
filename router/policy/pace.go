package policy

// A PT's pace: once a PT's window has filled, and while the pay-as-you-go
// quotas have room, it takes no more than its rate over each tenth of its
// window.
//
// Google meters a PT over a sliding window W (its size's: 40 s for an
// order of up to 3 GSUs), capacity C × W in any window of that length, so
// a PT may take a burst above its rate: what a small order is bought for.
// Under a load above its rate, though, a PT taken greedily fills its window
// in a burst and then stays full until the burst ages out, a whole window
// later; it then refills at the rate the burst came in, and fills again.
// So it takes every call for a while and none for a while after, in turns
// of about W. The pay-as-you-go quotas are metered per second: the room
// they had while the PT took everything is lost, and while it takes
// nothing they are sent more than they take. In a replay with no fault at
// all (a 3-GSU dedicated PT of 5.9 calls/s and three quotas of 3.5/s, 11.4
// calls/s sent: capacity for 144% of the load), a greedy PT took every
// call for 20 s and none for the next 20 s, in turns, and a tenth of the
// calls were shed.
//
// So once a PT's window has filled (the router's meter refused a call, or
// Google answered that the PT is full), for a window after, a PT that took
// more than a tenth of its window's capacity over the last tenth of its
// window (the span of one of its meter's buckets, the finest span the
// meter tells apart) ranks after the call's pay-as-you-go tiers and the
// PTs' overflows (rankAhead): they take what they have room for first, and
// the PT takes the rest from the room left in its window. The pace lasts a
// window from the last time the window filled. That rule is right by
// construction:
//
//   - A window that filled shows a load the window does not absorb. Held
//     to its pace, the PT takes at most C × W/10 in any tenth of its window
//     (and one call) while the quotas have room, so at most C × W in any
//     window: it serves its rate, evenly, for as long as the load lasts,
//     and its window does not fill again from a burst it could have
//     spread (in the replay above, two minutes of it: 89.7% of the calls
//     served before, 94.9% after, the first window's burst and wait
//     included).
//   - A load above the rate keeps the pace on: a paced PT still fills its
//     window now and then (the window's measure errs toward full, below),
//     and when the pace lapses it takes the little room left at once and
//     fills it. A load under the rate fills the window only on its own
//     fluctuations over a whole window, and the pace lapses a window
//     later. Renewed instead by each call it passed over, the pace held a
//     PT under a load at 90% of its rate for good, passed over on each
//     fluctuation above its rate over a tenth of its window, and a 12-GSU
//     order (5 s) sent 16% of the calls to pay-as-you-go where a greedy one
//     sends 6% (TestPaceLapsesUnderItsRate; 8% now).
//   - While the load is above the rate, a PT is never below its rate while
//     calls go to pay-as-you-go: it is passed over only once it took its
//     rate over the last tenth of its window. Over any stretch it serves
//     what a greedy one would (its rate): the calls pay-as-you-go serves,
//     and is paid for, are as many, sent at other moments. In the window
//     after a fluctuation filled it, a load under the rate can be passed
//     over on a fluctuation over a tenth that a greedy PT would have taken:
//     the pace's cost, a window at a time.
//   - A window that has not filled is taken greedily: a load the window
//     absorbs, bursts above the rate that average under it (the order a
//     small PT is bought for), stays on the PT whole.
//   - A PT's overflow (its location's standard pay-as-you-go, which has no
//     hint: slot.overflow) is pay-as-you-go too, and goes before a PT
//     ahead of its pace for the same reason. Ranked after it, the overflow
//     was sent only what a paced PT left over once its window filled, in
//     bursts, each mostly refused (its quota of a few calls a second takes
//     no more in a burst) and its throttle held near 1 by them, while the
//     PT took its window's room at once and left its next window bunched
//     (TestPacedPTOverflowsFirst; generated scenario 2-5, two 3-GSU PTs
//     whose locations' pay-as-you-go took 3 calls a second each: each
//     served 0.95 a second so, 1.3 now, and the scenario 78.2% -> 80.3%).
//   - When the quotas and the overflows have no room (a surge), the PT
//     takes the call from the rest of its window, as before: the burst the
//     window is for.
//   - A demotion does not end the pace: a PT paced when it was demoted is
//     paced again for a window once it is restored (region.restore), as its
//     window, taking almost nothing while it was demoted, could not fill.
//
// The tenth is measured as the current bucket and the share of the one
// before it still in the span, as though its cost were spread evenly over
// it: a measure that errs neither way, where the window's own (held) errs
// toward full, so a PT held to its pace takes about 97% of its rate (the
// window's measure refuses a little of it), not more.

// pace holds the PT of slot s to its pace for a window from now: its window
// is full (the router's meter or Google said so).
func (r *region) pace(now int64, s *slot) {
	// One write per tenth of a window at most: every call a full window
	// refuses would otherwise write the same word.
	if until := now + s.tokWindow; r.paced.Load() < until-s.tokWidth {
		r.paced.Store(until)
	}
}

// aheadOfPace reports whether the PT of slot s ranks after the call's
// pay-as-you-go tiers at now: its window filled within the last window, and
// it took more than its rate over the last tenth of its window.
func (r *region) aheadOfPace(now int64, s *slot) bool {
	return r.paced.Load() > now && r.toks.ahead(now, s.tokWidth)
}
