package policy

import (
	"sync"
	"sync/atomic"
	"time"

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

// Blocklist is the baseline policy: regions are tried in table order
// (provisioned first), skipping removed regions and, on a retry, regions the
// call already tried; a region that fails 6 times (429s included) within 60 s is
// removed for 60 s, whatever its tier. When every region is removed the call
// fails with ErrNoRegions. It retries up to the pool's maxAttempts within the
// deadline, with no budget, throttle, capacity or concurrency limit.
//
// NewAllowlist gives the same policy with the outage's six-line fix: a
// provisioned region is never removed.
type Blocklist struct {
	now             func() time.Time
	keepProvisioned bool
	st              atomic.Pointer[blockState]

	mu sync.Mutex // serializes Update
}

var _ Router = (*Blocklist)(nil)

// blockState is one version of the baseline's config.
type blockState struct {
	pool        table.Pool
	slots       []*blockSlot
	maxAttempts int
}

// blockSlot is a region as one config version of the baseline sees it.
type blockSlot struct {
	r           *blockRegion
	name        string
	endpoint    string
	tier        table.Tier
	header      string
	provisioned bool
}

// blockRegion is the baseline's live state of one region.
type blockRegion struct {
	b    *Blocklist
	cfg  atomic.Pointer[blockSlot]
	mu   sync.Mutex
	fail [blocklistFailures]int64 // ring of the latest failure times. Guarded by mu.
	next int                      // ring position of the oldest. Guarded by mu.

	removedUntil atomic.Int64
	timesRemoved atomic.Int64
}

// NewBlocklist returns the count-blocklist baseline for pool tp.
func NewBlocklist(tp table.Pool, o Options) (*Blocklist, error) {
	return newBlocklist(tp, o, false)
}

// NewAllowlist returns the count-blocklist baseline with the provisioned-region
// allowlist: provisioned regions are never removed.
func NewAllowlist(tp table.Pool, o Options) (*Blocklist, error) {
	return newBlocklist(tp, o, true)
}

func newBlocklist(tp table.Pool, o Options, keep bool) (*Blocklist, error) {
	b := &Blocklist{now: o.Now, keepProvisioned: keep}
	if b.now == nil {
		b.now = time.Now
	}
	if err := b.Update(tp); err != nil {
		return nil, err
	}
	return b, nil
}

// Update applies a new config, keeping the failures and removals of regions
// still present. With the allowlist, a region that became provisioned is
// restored at once.
func (b *Blocklist) Update(tp table.Pool) error {
	tp, err := prepare(tp)
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now().UnixNano()
	old := b.st.Load()
	st := &blockState{pool: tp, maxAttempts: tp.Policy.Retry.MaxAttempts}
	for _, tr := range tp.Regions {
		var r *blockRegion
		if old != nil {
			for _, s := range old.slots {
				if s.name == tr.Name {
					r = s.r
				}
			}
		}
		if r == nil {
			r = &blockRegion{b: b}
		}
		s := &blockSlot{
			r:           r,
			name:        tr.Name,
			endpoint:    tr.Endpoint,
			tier:        tr.Tier,
			header:      tp.Policy.Provisioned.Header(tr.Tier),
			provisioned: tr.Tier == table.TierProvisioned,
		}
		if b.keepProvisioned && s.provisioned && r.removedUntil.Load() > now {
			r.removedUntil.Store(now)
		}
		r.cfg.Store(s)
		st.slots = append(st.slots, s)
	}
	b.st.Store(st)
	return nil
}

// Start begins a call.
func (b *Blocklist) Start(req Request) Call { return Call{r: b, st: start(req)} }

// pick takes the first region in table order that is not removed, preferring
// one the call has not tried.
func (b *Blocklist) pick(cs callState) (callState, Attempt, error) {
	st := b.st.Load()
	now := b.now().UnixNano()
	if err := cs.check(now, st.maxAttempts); err != nil {
		return cs, Attempt{}, err
	}
	var pickTried *blockSlot
	for _, s := range st.slots {
		if s.r.removedUntil.Load() > now {
			continue
		}
		if cs.hasTried(s.r) {
			if pickTried == nil {
				pickTried = s
			}
			continue
		}
		return cs, b.attempt(&cs, s), nil
	}
	if pickTried != nil {
		return cs, b.attempt(&cs, pickTried), nil
	}
	return cs, Attempt{}, ErrNoRegions
}

// attempt records an attempt of the call on s.
func (b *Blocklist) attempt(cs *callState, s *blockSlot) Attempt {
	n := cs.record(s.r, 0, 0)
	return Attempt{Region: s.name, Endpoint: s.endpoint, Tier: s.tier, RequestType: s.header, n: n}
}

// done counts a failure or 429 and removes the region at the sixth within the
// window.
func (r *blockRegion) done(rep Report) {
	if rep.Outcome != Failure && rep.Outcome != Capacity {
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
	if r.b.keepProvisioned && r.cfg.Load().provisioned {
		return
	}
	r.removedUntil.Store(now + int64(blocklistDuration))
	r.timesRemoved.Add(1)
	r.fail = [blocklistFailures]int64{}
}

// recent counts the failures within the window. Caller must hold r.mu.
func (r *blockRegion) recent(now int64) int64 {
	var k int64
	for _, t := range r.fail {
		if t != 0 && now-t <= int64(blocklistWindow) {
			k++
		}
	}
	return k
}

// Snapshot returns every region's recent failures and removal.
func (b *Blocklist) Snapshot() Snapshot {
	now := b.now().UnixNano()
	st := b.st.Load()
	snap := Snapshot{
		Policy:    "blocklist",
		Namespace: st.pool.Namespace,
		Name:      st.pool.Name,
		Project:   st.pool.Project,
		Publisher: st.pool.Publisher,
		Model:     st.pool.Model,
		Time:      time.Unix(0, now).UTC(),
		Regions:   make([]RegionSnapshot, 0, len(st.slots)),
	}
	if b.keepProvisioned {
		snap.Policy = "allowlist"
	}
	for _, s := range st.slots {
		r := s.r
		r.mu.Lock()
		failed := r.recent(now)
		r.mu.Unlock()
		rs := RegionSnapshot{
			Name:         s.name,
			Tier:         table.TierShared,
			Ejectable:    !b.keepProvisioned || !s.provisioned,
			TimesEjected: r.timesRemoved.Load(),
			Failed:       failed,
		}
		if s.provisioned {
			rs.Tier = table.TierProvisioned
		}
		if u := r.removedUntil.Load(); u > now {
			rs.Ejected = true
			rs.EjectedUntil = time.Unix(0, u).UTC()
		}
		snap.Regions = append(snap.Regions, rs)
	}
	return snap
}
