package policy

import "sync/atomic"

// gcra is a lock-free rate limit: the generic cell rate algorithm, a token
// bucket kept as one number, the theoretical arrival time (TAT) of the next
// unit. A unit of cost c is admitted at time t when TAT-t <= tau, and then
// TAT becomes max(TAT, t)+c. Over any interval d it admits at most
// (d+tau)/c+1 units: a rate of 1/c with a burst of tau/c.
type gcra struct {
	tat atomic.Int64 // nanoseconds since the Unix epoch
}

// take admits one unit of cost at now if the limit allows it. When it does
// not, wait is how long until it would.
func (g *gcra) take(now, cost, tau int64) (ok bool, wait int64) {
	for {
		old := g.tat.Load()
		if d := old - now; d > tau {
			return false, d - tau
		}
		if g.tat.CompareAndSwap(old, max(old, now)+cost) {
			return true, 0
		}
	}
}

// peek reports whether a unit would be admitted at now, without taking it.
func (g *gcra) peek(now, tau int64) (ok bool, wait int64) {
	if d := g.tat.Load() - now; d > tau {
		return false, d - tau
	}
	return true, 0
}

// charge records cost already spent at now, admitted or not: the caller
// learns what a call cost only when it ends.
func (g *gcra) charge(now, cost int64) {
	for {
		old := g.tat.Load()
		if g.tat.CompareAndSwap(old, max(old, now)+cost) {
			return
		}
	}
}
