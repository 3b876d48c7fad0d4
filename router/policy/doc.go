// Package policy decides, call by call, which region of a pool to try, and
// learns from each outcome. It is a pure library: no Kubernetes, no network;
// the clock and the random source are injected (Options), so tests move time
// instead of sleeping and replay the same choices from the same seed. It holds
// only what the router runs: the replay's baselines (the count blocklist of
// the outage) live with the replay, in internal/replay.
//
// # Shape
//
// A Pool starts a Call per request; each Call.Pick returns an Attempt naming
// the region, its endpoint and the capacity to ask it for (Tier: its
// Provisioned Throughput or pay-as-you-go alone; PayGo: the pay-as-you-go
// tier), and Attempt.Done reports the outcome.
// Two steps, so the same API serves unary calls and streams (Done when the
// stream ends). The Call carries a retry's bookkeeping: attempts made, regions
// tried, the last outcome and the overall deadline. Pick and Done take no lock
// and allocate nothing: live state is atomics and per-region counters in
// rotating time buckets (window.go); a table update publishes a new immutable
// config with one atomic pointer swap.
//
// Files: config.go builds a pool's config from the table (New, Update);
// state.go holds the live state; pick.go is the hot path of a pick and
// done.go of an outcome; the mechanisms each have a file (throttle, eject,
// demote, limit, budget, rate, reserve, quick).
//
// # Policy, in the order it applies
//
// Locations. Each region of a pool is one location, called at its own
// endpoint with its own name in the path. A PT serves only calls to the
// location it was bought in (one on global only calls to the global endpoint,
// a regional one only calls to its region: Google's "Use Provisioned
// Throughput"), so the provisioned tier and the PT lane belong to that region
// alone, and an attempt on another region never counts on them.
//
// Tiers. Provisioned regions take first attempts, in proportion to their
// capacity (RequestsPerSecond, else TokensPerSecond, else GSUs) and up to it.
// Overflow and retries spill to pay-as-you-go: to the tiers the call's
// priority may use, in the pool's order (table.PayGo: by default Priority
// PayGo then standard for critical calls, standard for default ones, Flex
// then standard for sheddable ones), each where a region offers it
// (table.Region.PayGoTiers: standard alone for a shared region by default),
// and within a tier in proportion to the regions' RequestsPerSecond hints (a
// region without a hint weighs the mean of the others' hints), never beyond
// a region's hint. A PT attempt names the first of those tiers its region
// offers, so that in spillover mode Google spills its overflow there. In
// spillover mode a provisioned region that lists no tiers takes, besides
// its PT, the calls the call's tiers have no room for, before a PT ahead of
// its pace (pace.go), in its location's standard pay-as-you-go
// (rankOverflow): Google would have served the PT's overflow there had the
// router sent it, and the router's meter stops the PT lane at the PT. That
// lane has no hint: its own 429s throttle it.
//
// Lanes (lane.go). Each capacity of a region (its PT, each pay-as-you-go
// tier) is a lane with its own throttle: a 429 of one says nothing of the
// others, and the call it refused may spill to them (callState.hasTried).
// A PT-full 429 (ProvisionedFull: "Exceeded the Provisioned
// Throughput", for a PT called dedicated) marks the PT full: the call spills
// at once, outside the retry budget, to the region's other capacities and
// the pool's pay-as-you-go, later calls skip the PT, and one a second asks it
// again: the PT opens when that call is not refused in twice the time
// recent refusals took (it was let in), without waiting for its answer;
// the region is not throttled, shrunk or demoted for it. An answer
// that pay-as-you-go served (Report.OnDemand) never reopens a full PT. A capacity is counted over a
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
// (refunded when the attempt was refused, failed at once or was cancelled;
// kept when it timed out, since the region had let it in: done.go). A PT's
// tokens are counted over the PT's window, not one second: Google enforces a
// PT's quota over a window that grows as the order shrinks (40 s or more up
// to 3 GSUs), so the router meters TokensPerSecond × window over a sliding
// window of that length (table.Provisioned.WindowFor: the pool's setting, or
// the shortest window Google gives the order's size), and a burst the PT was
// bought to absorb goes to it instead of spilling. Once its window has
// filled, for a window after, a PT that took more than its rate over the
// last tenth of its window ranks after the call's pay-as-you-go tiers
// (pace.go): under a load above its rate it takes its rate evenly, rather
// than every call until its window fills and none until the burst ages
// out, while the quotas, metered per second, idle and then overflow. Otherwise
// provisioned capacity is unbounded here and the region's 429s alone, through
// the throttle, move traffic away.
//
// Throttle (SRE book, chapter 21, client-side adaptive throttling). Per lane,
// over a 10 s window, a call is turned away to the next region with
// probability
//
//	p = max(0, (requests − K × accepts) / (requests + 1)),  K = 2
//
// where requests are attempts the region answered and accepts those it
// answered with success: a 429 and a failure are both rejections. So p is 0
// while a region accepts at least half of what it answers, and intermittent
// failures never throttle; like ejection, it judges a region only on at least
// minRequests answers. A region that answers only 429s or errors gets a
// trickle; when every region fails, every region's share falls together and
// attempts per call fall well under one (no amplification). A recovered
// region is back within seconds: its window forgets in 10 s, and its trickle
// of calls succeeds again. A 429 never counts toward ejection or demotion.
//
// Ejection (Envoy's failure-percentage outlier detection; gRFC A50). A region
// whose failures/(successes+failures) over the ejection interval reaches
// failureRateThreshold, with at least minRequests answered, is failing. An
// ejectable shared region that is failing is ejected for
// min(baseEjectionTime × multiplier, maxEjectionTime), less a random 0-10%;
// the multiplier grows per ejection and decays per healthy interval. An
// ejected region ranks behind every region that is not and takes only what
// none of them has room for: a call refused for want of headroom fails for
// sure, one sent to a region that answers half its calls does not. When
// the ejection ends the region is on probation (a circuit breaker's half
// open): the failures that ejected it have aged out of its window, so it
// would look healthy and take its full share for as long as its first
// answers take to fail again; instead it ranks last still, takes a probe
// every interval/minRequests and 100/budgetPercent of the pool's calls,
// and gets its share back after restoreAfter
// successes in a row, as a demoted region does. An ejection happens only if
// afterwards at most maxEjectedPercent of the regions are ejected or on
// probation. When fewer than half the regions are left out of both
// (Envoy's panic threshold, 50%), ejections and probations are ignored.
//
// Demotion, never removal (demote.go). A provisioned region is never ejected:
// a failing one is demoted. First attempts then go to the regions that are
// answering and have headroom; it takes what none of them has room for,
// within the share of its bound it answers (none while it answers none:
// Pool.admit), and a probe every interval/minRequests (minRequests answers per ejection
// interval, the evidence the failure rate is judged on) and 100/budgetPercent
// of the pool's calls (probeCallsOf: the probes that fail are at most the
// share of the calls the retry budget grants, at any rate). After restoreAfter
// successes in a row (7 at the default threshold after one failure in the
// ejection interval, more the more it failed: each failure is a try at such
// a run, and a region still failing must string one together by chance less
// than once in a hundred intervals) it is restored with its full share. An
// intermittently failing region (the bursty 504s of an upstream incident)
// stays under the threshold and keeps its first attempts.
//
// Blame (blame.go). A caller whose calls fail wherever they go (their
// content fails them: a document Google cannot process) while the same
// regions serve the pool's other callers fails itself, not the regions:
// once it has answered minRequests attempts over the ejection interval and
// fails in two regions or more and in every region that answered it (a
// region that serves it keeps its failures the regions' and its retries
// going there), in none of which the others' attempts are
// failing and in one at least of which they are judged and served, its
// failures are CallerFault: never retried, counted toward no ejection,
// demotion or throttle. One neighbor's batch cannot demote the PT other
// teams are served by. Callers are told apart by Request.Caller; with one
// caller, or none known, every failure is the regions' as before.
//
// Silence (silence.go). A region that stops answering sends no failure until
// the callers' deadlines pass. Once it holds minRequests attempts in flight
// (a region answering fewer calls an interval: at least two, and as many as
// it answered with success over the interval) and has sent nothing back (a
// 429 or a bad request's 400 is no answer: it refuses a call at the door,
// before the model runs) for longer than its slowest answer of the
// ejection interval, or has not answered the first call picked after the
// latest one it answered for that long (calls picked before a hang may
// still be answering), it ranks behind the regions that answer, as a
// demoted one does, and a demoted one gets no probe, until it answers a
// call picked since. It feeds nothing else: the attempts that never answer
// count as timeouts when their deadlines pass.
//
// Time left (quick.go). A region is not a candidate for an attempt whose
// time left before the call's deadline is shorter than the median of the
// region's latest successes, once it gave minRequests successes over the
// interval, and only where its caller gave the call at least that long in
// all (so the time was spent by its own earlier attempts or its wait: a
// first attempt is never left out): of answers alike, the next is slower
// than their median with a chance of one half, so such an attempt is more
// likely to run out than to be answered, and the place it would take in
// the region's quota is one a new call is more likely to be served in. A
// caller whose deadline is shorter than a region's median (a neighbor's
// slow calls, say) is not judged by answers unlike its own. A call no
// region is likely to answer in time ends at once with ErrTooLate, a
// deadline error.
//
// Order within a rank (prefer.go). Of the capacities of one rank, those of
// a region that failed a larger share of its ended attempts over the
// ejection interval than the least-failing region of the rank, by more
// than chance explains (a two-proportion z-test, z = 2, continuity-corrected,
// each side judged on at least minRequests), are drawn only once the others
// refuse (a demoted PT's probe is never held: it is a question, not
// capacity): filling capacities in order of their chance to serve
// maximizes the calls served where the rank has room, and a rank's total
// room is unchanged. Regions that fail alike are drawn by weight as before.
//
// Retries (Finagle and Linkerd retry budgets). At most maxAttempts attempts per
// call, each preferring a region the call has not tried, inside one deadline,
// not counting the attempts answered 429, which Google refused before the
// model ran (as gRPC's transparent retries do not count): past maxAttempts
// such a call goes only to capacities it has not tried, at most 5 attempts
// in all (callState.check);
// no retry after a success, a caller fault or a cancellation. Over a 10 s
// window shared by the process (Budget), a retry is allowed while
//
//	retries < budgetPercent/100 × requests + minRetriesPerSecond × 10
//
// so with 100% failures attempts per request stay under
// 1 + budgetPercent/100 + minRetriesPerSecond/rate, and the throttle holds them
// far lower. The spill after a 429 (a full PT, or a pay-as-you-go quota with
// no room) is not a retry the budget bounds: Google refused the attempt
// before the model ran, so it repeats no work and adds no load where it was
// refused; it goes only to a capacity the call has not tried, so a call
// makes at most one attempt per capacity outside the budget, and each
// receiver admits it only within its meter, in-flight limit and throttle
// (when no capacity it has not tried admits it, the call waits for one
// that will have room within the wait it may take, PickWaiting; when none
// will, it is a retry like any other, within the budget, which may go back
// to the capacity that refused it: waitsForSpill). Nor is the fallback of a
// provisioned region that fails intermittently (a Failure, not a 429, while
// it is not demoted and answers at least minRequests over the ejection
// interval with a failure rate under the threshold, or answered too few to
// be judged), nor the retry of a demoted region's failed probe (the router
// chose to send it there), nor the retry of a call the router sent to a
// region ranked last (demoted, ejected or silent) for want of room in the
// regions that answer, which goes only to a region that answers
// (lastResortRetry). A burst of its failures can outrun the budget,
// and those calls are exactly the ones the paid-for capacity must not drop;
// in a pool of a call a second whose PT fails every call, every call needs
// its retry, more than the budget's floor allows. The fallback is bounded all the same: only to
// capacities the call has not tried, within maxAttempts, the deadline and each
// receiver's capacity, in-flight limit and throttle.
//
// Bulkheads. Each region has an in-flight limit that adapts by AIMD (+1/limit
// per success while at least half used; ×0.9 per timeout, never per 429,
// which the throttle answers; within [1, regionMaxLimit], starting at regionInitialLimit), and the pool has a
// cap (maxInFlight). Sheddable calls may fill 75% of a limit, default calls
// 90%, critical calls all of it: the lowest priority is shed first, with
// ErrShed and a Retry-After. Slow is not overloaded (limit.go): a region that
// answers (not failing, demoted or throttled) admits a call beyond its AIMD
// limit up to capacity × (the call's deadline + 1 s), the most calls it can
// hold by Little's law while it answers within its callers' deadlines.
//
// Priorities under a shortage (reserve.go). An attempt that finds every
// capacity it may use full waits for the first to have room (PickWaiting);
// while a call waits so, attempts of a lower class (a lower priority, or a
// first attempt of its priority while it is a retry) take no room in the
// capacities it waits for and wait behind it (shed, ErrShed, or over
// capacity when their wait runs out): the room that frees goes to the
// highest class that waits for it, and nothing is held back while no
// higher call waits for that capacity.
//
// # Live state
//
// Snapshot returns every region's tier, ejection, demotion (since when and
// why), failure rate, throttle probability, in-flight count and limit, with
// JSON tags for the server. Update swaps the pool config at run time and keeps
// the live state of the regions still present.
//
// # Performance
//
// See README.md in this directory for the benchmark numbers.
package policy
