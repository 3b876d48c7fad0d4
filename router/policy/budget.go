package policy

import "time"

// budgetWindow is how far back the retry budget looks: Finagle's default TTL.
const budgetWindow = 10 * time.Second

// budgetWidth is the width of the retry budget's buckets, in nanoseconds.
const budgetWidth = int64(budgetWindow) / windowBuckets

// Budget bounds retries so that they cannot multiply load (Finagle's
// RetryBudget, Linkerd's retry budget). Over the last budgetWindow, a retry is
// allowed while
//
//	retries < budgetPercent/100 × requests + minRetriesPerSecond × 10 s
//
// where requests are first attempts. The ratio caps retries at budgetPercent of
// the traffic however bad the regions get; the floor lets a quiet process still
// retry. Counts are kept in rotating buckets of one second, without a lock;
// concurrent retries may overshoot the budget by the number racing.
//
// One Budget may be shared by every router of a process (Options.Budget); each
// router applies its own pool's percent and floor to the shared counts. The
// zero value is an empty budget, ready to use.
type Budget struct {
	_ [64]byte // keeps the counters off the cache line of whatever precedes them
	w window   // a: requests, b: retries
}

// NewBudget returns an empty retry budget.
func NewBudget() *Budget { return &Budget{} }

// allow reports whether one more retry fits the budget at now.
func (b *Budget) allow(now, percent, minPerSecond int64) bool {
	req, ret := b.w.sum(bucketOf(now, budgetWidth))
	floor := minPerSecond * int64(budgetWindow/time.Second) * 100
	return ret*100 < percent*req+floor
}

// request counts a first attempt.
func (b *Budget) request(now int64) { b.w.add(bucketOf(now, budgetWidth), 1, 0) }

// unrequest takes back the first attempt counted at at (Call.Pin).
func (b *Budget) unrequest(at, now int64) {
	b.w.addPast(bucketOf(at, budgetWidth), bucketOf(now, budgetWidth), -1, 0)
}

// retry counts a retry.
func (b *Budget) retry(now int64) { b.w.add(bucketOf(now, budgetWidth), 0, 1) }

// BudgetSnapshot is the retry budget's recent counts.
type BudgetSnapshot struct {
	// Requests and Retries are counted over Window.
	Requests int64  `json:"requests"`
	Retries  int64  `json:"retries"`
	Window   string `json:"window"`
}

// snapshot returns the budget's counts at now.
func (b *Budget) snapshot(now int64) BudgetSnapshot {
	req, ret := b.w.sum(bucketOf(now, budgetWidth))
	return BudgetSnapshot{Requests: req, Retries: ret, Window: budgetWindow.String()}
}
