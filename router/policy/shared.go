package policy

// SharedMeter meters the requests-per-second quotas of a pool's regions
// together with the other routers that call the same regions
// (router/share.Meter, in a Redis or Valkey store). Each router alone meters
// only its share of a quota; a call that finds its router's share full is
// refused even while another router's share sits idle, and under calls
// arriving at random those idle moments add up (Erlang's loss: a window of
// k calls split among routers loses more than one of all k). A meter that
// all routers take from loses nothing to the split.
//
// The policy asks it for the hinted lane of a region with a request quota,
// where it would otherwise ask the region's own meter (admit). The answer
// says who decides; whatever it is, the router's own meter is charged with
// every request the router admits, so that when the shared meter cannot
// answer, the router's own share decides at once with what it sent in the
// last second counted.
type SharedMeter interface {
	// TakeShared asks for one request of class c to the region named
	// region at now (nanoseconds on the pool's clock). Requests of a higher
	// class go first across the routers (reserve.go): a request that a
	// full quota refuses claims the room that frees next for its class, for
	// a moment, and one of a lower class asking in that moment gives way
	// (SharedFull with Yielded). It must return within a bounded time,
	// whatever the store does.
	TakeShared(region string, now int64, c Class) SharedAnswer
	// AdmittedLocally says that the router's own meter admitted a request
	// to region at now, after TakeShared said SharedUnknown. The meter
	// counts it too when it can, so that the other routers, still metering
	// in the store, leave room for it: while one router meters its share
	// (its store answers late, or not at all), the requests it sends count
	// against everyone's quota, not on top of it. It must not block. It
	// returns the request's name in the meter, as SharedAnswer.Ticket.
	AdmittedLocally(region string, now int64) uint64
	// Forget takes back the request to region that the meter counted under
	// ticket: the region did not count it (Report.Uncounted). It must not
	// block; a request the meter no longer holds (it has left the window)
	// needs nothing.
	Forget(region string, ticket uint64)
}

// SharedAnswer is a SharedMeter's answer to one request.
type SharedAnswer struct {
	Verdict SharedVerdict
	// Wait, with SharedFull, is how long until the quota has room, in
	// nanoseconds, or, with Yielded, until the request may ask again.
	Wait int64
	// Yielded, with SharedFull: the room is claimed by a waiting request of
	// a higher class, Claimant, perhaps another router's.
	Yielded  bool
	Claimant Class
	// Ticket, with SharedAdmitted and SharedAdmittedIfLocal, names the
	// request in the meter, for Forget; 0: none.
	Ticket uint64
	// Held, with SharedUnknown, is the part of the quota (0 to 1) that the
	// region's window in the store held when it last answered this router,
	// told once, with the first request the store does not answer, if it
	// answered within the last window; else 0. See holdShare.
	Held float64
}

// SharedVerdict says who decides a request (SharedAnswer).
type SharedVerdict uint8

const (
	// SharedUnknown: the meter cannot say (no store, or the store did not
	// answer in time): the router's own meter decides, at its share.
	SharedUnknown SharedVerdict = iota
	// SharedAdmitted: the quota had room for the request, which the shared
	// meter counted; the router's own meter is not asked.
	SharedAdmitted
	// SharedFull: the quota has no room, whatever the router's own share.
	SharedFull
	// SharedAdmittedIfLocal: the shared meter counted the request, but does
	// not yet know everything the region received in its last window (it
	// has just come back after routers metered their shares alone): the
	// router's own meter must admit the request too.
	SharedAdmittedIfLocal
)

// SetSharedMeter makes the pool ask m for its regions' request quotas from
// now on (nil: the router's own meters alone, the default). It survives
// Update.
func (p *Pool) SetSharedMeter(m SharedMeter) {
	if m == nil {
		p.shared.Store(nil)
		return
	}
	p.shared.Store(&m)
}

// takeRequest admits a request on slot s (the i-th) and its hinted lane,
// whose capacity is a request rate (s.reqCost > 0), at now: by the pool's
// shared meter when it decides, else by the region's own meter (the
// one-second window, or the pacer for a rate under one call a window). A
// refusal is noted in ref as admit notes the others: a full shared quota
// and the pacer with their waits, the own meter by its slot, whose wait is
// worked out only if every candidate refuses (meterWaits).
//
// The shared meter's name of the request it counted goes to cs.ticket.
func (p *Pool) takeRequest(s *slot, i int, now int64, cs *callState, ref *refusal) bool {
	m := p.shared.Load()
	unknown, ticket := false, uint64(0)
	if m != nil {
		switch a := (*m).TakeShared(s.name, now, cs.class); a.Verdict {
		case SharedAdmitted:
			s.chargeRequest(now)
			cs.ticket = a.Ticket
			return true
		case SharedFull:
			if a.Yielded {
				ref.yield(i, a.Claimant, cs.class, max(a.Wait, 1))
				return false
			}
			ref.capacity(max(a.Wait, 1))
			ref.room |= 1 << i
			return false
		case SharedUnknown:
			unknown = true
			if a.Held > 0 {
				s.holdShare(a.Held, now)
			}
		case SharedAdmittedIfLocal:
			ticket = a.Ticket
		}
	}
	if !s.takeOwn(i, now, ref) {
		return false
	}
	if unknown {
		ticket = (*m).AdmittedLocally(s.name, now)
	}
	cs.ticket = ticket
	return true
}

// takeOwn admits a request on the region's own meter: the one-second
// window, or the pacer for a rate under one call a window.
func (s *slot) takeOwn(i int, now int64, ref *refusal) bool {
	if s.metersReqs() {
		if !s.r.reqs.take(now, s.reqCost) {
			ref.metered |= 1 << i
			return false
		}
		return true
	}
	ok, wait := s.r.slow.take(now, s.reqCost*costUnit)
	if !ok {
		ref.capacity(wait)
		ref.room |= 1 << i
	}
	return ok
}

// chargeRequest counts on the region's own meter a request the shared meter
// admitted: the meter may go over its share (it is not asking), and then
// refuses until the router's own requests of the last window have left it,
// should the shared meter stop answering.
func (s *slot) chargeRequest(now int64) {
	if s.metersReqs() {
		s.r.reqs.m.add(now, s.reqCost, meterWidth)
		return
	}
	s.r.slow.take(now, s.reqCost*costUnit)
}

// holdShare charges the region's own meter, when the shared meter has just
// stopped answering, with this router's share of what the region's window
// in the store held at its last answer (held, a part of the quota), less
// what the router's own meter already holds: the requests the other routers
// sent in the last window, as far as the store knew them.
//
// Without it, each router falling back to its share would find its own
// meter holding only its own requests: a router that sent little would
// admit its whole share at once while the region still counts what the busy
// ones sent, and the routers together could send the region the quota plus
// the idle routers' shares within one window. With it, router i admits at
// most share_i × (quota − held) in the window after the store stopped
// answering, and the routers together at most quota − held: the region's
// window stays within the quota, as far as the store's last count was
// current. The charge counts from now, not from the store's answer (the
// meter adds only to its current bucket): it is held up to that gap longer
// than the requests it stands for, which is safe, and at most one window.
func (s *slot) holdShare(held float64, now int64) {
	if !s.metersReqs() {
		// A share under one request a window is paced; a request taken now
		// keeps the next one a whole interval away.
		if held >= 1 {
			s.r.slow.take(now, s.reqCost*costUnit)
		}
		return
	}
	s.r.reqs.holdAtLeast(now, int64(min(held, 1)*float64(rateCapacity)))
}
