package share

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/regionwarden/regionwarden/internal/defaults"
	"github.com/regionwarden/regionwarden/router/policy"
	"github.com/regionwarden/regionwarden/router/table"
)

// Defaults of Options.
const (
	// DefaultInterval is how often the controller exchanges demand (with a
	// store) and recomputes its shares: twice an epoch, so every router
	// writes into every epoch.
	DefaultInterval = DefaultEpoch / 2
	// DefaultMaxAge is how old the last good exchange may be before the
	// router stops taking the store's shares and holds its last one (Hold):
	// with an exchange every 250 ms, a store that stops answering is left
	// within one second.
	DefaultMaxAge = 750 * time.Millisecond
	// DefaultHold is how long a router whose store stopped answering keeps
	// the share its last epochs gave it (Options.Hold) before it falls back
	// to its static share: a store restarting or failing over is back well
	// within it, and a store gone for longer leaves the routers on static
	// shares that no longer follow demand.
	DefaultHold = 5 * time.Minute
	// DefaultGrowDelay is how long a larger share must have been the target
	// before it applies: a capacity window (1 s), so that what a router that
	// left admitted last has left the regions' windows, plus one interval, the
	// spread of the routers' moves to a new epoch. A pool whose PTs are
	// counted over a longer window waits that window instead (growDelays).
	DefaultGrowDelay = time.Second + DefaultInterval
	// MinApplyInterval and MinGrowth bound how often a growing share is
	// applied: at most every 250 ms, and only by more than 5%. A shrinking
	// share applies at once.
	MinApplyInterval = 250 * time.Millisecond
	MinGrowth        = 0.05
)

// Options configure a Controller. Every zero field but Apply takes its default.
type Options struct {
	// Apply installs a table: the source's table with every pool scaled by
	// its share (the server's Apply, which updates each pool's policy in
	// place and keeps its live state). Required.
	Apply func(*table.Table) error
	// Replicas counts the routers of this cluster. Default Static(1).
	Replicas Counter
	// Store, when set, exchanges demand with the other routers, and the
	// replica share follows demand. Nil: the static share 1/N.
	Store *Exchange
	// Meter, when set, meters the regions' request quotas in the store for
	// all routers at once (SharedMeter); the share meters them when the
	// store does not answer.
	Meter *Meter
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Interval between exchanges and recomputations. Default DefaultInterval.
	// With a Store, at most its epoch (on the same clock): the bound on the
	// shares held when the store goes away rests on every router's last
	// three reads holding one common epoch (holdPart), which the default,
	// half an epoch, gives.
	Interval time.Duration
	// MaxAge of the last good exchange before the router stops taking the
	// store's shares: it then holds the least its last epochs gave it, for
	// Hold, and takes its static share after that. Default DefaultMaxAge.
	MaxAge time.Duration
	// Hold is how long after the last epoch it was in the router holds its
	// share when the store stops answering (see holdPart); the store's
	// ExchangeOptions.Keep must be longer by GrowDelay and more. Default
	// DefaultHold.
	Hold time.Duration
	// GrowDelay: a larger share applies once it has been the target this
	// long. Default DefaultGrowDelay.
	GrowDelay time.Duration
	// Logger receives share changes and store errors. Default slog.Default().
	Logger *slog.Logger
}

// Controller keeps the shares of one router: it takes the source's tables
// (SetTable), counts demand per pool (Demand, on the hot path), exchanges it
// with the store, and applies the table scaled by each pool's share whenever
// the table changes or a share moves enough. Safe for concurrent use.
type Controller struct {
	o Options

	demand atomic.Pointer[map[table.Key]*Demand]
	meters atomic.Pointer[map[table.Key]*poolMeter] // nil without Options.Meter
	wake   chan struct{}

	mu       sync.Mutex
	tbl      *table.Table
	pools    map[table.Key]*poolShare
	exchange time.Time         // when the store last answered
	peers    map[string][]Peer // its answer, by pool label
	storeErr string            // the last exchange's error, "" after a good one
	applied  time.Time         // when a table was last applied
	replicas int               // the replica count of the last recompute
	// exchanged is the replica count at the last good exchange, and moved
	// whether a recompute has counted another since.
	exchanged int
	moved     bool
	labels    map[table.Key]string // pool labels of tbl
	hash      string               // tbl's hash
}

// poolShare is one pool's share state. Guarded by Controller.mu.
type poolShare struct {
	samples []sample   // target parts of the last GrowDelay, oldest first
	applied table.Pool // the pool as metered now; no regions before the first apply
	share   float64    // the replica share in force
	taken   float64    // the share the last store epoch gave, or the one held; 0: none
	source  string
	// published are the shares this router published in its last two good
	// exchanges, oldest first (a static share where it took none; -1: no
	// such exchange yet), and reads the parts its last three epochs gave it,
	// oldest first (a static part where it had none): what it may hold
	// (holdPart). nreads counts the reads up to three.
	published [2]float64
	reads     [3]Part
	nreads    int
	present   time.Time // when the last exchange whose epoch held this router answered
}

// sample is a target part and when it was computed.
type sample struct {
	at   time.Time
	part Part
}

// New returns a controller. It applies nothing until SetTable.
func New(o Options) *Controller {
	if o.Replicas == nil {
		o.Replicas = Static(1)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	defaults.Positive(&o.Interval, DefaultInterval)
	defaults.Positive(&o.MaxAge, DefaultMaxAge)
	defaults.Positive(&o.Hold, DefaultHold)
	defaults.Positive(&o.GrowDelay, DefaultGrowDelay)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	c := &Controller{o: o, wake: make(chan struct{}, 1), pools: map[table.Key]*poolShare{}}
	c.demand.Store(&map[table.Key]*Demand{})
	return c
}

// Demand is the demand meter of a pool, for the hot path to count each call
// (admitted or refused) with Add: one atomic load and a map lookup, no lock.
// Nil for a pool not in the table.
func (c *Controller) Demand(k table.Key) *Demand { return (*c.demand.Load())[k] }

// Changed tells the controller that the replica count may have changed
// (EndpointSliceCounter's onChange). It does not block.
func (c *Controller) Changed() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// SetTable installs the source's table t, scaled by the shares in force
// (a new pool starts at its static share). t must not be modified afterwards.
func (c *Controller) SetTable(t *table.Table) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tbl, c.hash = t, t.Hash()
	meters := map[table.Key]*Demand{}
	pms := map[table.Key]*poolMeter{}
	c.labels = map[table.Key]string{}
	old := *c.demand.Load()
	var oldPMs map[table.Key]*poolMeter
	if cur := c.meters.Load(); cur != nil {
		oldPMs = *cur
	}
	for i := range t.Pools {
		k := t.Pools[i].Key()
		c.labels[k] = label(k)
		// A pool whose window changed (its PTs' sizes or windows did)
		// counts afresh over the new one.
		if w := DemandWindowFor(&t.Pools[i]); old[k] != nil && old[k].Window() == w {
			meters[k] = old[k]
		} else {
			meters[k] = NewDemand(w)
		}
		if c.o.Meter != nil {
			if pms[k] = oldPMs[k]; pms[k] == nil {
				pms[k] = &poolMeter{m: c.o.Meter}
			}
			pms[k].set(&t.Pools[i])
		}
	}
	c.demand.Store(&meters)
	if c.o.Meter != nil {
		c.meters.Store(&pms)
	}
	for k := range c.pools {
		if _, ok := meters[k]; !ok {
			delete(c.pools, k)
		}
	}
	c.recompute(c.o.Now(), true)
	return c.applyLocked()
}

// Meter is the store's meter (Options.Meter), which also keeps the Live
// session resumption handles for every router (handles.go); nil without
// one.
func (c *Controller) Meter() *Meter { return c.o.Meter }

// SharedMeter is the meter of pool key's request quotas in the store, for
// its policy (policy.Pool.SetSharedMeter); nil without Options.Meter or
// before SetTable has given the pool. The same pool keeps the same meter
// across tables.
func (c *Controller) SharedMeter(key table.Key) policy.SharedMeter {
	cur := c.meters.Load()
	if cur == nil {
		return nil
	}
	if pm := (*cur)[key]; pm != nil {
		return pm
	}
	return nil
}

// Run exchanges and recomputes every Interval, and at once when the replica
// count changes, until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	tick := time.NewTicker(c.o.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			c.exchangeOnce(ctx)
		case <-c.wake:
		}
		if err := c.refresh(c.o.Now()); err != nil {
			c.o.Logger.Error("scaled routing table applied in part", "error", err)
		}
	}
}

// refresh recomputes the shares at now and applies them where they changed.
func (c *Controller) refresh(now time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.recompute(now, false) {
		return c.applyLocked()
	}
	return nil
}

// exchangeOnce publishes this router's demand and reads its peers', when
// there is a store. The hot path never waits for it.
func (c *Controller) exchangeOnce(ctx context.Context) {
	if c.o.Store == nil {
		return
	}
	c.mu.Lock()
	nowNs := c.o.Now().UnixNano()
	demand := make(map[string]Entry, len(c.labels))
	meters := *c.demand.Load()
	for k, l := range c.labels {
		if m := meters[k]; m != nil {
			var e Entry
			e.Demand, e.Calls = m.Sample(nowNs)
			if ps := c.pools[k]; ps != nil {
				e.Share = ps.taken
			}
			demand[l] = e
		}
	}
	replicas := c.o.Replicas.Replicas()
	c.mu.Unlock()
	if len(demand) == 0 {
		return
	}
	peers, err := c.o.Store.Exchange(ctx, replicas, demand)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		if c.storeErr == "" {
			c.o.Logger.Warn("share store unreachable; once the last exchange is older than "+c.o.MaxAge.String()+" each pool's share is held from its last epochs, and static after "+c.o.Hold.String(), "error", err)
		}
		c.storeErr = err.Error()
		return
	}
	if c.storeErr != "" {
		c.o.Logger.Info("share store reachable again")
	}
	c.storeErr = ""
	c.exchange, c.peers = c.o.Now(), peers
	c.exchanged, c.moved = replicas, false
	static := staticPart(c.o.Replicas).Share
	for k, l := range c.labels {
		ps := c.pools[k]
		e, sent := demand[l]
		if ps == nil || !sent {
			continue
		}
		if pm := c.poolMeter(k); pm != nil {
			pm.setAbsent(reservesOf(peers[l]))
		}
		// What the others read for this router: its share, or a static one
		// (the floor of their reserve) where it published none.
		if e.Share <= 0 {
			e.Share = static
		}
		ps.published = [2]float64{ps.published[1], e.Share}
		read := staticPart(c.o.Replicas)
		if p, ok := DemandPart(peers[l], c.o.Store.ID()); ok {
			read, ps.present = p, c.exchange
		} else if c.canHold(ps, c.exchange) {
			// Missing from the epoch while it holds (the store came back
			// and has not yet seen it write twice): the others reserved
			// what it published for it, and its reads stay its last
			// epochs'.
			continue
		}
		ps.reads = [3]Part{ps.reads[1], ps.reads[2], read}
		ps.nreads = min(ps.nreads+1, 3)
	}
}

// canHold reports whether pool share ps may be held at now: it has read an
// epoch, the replica count has not moved since the last exchange, and the
// last epoch it was in is no older than Hold. Caller must hold c.mu.
func (c *Controller) canHold(ps *poolShare, now time.Time) bool {
	return c.o.Store != nil && ps.nreads > 0 && !c.moved && now.Sub(ps.present) <= c.o.Hold
}

// holdPart is the part a router takes while the store does not answer it,
// and false when it has none to hold. Its share is the least of the shares
// it published in its last two good exchanges and the shares its last three
// epochs gave it, each a static share where it had none; of each region it
// takes the least whole calls any of those epochs handed it (largest
// remainder, Part.calls), and at most its share rounded up (Scale).
//
// It keeps the routers within their capacity, whoever the store stopped
// answering, by construction:
//
//   - The others reserve the router's part. In every epoch it is absent
//     from, each router that reads the epoch reserves for it the larger of
//     1/N and the last share it published up to that epoch (the store's
//     roster, the same for all readers; Allocate), for ExchangeOptions.Keep,
//     and counts its calls rounded up. That last share is one of the two
//     this router published last: the last, or, when the reader's epoch came
//     before the router's last write, the one before. The held share is at
//     most both, and the held calls at most the share rounded up.
//   - Epochs it is in give it its demand part; the last one it read is in
//     the minimum too. An epoch it wrote into but never read gives the
//     others at most one epoch's allocation, which their grow delay (longer
//     than an epoch) never applies before the next epoch reserves for this
//     router again.
//   - When every router lost the store at once, the last epochs they read
//     are within one of each other (an exchange every half epoch, each
//     bounded by its timeout), and each router's last three reads span two
//     epochs: one epoch is among every router's reads, and each router holds
//     at most its share and its calls of that epoch, which add up to the
//     capacity at most.
//
// A router missing from the epoch it reads when the store answers again
// (it wrote into none of the last) holds too, and publishes its held share:
// the others reserved for it what it published last, and its reads stay
// its last epochs', so that a store that comes and goes for a moment leaves
// every router its held part. The hold ends Hold after the last epoch the
// router was in.
//
// It holds only while the replica count is the one of the last exchange: a
// router that starts meanwhile knows no epoch and takes its static share,
// so once the count moves every router takes its static share too (moved).
// A router restarted under the same name and count takes its static share
// while the others hold theirs: what that adds is at most 1/N less the share
// it held, and it ends with Hold.
func (ps *poolShare) holdPart(static Part) (Part, bool) {
	if ps.nreads == 0 {
		return Part{}, false
	}
	within := append([]Part(nil), ps.reads[3-ps.nreads:]...)
	h := 1.0
	for _, r := range within {
		h = min(h, r.Share)
	}
	for _, p := range ps.published {
		if p < 0 {
			p = static.Share
		}
		h = min(h, p)
	}
	if h <= 0 {
		return Part{}, false
	}
	return Part{Share: h, self: -1, n: static.n, within: within}, true
}

// recompute computes every pool's target part at now and the pool to
// apply, and reports whether a table must be applied. force takes every
// pool as computed (a new table). Caller must hold c.mu.
func (c *Controller) recompute(now time.Time, force bool) bool {
	if c.tbl == nil {
		return false
	}
	n := c.o.Replicas.Replicas()
	c.replicas = n
	fresh := c.o.Store != nil && !c.exchange.IsZero() && now.Sub(c.exchange) <= c.o.MaxAge
	if !c.exchange.IsZero() && n != c.exchanged {
		c.moved = true
	}
	changed := false
	for i := range c.tbl.Pools {
		pool := &c.tbl.Pools[i]
		k := pool.Key()
		ps := c.pools[k]
		if ps == nil {
			ps = &poolShare{published: [2]float64{-1, -1}}
			c.pools[k] = ps
		}
		target, src := staticPart(c.o.Replicas), c.o.Replicas.Source()
		ps.taken = 0
		// missing says why a router with a store takes no demand share of
		// the store's last epoch: then it holds its last epochs' part while
		// it may (holdPart), else it takes its static share.
		missing := ""
		if fresh {
			if p, ok := DemandPart(c.peers[c.labels[k]], c.o.Store.ID()); ok {
				target, src = p, "demand exchanged through the share store"
				ps.taken = p.Share
			} else {
				missing = "not in the store's last epoch"
			}
		} else if c.o.Store != nil {
			missing = "no exchange in " + c.o.MaxAge.String()
		}
		if missing != "" {
			if p, ok := ps.holdPart(target); ok && c.canHold(ps, now) {
				// Published when the store answers again (taken), so that a
				// store that comes and goes leaves the router its held
				// share, not 1/N.
				target, ps.taken = p, p.Share
				src = "held from the share store's last epochs (" + missing + "; static after " + c.o.Hold.String() + ")"
			} else {
				src += " (share store: " + missing + ")"
			}
		}
		ps.source = src
		next, share := ps.push(now, *pool, target, growDelays(pool, c.o.GrowDelay, c.o.Interval))
		switch cmp := compare(next, ps.applied); {
		case force, cmp == notComparable, cmp == smaller:
		case cmp == larger && now.Sub(c.applied) >= MinApplyInterval:
		default:
			continue
		}
		ps.applied, ps.share, changed = next, share, true
	}
	return changed
}

// poolMeter is pool k's meter in the store; nil without Options.Meter.
func (c *Controller) poolMeter(k table.Key) *poolMeter {
	if cur := c.meters.Load(); cur != nil {
		return (*cur)[k]
	}
	return nil
}

// growDelays is how long a larger share must have been pool's target before
// it applies, region by region: grow, or longer for a PT that Google counts
// over a longer window (table.Provisioned.WindowFor: 40 s for an order of up
// to 3 GSUs). What a router that left admitted last stays in a region's
// count for that region's window, so the others grow into its part of the
// region once it has left that window, plus one interval, the spread of the
// routers' moves. Each region waits its own window, since each counts its
// own calls: a pay-as-you-go region counted over one second takes its larger
// share after grow even while the PT beside it waits 40 s.
func growDelays(pool *table.Pool, grow, interval time.Duration) []time.Duration {
	out := make([]time.Duration, len(pool.Regions))
	for i, r := range pool.Regions {
		out[i] = grow
		// A one-second window is the one grow is made for.
		if w := ptWindow(pool, r); w > time.Second {
			out[i] = max(grow, w+interval)
		}
	}
	return out
}

// push records target at now and returns the pool scaled by the smallest
// targets of each region's grow delay (growDelays), region by region: what
// may apply. The in-flight limits and the share reported take the smallest
// of the longest delay.
func (ps *poolShare) push(now time.Time, pool table.Pool, target Part, delays []time.Duration) (table.Pool, float64) {
	longest := time.Duration(0)
	for _, d := range delays {
		longest = max(longest, d)
	}
	ps.samples = append(ps.samples, sample{at: now, part: target})
	// Keep the newest sample older than the longest delay too: it was the
	// target when that delay began.
	cut := 0
	for i := 1; i < len(ps.samples) && now.Sub(ps.samples[i].at) >= longest; i++ {
		cut = i
	}
	ps.samples = ps.samples[cut:]
	out := Scale(pool, target)
	share := target.Share
	for j, sm := range ps.samples {
		// sm was the target until the next sample: it bounds the regions
		// whose delay reaches back past then.
		until := now
		if j+1 < len(ps.samples) {
			until = ps.samples[j+1].at
		}
		age := now.Sub(until)
		out = lower(out, Scale(pool, sm.part), func(i int) bool { return age < delays[i] })
		share = min(share, sm.part.Share)
	}
	return out, share
}

// lower is a with the capacity of each region that in selects the lower of
// a's and b's, and every in-flight limit the lower. a and b are the same
// pool scaled by two parts.
func lower(a, b table.Pool, in func(region int) bool) table.Pool {
	a.Regions = append([]table.Region(nil), a.Regions...)
	for i := range a.Regions {
		if !in(i) {
			continue
		}
		ca, cb := &a.Regions[i].Capacity, b.Regions[i].Capacity
		ca.RequestsPerSecond = min(ca.RequestsPerSecond, cb.RequestsPerSecond)
		ca.TokensPerSecond = min(ca.TokensPerSecond, cb.TokensPerSecond)
	}
	ac, bc := &a.Policy.Concurrency, b.Policy.Concurrency
	ac.RegionInitialLimit = min(ac.RegionInitialLimit, bc.RegionInitialLimit)
	ac.RegionMaxLimit = min(ac.RegionMaxLimit, bc.RegionMaxLimit)
	return a
}

// How a newly computed pool compares with the one in force.
const (
	same          = iota
	smaller       // some capacity or limit is lower: apply at once
	larger        // none is lower and one grew by more than MinGrowth
	notComparable // a new table, or nothing applied yet
)

// compare tells how next compares with cur, region by region.
func compare(next, cur table.Pool) int {
	if len(next.Regions) != len(cur.Regions) {
		return notComparable
	}
	out := same
	grew := func(n, c float64) bool { return n > c*(1+MinGrowth) }
	for i := range next.Regions {
		if next.Regions[i].Name != cur.Regions[i].Name {
			return notComparable
		}
		n, c := next.Regions[i].Capacity, cur.Regions[i].Capacity
		if n.RequestsPerSecond < c.RequestsPerSecond || n.TokensPerSecond < c.TokensPerSecond {
			return smaller
		}
		if grew(n.RequestsPerSecond, c.RequestsPerSecond) || grew(n.TokensPerSecond, c.TokensPerSecond) {
			out = larger
		}
	}
	nc, cc := next.Policy.Concurrency, cur.Policy.Concurrency
	if nc.RegionInitialLimit < cc.RegionInitialLimit || nc.RegionMaxLimit < cc.RegionMaxLimit {
		return smaller
	}
	if nc != cc && out == same {
		out = larger
	}
	return out
}

// applyLocked applies the table, each pool as it is metered now. Caller must
// hold c.mu, so that tables are applied in the order they were computed.
func (c *Controller) applyLocked() error {
	if c.tbl == nil {
		return nil
	}
	t := &table.Table{Version: c.tbl.Version, Pools: make([]table.Pool, len(c.tbl.Pools))}
	for i := range c.tbl.Pools {
		t.Pools[i] = c.pools[c.tbl.Pools[i].Key()].applied
	}
	c.applied = c.o.Now()
	return c.o.Apply(t)
}

// TableHash is the hash of the source's table, before shares scaled it; ""
// before the first.
func (c *Controller) TableHash() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hash
}

// PoolShare is the share in force for one pool, for /debug/pools.
type PoolShare struct {
	// Pool is project/publisher/model.
	Pool string `json:"pool"`
	// Share is the part of every region's capacity this router meters: the
	// cluster share times the replica share.
	Share float64 `json:"share"`
	// CapacityShare is the cluster's share from the table, in percent.
	CapacityShare int `json:"capacityShare"`
	// ReplicaShare is this router's part of the cluster's share.
	ReplicaShare float64 `json:"replicaShare"`
	// Replicas is the number of routers this router counts.
	Replicas int `json:"replicas"`
	// Source says where the replica share comes from.
	Source string `json:"source"`
	// Demand is this router's calls per second to the pool, over
	// DemandWindow (DemandWindowFor), as it publishes it.
	Demand float64 `json:"demand"`
	// DemandCalls is how many calls Demand counts: with few, the shares
	// keep the equal split or the ones in force (Allocate).
	DemandCalls uint64 `json:"demandCalls"`
	// DemandWindow is the span Demand is counted over: 10s, or the
	// pool's longest PT window when longer.
	DemandWindow string `json:"demandWindow"`
	// StoreError is the last exchange's error, if it failed.
	StoreError string `json:"storeError,omitempty"`
	// RequestQuotas says what meters the regions' request quotas: "share"
	// (this router's share of each), "store" (one window in the store for
	// all routers), "store and share" (the store warming up after it came
	// back) or "share: the store does not answer".
	RequestQuotas string `json:"requestQuotas"`
}

// Shares returns the share in force of every pool, sorted by pool.
func (c *Controller) Shares() []PoolShare {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tbl == nil {
		return nil
	}
	now := c.o.Now().UnixNano()
	meters := *c.demand.Load()
	out := make([]PoolShare, 0, len(c.tbl.Pools))
	for i := range c.tbl.Pools {
		p := &c.tbl.Pools[i]
		k := p.Key()
		ps := c.pools[k]
		cs := p.Policy.CapacityShare
		if cs == 0 {
			cs = table.DefaultCapacityShare
		}
		rate, calls := meters[k].Sample(now)
		out = append(out, PoolShare{
			Pool: label(k), Share: Of(p, ps.share), CapacityShare: cs, ReplicaShare: ps.share,
			Replicas: c.replicas, Source: ps.source, Demand: rate, DemandCalls: calls,
			DemandWindow: meters[k].Window().String(), StoreError: c.storeErr, RequestQuotas: "share",
		})
		if c.o.Meter != nil {
			out[len(out)-1].RequestQuotas = c.o.Meter.state(now)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pool < out[j].Pool })
	return out
}

// label names a pool in the store and in /debug/pools.
func label(k table.Key) string { return fmt.Sprintf("%s/%s/%s", k.Project, k.Publisher, k.Model) }
