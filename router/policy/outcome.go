package policy

import "github.com/regionwarden/regionwarden/router/table"

// Outcome is how one attempt against one region went: what the router learns
// from. Each kind says what it feeds; only a failure ejects or demotes, and
// only a success restores. An attempt of a counting call (Request.Counting)
// feeds none of it, whatever its outcome: it ran the tokenizer, not the
// model.
type Outcome uint8

const (
	// Success: the region answered. An answer of the failure-rate window
	// (counted as not failed), an accept of the throttle, a step of the
	// AIMD limit's additive increase, and for a demoted region one more
	// success in the run that restores it.
	Success Outcome = iota
	// Capacity: the region answered 429 RESOURCE_EXHAUSTED. It has no
	// capacity now; it is not broken. A rejection of the throttle; it
	// leaves the AIMD limit alone (a refusal of rate, not of concurrency:
	// region.done) and is never counted toward ejection or demotion. The
	// retry that follows is a spill, as after ProvisionedFull: to a
	// capacity the call has not tried, outside the retry budget, or, when
	// none admits it, back to one it tried within the budget (pick). The
	// attempt does not count toward maxAttempts (callState.check).
	Capacity
	// Failure: 5xx, UNAVAILABLE, DEADLINE_EXCEEDED from the region, a 404
	// saying the location does not serve the pool's model
	// (upstream.ModelNotServed), or a connection error. A failure of the
	// failure-rate window, which ejects a shared region and demotes a
	// provisioned one, and a rejection of the throttle; a timeout (Report.Timeout) that lasted longer than the
	// region's slowest recent answer also decreases the AIMD limit (done).
	Failure
	// CallerFault: the request was bad (any other 4xx), or its failure is its
	// caller's own: the caller's calls fail wherever they go while the
	// regions serve the pool's other callers (blame.go; Attempt.Finish
	// returns it for such a Failure). Counts for nothing and is never
	// retried.
	CallerFault
	// Cancelled: the caller gave up. Counts for nothing.
	Cancelled
	// ProvisionedFull: the region answered 429 "Exceeded the Provisioned
	// Throughput" to an attempt that asked for its PT alone: the PT is full
	// now, and the call spills to pay-as-you-go. The PT lane learns it is
	// full (lane.go); the region is not throttled, its limit not shrunk, and
	// it counts toward no ejection or demotion. The retry that spills is not
	// bound by the retry budget: Google refused the call at once, without
	// serving it, and it goes to another capacity (within the deadline and
	// each receiver's headroom; it does not count toward maxAttempts:
	// callState.check). Reported for any other attempt, it is Capacity.
	ProvisionedFull
)

// Retryable reports whether another attempt may follow an attempt that
// ended so: after a 429, a full PT or a failure.
func (o Outcome) Retryable() bool { return o == Capacity || o == Failure || o == ProvisionedFull }

// String returns the outcome's metric label.
func (o Outcome) String() string {
	switch o {
	case Success:
		return "success"
	case Capacity:
		return "capacity"
	case Failure:
		return "failure"
	case CallerFault:
		return "caller_fault"
	case Cancelled:
		return "cancelled"
	case ProvisionedFull:
		return "provisioned_full"
	default:
		return "unknown"
	}
}

// Priority orders requests for shedding: the lowest is shed first.
type Priority uint8

const (
	// PriorityDefault is an ordinary request.
	PriorityDefault Priority = iota
	// PriorityCritical is shed last.
	PriorityCritical
	// PrioritySheddable is shed first.
	PrioritySheddable
	// priorities is how many there are.
	priorities = iota
)

// Rank orders priorities as table.Priority.Rank does: sheddable 0, default
// 1, critical 2 (a value the router does not know ranks as default).
func (p Priority) Rank() int { return table.Priority(p.String()).Rank() }

// String returns the priority's name, as the router's header spells it.
func (p Priority) String() string {
	switch p {
	case PriorityCritical:
		return "critical"
	case PrioritySheddable:
		return "sheddable"
	default:
		return "default"
	}
}
