// Package policy decides, call by call, which region of a pool to try, and
// learns from each outcome. It is a pure library: no Kubernetes, no network;
// the clock and the random source are injected (Options), so tests move time
// instead of sleeping and replay the same choices from the same seed.
//
// # Shape
//
// A Router (the adaptive Pool, or a baseline) starts a Call per request; each
// Call.Pick returns an Attempt naming the region, its endpoint and the
// X-Vertex-AI-LLM-Request-Type header to send, and Attempt.Done reports the
// outcome. Two steps, so the same API serves unary calls and streams (Done when
// the stream ends). The Call carries a retry's bookkeeping: attempts made,
// regions tried, the last outcome and the overall deadline. Pick and Done take
// no lock and allocate nothing: live state is atomics and per-region counters
// in rotating time buckets; a table update publishes a new immutable config
// with one atomic pointer swap.
//
// # Policy, in the order it applies
//
// Tiers. Provisioned regions take first attempts, in proportion to their
// capacity (RequestsPerSecond, else TokensPerSecond, else GSUs) and up to it.
// Overflow and retries spill to shared regions in proportion to their
// RequestsPerSecond hints (a region without a hint weighs the mean of the
// others' hints), never beyond a region's hint. A capacity is counted over a
// sliding window of one second, as regions count their quota: a burst may
// take a whole second's capacity at once, but no second ever gets more (a
// capacity under one call a second is paced instead). When no region has
// headroom the call is refused with ErrOverCapacity and a Retry-After, never
// pushed on a region that cannot take it.
//
// Provisioned capacity: RequestsPerSecond when the table gives it, counted at
// Pick. Otherwise TokensPerSecond: a call is charged the region's average
// tokens per call when it is picked, so calls still in flight count, and the
// charge is corrected by the tokens the caller reports with Attempt.DoneTokens
// (refunded when the attempt failed, was refused or was cancelled). Otherwise
// provisioned capacity is unbounded here and the region's 429s alone, through
// the throttle, move traffic away.
//
// Throttle (SRE book, chapter 21, client-side adaptive throttling). Per region,
// over a 10 s window, a call is turned away to the next region with
// probability
//
//	p = max(0, (requests − K × accepts) / (requests + 1)),  K = 2
//
// where requests are attempts the region answered and accepts those it did not
// answer with 429 (see throttleP for why turned-away calls are not counted). A
// 429 never counts toward ejection. A recovered region is back within tens of
// seconds: its window forgets in 10 s, and a trickle of probes keeps reaching it.
//
// Ejection (Envoy's failure-percentage outlier detection; gRFC A50). A region
// whose failures/(successes+failures) over the ejection interval reaches
// failureRateThreshold, with at least minRequests answered, is failing. An
// ejectable shared region that is failing is ejected for
// min(baseEjectionTime × multiplier, maxEjectionTime), less a random 0-10%;
// the multiplier grows per ejection and decays per healthy interval. An
// ejection happens only if afterwards at most maxEjectedPercent of the regions
// are ejected. When fewer than half the regions are left un-ejected (Envoy's
// panic threshold, 50%), ejections are ignored. A provisioned region is never
// ejected: while failing, retries try it after the others, but it keeps its
// share of first attempts.
//
// Retries (Finagle and Linkerd retry budgets). At most maxAttempts attempts per
// call, each preferring a region the call has not tried, inside one deadline;
// no retry after a success, a caller fault or a cancellation. Over a 10 s
// window shared by the process (Budget), a retry is allowed while
//
//	retries < budgetPercent/100 × requests + minRetriesPerSecond × 10
//
// so with 100% failures attempts per request stay under
// 1 + budgetPercent/100 + minRetriesPerSecond/rate. One retry is not bound by
// the budget: the fallback of a provisioned region that fails intermittently
// (a Failure, not a 429, while the region answers at least minRequests over
// the ejection interval with a failure rate under the threshold). A burst of
// its failures can outrun the budget, and those calls are exactly the ones the
// paid-for capacity must not drop; the retries still go elsewhere first,
// within maxAttempts, the deadline and each receiver's capacity and in-flight
// limit. A provisioned region failing at or over the threshold, or answering
// 429, spends the budget like any other.
//
// Bulkheads. Each region has an in-flight limit that adapts by AIMD (+1/limit
// per success while at least half used; ×0.9 per 429 or timeout; within
// [1, regionMaxLimit], starting at regionInitialLimit), and the pool has a
// cap (maxInFlight). Sheddable calls may fill 75% of a limit, default calls
// 90%, critical calls all of it: the lowest priority is shed first, with
// ErrShed and a Retry-After.
//
// # Baselines
//
// Blocklist is the count blocklist the outage came from (6 failures or 429s
// within 60 s remove a region for 60 s, whatever its tier; "no regions to
// run" when all are removed); Allowlist adds the six-line fix (provisioned
// regions are never removed). They implement Router, so a replay drives them
// exactly as it drives Pool.
//
// # Live state
//
// Snapshot returns every region's tier, ejection, failure rate, throttle
// probability, in-flight count and limit, with JSON tags for the server.
// Update swaps the pool config at run time and keeps the live state of the
// regions still present.
//
// # Performance
//
// See README.md in this directory for the benchmark numbers.
package policy
