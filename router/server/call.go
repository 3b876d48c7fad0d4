package server

import (
	"context"
	"errors"
	"hash/maphash"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"

	"github.com/regionwarden/regionwarden/router/auth"
	"github.com/regionwarden/regionwarden/router/policy"
	"github.com/regionwarden/regionwarden/router/table"
	"github.com/regionwarden/regionwarden/router/upstream"
)

// call is one call on its way through the server, whichever surface it came
// in on: its pool, its policy call, and the attempt under way (where it goes,
// when it began, whether it has been reported). The call is where a trace's
// span begins, and each attempt (attempts) where a child span does.
type call struct {
	s      *Server
	ctx    context.Context // the caller's: whether the caller gave up is read on it
	pool   *poolEntry      // nil until found
	prio   policy.Priority
	caller string      // the caller's Authorization, for the Authorizer
	who    auth.Caller // who the call is from, as far as the router knows
	key    uint64      // the policy's name of the caller (callerKey); 0 before admission or when unknown
	pinned string      // the only region the call may use (a cached content's: cache.go); "": any

	pc      policy.Call
	att     policy.Attempt
	target  upstream.Target
	began   time.Time
	settled bool
	learned policy.Outcome // what the policy learned of the settled attempt

	// Tracing: the call's span and its attempt's (nil before they start,
	// no-ops with tracing off), the attempts made, what the call is, and the
	// usage of the last answer.
	span, aspan   trace.Span
	traced        context.Context // ctx with the call's span, for logs
	n             int
	vertexMethod  string // the Vertex method called (methodGenerate...), for spans and the policy (admit)
	model         string
	input, output int64
	traffic       string
}

// admit starts the policy call under ctx and picks its first attempt: the
// call's admission, which takes its places in the pool's and the region's
// in-flight counts. An error is the policy's refusal. The call counts in the
// pool's demand either way.
func (c *call) admit(ctx context.Context) error {
	if d := c.pool.demand; d != nil {
		d.Add(c.s.now().UnixNano())
	}
	req := c.s.request(ctx, c.prio)
	c.key = c.callerKey()
	req.Region, req.Caller = c.pinned, c.key
	req.Counting = c.vertexMethod == methodCount || c.vertexMethod == methodCompute
	c.pc = c.pool.router.Start(req)
	return c.next()
}

// next picks the call's next attempt. It waits, briefly, for a full quota to
// have room rather than give up (policy.Call.PickWaiting says why and how
// long), on the call's context.
func (c *call) next() error {
	a, err := c.pc.PickWaiting(c.ctx, c.s.sleep)
	if err != nil {
		return err
	}
	c.use(a)
	return nil
}

// use makes a the attempt under way.
func (c *call) use(a policy.Attempt) {
	c.att, c.began, c.settled = a, time.Now(), false
	c.target = upstream.Target{Pool: &c.pool.table, Region: regionOf(a), PayGo: a.PayGo, CallerAuthorization: c.caller}
}

// regionOf is the table region an attempt names: what upstream needs of it
// (name, endpoint, and as its tier the capacity the attempt asks for) as the
// policy picked it, even when a newer table has updated the policy since the
// request began.
func regionOf(a policy.Attempt) table.Region {
	return table.Region{Name: a.Region, Endpoint: a.Endpoint, Tier: a.Tier}
}

// attemptFunc makes the attempt under way. It returns what the policy should
// learn, whether the answer reached the caller (after which it is committed
// and nothing can be retried), and the attempt's error.
type attemptFunc func(ctx context.Context) (rep policy.Report, committed bool, err error)

// attempts makes attempts, the first already admitted, until one answers or
// is committed, one fails in a way no retry mends, or the policy refuses
// another. It returns nil, or the last attempt's error to answer with and,
// when the policy refused a retry, the Retry-After it gave.
func (c *call) attempts(ctx context.Context, try attemptFunc) (time.Duration, error) {
	for {
		rep, committed, err := try(c.startAttempt(ctx))
		rep.Outcome = c.settle(rep)
		if err == nil || committed {
			c.endAttempt(err, "")
			return 0, nil
		}
		if !rep.Outcome.Retryable() {
			c.endAttempt(err, "")
			return 0, err
		}
		if perr := c.next(); perr != nil {
			c.endAttempt(err, "")
			retryAfter, capacity := policy.RetryAfter(perr)
			reason := retryRefusal(perr, capacity)
			c.s.metrics.RetryRefused(c.pool.label, reason)
			c.traceRefused("", reason)
			return retryAfter, err
		}
		c.endAttempt(err, rep.Outcome.String())
	}
}

// settle reports the attempt under way to the policy and counts it, once,
// and returns what the policy learned of it (policy.Attempt.Finish: a
// failure may be the caller's own, which no retry mends). A unary answer
// settles before its last bytes go out, so that a caller that has its
// answer finds it counted.
func (c *call) settle(rep policy.Report) policy.Outcome {
	if c.settled {
		return c.learned
	}
	c.settled = true
	if rep.Outcome == policy.Success && onDemand(c.traffic) {
		rep.OnDemand = true
	}
	rep.Outcome = c.att.Finish(rep)
	c.learned = rep.Outcome
	c.traceSettled(rep)
	c.pool.series.attempt(&c.target.Region, rep.Outcome, time.Since(c.began))
	return rep.Outcome
}

// callerSeed keys the callers the policy tells apart (callerKey).
var callerSeed = maphash.MakeSeed()

// callerKey tells the call's caller from its pool's others, for the policy
// (policy.Request.Caller): its ServiceAccount when the router knows it,
// else its credentials (under --caller-auth=forward its own Google token,
// the same for every call it makes within the token's hour); 0 when the
// call carries neither.
func (c *call) callerKey() uint64 {
	var h maphash.Hash
	h.SetSeed(callerSeed)
	switch {
	case c.who.Namespace != "":
		_, _ = h.WriteString(c.who.Namespace)
		_ = h.WriteByte('/')
		_, _ = h.WriteString(c.who.Name)
	case c.caller != "":
		_, _ = h.WriteString(c.caller)
	default:
		return 0
	}
	return max(h.Sum64(), 1)
}

// onDemand reports whether a traffic type is pay-as-you-go's: ON_DEMAND,
// ON_DEMAND_PRIORITY, ON_DEMAND_FLEX (and any later ON_DEMAND_ kind).
func onDemand(traffic string) bool { return strings.HasPrefix(traffic, "ON_DEMAND") }

// report is what the policy learns from an attempt that ended with err.
// Whether the caller gave up is read on the caller's own context: the
// router's request timeout running out is the region being slow.
//
// The caller's own deadline (a gRPC deadline, a REST X-Server-Timeout)
// running out is the caller's, unless the region had kept the attempt longer
// than it takes to answer (policy.Attempt.Late): then it is the region's
// failure, a timeout. Both halves matter. A caller, or a hostile tenant,
// that gives regions less time than they answer in must not fail them and
// eject or demote them for every other caller; and a region that hangs must
// fail the attempts its callers' deadlines end, or nothing but the router's
// own request timeout would ever count against it.
func (c *call) report(err error) policy.Report {
	rep := upstream.Report(c.ctx, err, c.s.callersCreds, c.pool.table.Key())
	if rep.Outcome == policy.Cancelled && deadlineRanOut(c.ctx) && c.att.Late() { //nolint:misspell // the policy package's name
		rep.Outcome, rep.Timeout = policy.Failure, true
	}
	return rep
}

// deadlineRanOut reports whether ctx ended, or is about to, by its deadline
// rather than by a cancellation.
func deadlineRanOut(ctx context.Context) bool {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

// refusal is the answer to a call the policy refused before any attempt:
// over capacity and shed are RESOURCE_EXHAUSTED with a Retry-After; the
// deadline gone is DEADLINE_EXCEEDED; anything else UNAVAILABLE.
func (c *call) refusal(err error) (codes.Code, string, time.Duration) {
	retryAfter, capacity := policy.RetryAfter(err)
	switch {
	case capacity:
		reason := "over_capacity"
		if errors.Is(err, policy.ErrShed) {
			reason = "shed"
		}
		c.s.metrics.Shed(c.pool.label, c.prio, reason)
		c.traceRefused(reason, "")
		return codes.ResourceExhausted, err.Error(), max(retryAfter, time.Second)
	case errors.Is(err, policy.ErrTooLate):
		return codes.DeadlineExceeded, err.Error(), 0
	case errors.Is(err, policy.ErrDeadlineExceeded):
		return codes.DeadlineExceeded, "request deadline exceeded before any region was tried", 0
	}
	return codes.Unavailable, err.Error(), 0
}

// retryRefusal is the reason label of a retry the policy refused with err.
func retryRefusal(err error, capacity bool) string {
	switch {
	case errors.Is(err, policy.ErrBudgetExhausted):
		return "budget"
	case errors.Is(err, policy.ErrAttemptsExhausted):
		return "attempts"
	case errors.Is(err, policy.ErrTooLate):
		return "too_late"
	case errors.Is(err, policy.ErrDeadlineExceeded):
		return "deadline"
	case capacity:
		return "capacity"
	}
	return "other"
}
