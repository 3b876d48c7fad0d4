package replay

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/regionwarden/regionwarden/router/policy"
	"github.com/regionwarden/regionwarden/router/table"
)

// The count blocklist that the outage came from, kept for comparison: a region
// with blocklistFailures failures within blocklistWindow is removed for
// blocklistDuration. A 429 counts as a failure, as it did then.
const (
	blocklistFailures = 6
	blocklistWindow   = 60 * time.Second
	blocklistDuration = 60 * time.Second
)

// ErrNoRegions is the baselines' refusal when every region is removed: the
// "no regions to run" of the outage. The adaptive policy never returns it.
var ErrNoRegions = errors.New("no regions to run")

// blocklist is the baseline policy: regions are tried in table order
// (provisioned first), skipping removed regions and, on a retry, regions the
// call already tried; a region that fails 6 times (429s included) within 60 s
// is removed for 60 s, whatever its tier. When every region is removed the
// call fails with ErrNoRegions. It retries up to the pool's maxAttempts within
// the deadline, with no budget, throttle, capacity or concurrency limit.
//
// With keepProvisioned it is the allowlist, the outage's six-line fix: a
// provisioned region is never removed. A blocklist is safe for concurrent
// use; the zero value is not usable: make one with newBlocklist.
type blocklist struct {
	now             func() time.Time
	keepProvisioned bool
	regions         []*blockRegion // in table order
	maxAttempts     int
}

var _ Selector = (*blocklist)(nil)

// blockRegion is the baseline's state of one region.
type blockRegion struct {
	b           *blocklist
	name        string
	tier        table.Tier
	provisioned bool

	mu           sync.Mutex
	fail         [blocklistFailures]int64 // ring of the latest failure times
	next         int                      // ring position of the oldest
	removedUntil int64                    // removed while in the future
	timesRemoved int
}

// newBlocklist returns the count-blocklist baseline for pool tp on the clock
// now (nil: time.Now); with keep, the allowlist: provisioned regions are
// never removed.
func newBlocklist(tp table.Pool, now func() time.Time, keep bool) (*blocklist, error) {
	tp.Regions = append([]table.Region(nil), tp.Regions...)
	tp.Default()
	if err := tp.Validate(); err != nil {
		return nil, fmt.Errorf("pool %s/%s/%s: %w", tp.Project, tp.Publisher, tp.Model, err)
	}
	if now == nil {
		now = time.Now
	}
	b := &blocklist{now: now, keepProvisioned: keep, maxAttempts: tp.Policy.Retry.MaxAttempts}
	for _, r := range tp.Regions {
		b.regions = append(b.regions, &blockRegion{b: b, name: r.Name, tier: r.Tier, provisioned: r.Tier == table.TierProvisioned})
	}
	return b, nil
}

// Start begins a call that must end by deadline (zero: none).
func (b *blocklist) Start(deadline time.Time, _ table.Priority) Selection {
	return &blockCall{b: b, deadline: deadline}
}

// blockCall is one call's attempts under a blocklist.
type blockCall struct {
	b        *blocklist
	deadline time.Time
	tried    []*blockRegion
	last     policy.Outcome
	reported bool // the last attempt has reported
}

// Pick takes the first region in table order that is not removed, preferring
// one the call has not tried. A retry follows only a 429 or a failure, within
// maxAttempts and the deadline.
func (c *blockCall) Pick() (Attempt, error) {
	now := c.b.now()
	switch {
	case !c.deadline.IsZero() && !now.Before(c.deadline):
		return Attempt{}, policy.ErrDeadlineExceeded
	case len(c.tried) == 0:
	case c.reported && c.last != policy.Capacity && c.last != policy.Failure:
		return Attempt{}, policy.ErrNotRetryable
	case len(c.tried) >= c.b.maxAttempts:
		return Attempt{}, policy.ErrAttemptsExhausted
	}
	var pick, tried *blockRegion
	for _, r := range c.b.regions {
		switch {
		case r.removed(now.UnixNano()):
		case c.hasTried(r):
			if tried == nil {
				tried = r
			}
		case pick == nil:
			pick = r
		}
	}
	if pick == nil {
		pick = tried
	}
	if pick == nil {
		return Attempt{}, ErrNoRegions
	}
	c.tried = append(c.tried, pick)
	c.reported = false
	return Attempt{Region: pick.name, Tier: pick.tier, Done: func(rep policy.Report) {
		c.last, c.reported = rep.Outcome, true
		pick.done(rep.Outcome)
	}}, nil
}

// Attempts is how many attempts the call picked.
func (c *blockCall) Attempts() int { return len(c.tried) }

func (c *blockCall) hasTried(r *blockRegion) bool {
	for _, t := range c.tried {
		if t == r {
			return true
		}
	}
	return false
}

// removed reports whether the region is removed at now.
func (r *blockRegion) removed(now int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.removedUntil > now
}

// done counts a failure or 429 and removes the region at the sixth within the
// window.
func (r *blockRegion) done(o policy.Outcome) {
	if o != policy.Failure && o != policy.Capacity {
		return
	}
	now := r.b.now().UnixNano()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail[r.next] = now
	r.next = (r.next + 1) % blocklistFailures
	oldest := r.fail[r.next] // the sixth most recent, now included
	if oldest == 0 || now-oldest > int64(blocklistWindow) {
		return
	}
	if r.b.keepProvisioned && r.provisioned {
		return
	}
	r.removedUntil = now + int64(blocklistDuration)
	r.timesRemoved++
	r.fail = [blocklistFailures]int64{}
}
