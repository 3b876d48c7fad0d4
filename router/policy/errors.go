package policy

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"time"

	"github.com/regionwarden/regionwarden/router/table"
)

// Errors that Call.Pick returns. Test them with errors.Is; over-capacity and
// shed errors are *CapacityError values that also carry a Retry-After.
var (
	// ErrOverCapacity: no region has headroom for the call now (or what
	// frees goes to a waiting retry of the call's priority: reserve.go).
	// The router answers 429 with Retry-After rather than push the call on
	// a region that cannot take it.
	ErrOverCapacity = errors.New("over capacity: no region has headroom")
	// ErrShed: the call's priority is over its share of a concurrency limit,
	// or it gave way to calls of a higher priority waiting for a full
	// capacity (reserve.go); a call of higher priority would have been let
	// through.
	ErrShed = errors.New("shed: calls of a higher priority go first")
	// ErrBudgetExhausted: a retry was refused because the process's retry
	// budget is spent.
	ErrBudgetExhausted = errors.New("retry budget exhausted")
	// ErrAttemptsExhausted: the call has made the pool's maxAttempts attempts.
	ErrAttemptsExhausted = errors.New("attempts exhausted")
	// ErrDeadlineExceeded: the call's overall deadline has passed. It matches
	// context.DeadlineExceeded too.
	ErrDeadlineExceeded = fmt.Errorf("request deadline exceeded: %w", context.DeadlineExceeded)
	// ErrNotRetryable: the last attempt succeeded, was the caller's fault or
	// was cancelled, so there is nothing to retry.
	ErrNotRetryable = errors.New("last outcome is not retryable")
	// ErrNoRegions is the baselines' error when every region is blocked. The
	// adaptive Pool never returns it.
	ErrNoRegions = errors.New("no regions to run")
	// errNotStarted: Pick on a Call that no router started.
	errNotStarted = errors.New("call was not started by a router")
)

// CapacityError refuses a call that no region can take now, or that is shed
// for its priority. It unwraps to ErrOverCapacity or ErrShed. The server
// answers it with HTTP 429 and a Retry-After header.
type CapacityError struct {
	// Err is ErrOverCapacity or ErrShed.
	Err error
	// RetryAfter is when headroom is expected back: at least one second,
	// in whole seconds, as the Retry-After header carries it.
	RetryAfter time.Duration
	// Priority is the refused call's priority.
	Priority Priority
	// Headroom is how soon a region's capacity has room for the call, to
	// the nanosecond, when a capacity being full is what refused it in
	// some region, or when it may ask again after giving way to a call of
	// a higher class; 0 otherwise (Call.PickWaiting waits for it).
	Headroom time.Duration
	// yielded: the call gave way to a waiting call of a higher class
	// (reserve.go); shed or over capacity, it still waits for headroom.
	yielded bool
	// place is where the refused attempt waits, should its call wait: the
	// capacities that refused it for want of room, in its class.
	place waitPlace
}

// Error says what was refused and when to come back.
func (e *CapacityError) Error() string {
	return fmt.Sprintf("%v (priority %s); retry after %s", e.Err, e.Priority, e.RetryAfter)
}

// waits reports whether the refused call may wait for headroom
// (PickWaiting): a capacity has room again at a known moment, and the call
// was refused for want of it or gave way to a call of a higher class.
func (e *CapacityError) waits() bool {
	return e.Headroom > 0 && (e.yielded || errors.Is(e.Err, ErrOverCapacity))
}

// Unwrap returns ErrOverCapacity or ErrShed.
func (e *CapacityError) Unwrap() error { return e.Err }

// RetryAfter returns the Retry-After of an over-capacity or shed error, and
// false for any other error.
func RetryAfter(err error) (time.Duration, bool) {
	var ce *CapacityError
	if errors.As(err, &ce) {
		return ce.RetryAfter, true
	}
	return 0, false
}

// retryAfterSeconds rounds a wait up to whole seconds, at least one.
func retryAfterSeconds(wait int64) time.Duration {
	d := (time.Duration(wait) + time.Second - 1).Truncate(time.Second)
	return max(d, time.Second)
}

// refusal gathers why regions refused a call, to build the error when all did.
// The zero value has seen no refusal.
type refusal struct {
	wait int64 // shortest wait any region gave, in nanoseconds; 0: none known
	shed bool  // some region refused only because of the call's priority
	// yielded: some capacity was left to a waiting call of a higher
	// class (reserve.go); outranked: of a higher priority.
	yielded, outranked bool
	// metered has bit i set when slot i's meter refused: its wait is
	// worked out once every candidate has refused (meterWaits).
	metered uint32
	// room has bit i set when slot i refused for want of room in a way
	// metered does not note (a shared meter, a pacer), or left its room to
	// a waiting call of a higher class: with metered, the capacities a
	// call that waits waits for (reserve.go).
	room uint32
	// headroom is the shortest wait a full capacity gave (a meter or a
	// pacer), in nanoseconds; 0: none.
	headroom int64
}

// capacity records that a region's capacity refused and when it has room.
func (r *refusal) capacity(wait int64) {
	r.note(wait)
	if wait > 0 && (r.headroom == 0 || wait < r.headroom) {
		r.headroom = wait
	}
}

// One bit of metered per region: this fails to compile if a pool may have more.
var _ = [1]struct{}{}[table.MaxRegions/33]

// meterWaits notes the waits of the meters that refused, at now.
func (r *refusal) meterWaits(st *poolState, now int64) {
	for m := r.metered; m != 0; m &= m - 1 {
		s := st.slots[bits.TrailingZeros32(m)]
		if s.tokCost > 0 {
			r.capacity(s.r.toks.wait(now, s.tokCharge(), s.tokWidth))
		} else {
			r.capacity(s.r.reqs.wait(now, s.reqCost))
		}
	}
}

// yield records that slot i left its room to a waiting call of class to,
// the call asking being of class from, and may ask again after wait.
func (r *refusal) yield(i int, to, from Class, wait int64) {
	r.yielded = true
	r.outranked = r.outranked || to.Rank() > from.Rank()
	r.room |= 1 << i
	r.capacity(wait)
}

// note records that a region refused and when it expects headroom back.
func (r *refusal) note(wait int64) {
	if wait > 0 && (r.wait == 0 || wait < r.wait) {
		r.wait = wait
	}
}

// err is the error for a call of priority pr that every region refused,
// the refused attempt being of class c in pool state st (nil: it asked no
// region).
func (r *refusal) err(pr Priority, st *poolState, c Class) error {
	e := ErrOverCapacity
	if r.shed || r.outranked {
		e = ErrShed
	}
	return &CapacityError{Err: e, RetryAfter: retryAfterSeconds(r.wait), Priority: pr, Headroom: time.Duration(r.headroom), yielded: r.yielded,
		place: waitPlace{st: st, slots: r.metered | r.room, c: c}}
}
