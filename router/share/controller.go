package share

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/regionwarden/regionwarden/router/table"
)

// Defaults of Options.
const (
	// DefaultInterval is how often the controller exchanges demand (with a
	// store) and recomputes its shares: twice an epoch, so every router
	// writes into every epoch.
	DefaultInterval = DefaultEpoch / 2
	// DefaultMaxAge is how old the last good exchange may be before the
	// router falls back to its static share: with an exchange every 250 ms,
	// a store that stops answering is left within one second.
	DefaultMaxAge = 750 * time.Millisecond
	// DefaultGrowDelay is how long a larger share must have been the target
	// before it applies: a capacity window (1 s), so that what a router that
	// left admitted last has left the regions' windows, plus one interval, the
	// spread of the routers' moves to a new epoch.
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
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Interval between exchanges and recomputations. Default DefaultInterval.
	Interval time.Duration
	// MaxAge of the last good exchange before the static share applies.
	// Default DefaultMaxAge.
	MaxAge time.Duration
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
	wake   chan struct{}

	mu       sync.Mutex
	tbl      *table.Table
	pools    map[table.Key]*poolShare
	exchange time.Time            // when the store last answered
	peers    map[string][]Peer    // its answer, by pool label
	storeErr string               // the last exchange's error, "" after a good one
	applied  time.Time            // when a table was last applied
	replicas int                  // the replica count of the last recompute
	labels   map[table.Key]string // pool labels of tbl
}

// poolShare is one pool's share state. Guarded by Controller.mu.
type poolShare struct {
	samples []sample // targets of the last GrowDelay, oldest first
	applied float64  // replica share in force; 0 before the first apply
	source  string
}

// sample is a target replica share and when it was computed.
type sample struct {
	at    time.Time
	share float64
}

// New returns a controller. It applies nothing until SetTable.
func New(o Options) *Controller {
	if o.Replicas == nil {
		o.Replicas = Static(1)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.MaxAge <= 0 {
		o.MaxAge = DefaultMaxAge
	}
	if o.GrowDelay <= 0 {
		o.GrowDelay = DefaultGrowDelay
	}
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
	c.tbl = t
	meters := map[table.Key]*Demand{}
	c.labels = map[table.Key]string{}
	old := *c.demand.Load()
	for i := range t.Pools {
		k := t.Pools[i].Key()
		c.labels[k] = label(k)
		if meters[k] = old[k]; meters[k] == nil {
			meters[k] = &Demand{}
		}
	}
	c.demand.Store(&meters)
	for k := range c.pools {
		if _, ok := meters[k]; !ok {
			delete(c.pools, k)
		}
	}
	c.recompute(c.o.Now())
	return c.applyLocked()
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
		c.mu.Lock()
		changed := c.recompute(c.o.Now())
		var err error
		if changed {
			err = c.applyLocked()
		}
		c.mu.Unlock()
		if err != nil {
			c.o.Logger.Error("scaled routing table applied in part", "error", err)
		}
	}
}

// exchangeOnce publishes this router's demand and reads its peers', when
// there is a store. The hot path never waits for it.
func (c *Controller) exchangeOnce(ctx context.Context) {
	if c.o.Store == nil {
		return
	}
	c.mu.Lock()
	nowNs := c.o.Now().UnixNano()
	demand := make(map[string]float64, len(c.labels))
	meters := *c.demand.Load()
	for k, l := range c.labels {
		if m := meters[k]; m != nil {
			demand[l] = m.Rate(nowNs)
		}
	}
	c.mu.Unlock()
	if len(demand) == 0 {
		return
	}
	peers, err := c.o.Store.Exchange(ctx, c.o.Replicas.Replicas(), demand)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		if c.storeErr == "" {
			c.o.Logger.Warn("share store unreachable; the static share applies once the last exchange is older than "+c.o.MaxAge.String(), "error", err)
		}
		c.storeErr = err.Error()
		return
	}
	if c.storeErr != "" {
		c.o.Logger.Info("share store reachable again")
	}
	c.storeErr = ""
	c.exchange, c.peers = c.o.Now(), peers
}

// recompute computes every pool's target replica share at now and the share
// to apply, and reports whether a table must be applied. Caller must hold
// c.mu.
func (c *Controller) recompute(now time.Time) bool {
	if c.tbl == nil {
		return false
	}
	n := c.o.Replicas.Replicas()
	c.replicas = n
	static := 1 / float64(n)
	fresh := c.o.Store != nil && !c.exchange.IsZero() && now.Sub(c.exchange) <= c.o.MaxAge
	changed := false
	for k, l := range c.labels {
		ps := c.pools[k]
		if ps == nil {
			ps = &poolShare{}
			c.pools[k] = ps
		}
		target, src := static, c.o.Replicas.Source()
		if fresh {
			if s, ok := Allocate(c.peers[l], c.o.Store.ID()); ok {
				target, src = s, "demand exchanged through the share store"
			} else {
				src += " (not in the store's last epoch)"
			}
		} else if c.o.Store != nil {
			src += " (share store: no exchange in " + c.o.MaxAge.String() + ")"
		}
		ps.source = src
		s := ps.push(now, target, c.o.GrowDelay)
		switch {
		case ps.applied == 0, s < ps.applied:
			ps.applied, changed = s, true
		case s > ps.applied*(1+MinGrowth) && now.Sub(c.applied) >= MinApplyInterval:
			ps.applied, changed = s, true
		}
	}
	return changed
}

// push records target at now and returns the smallest target of the last
// grow delay: the share that may apply.
func (ps *poolShare) push(now time.Time, target float64, grow time.Duration) float64 {
	ps.samples = append(ps.samples, sample{at: now, share: target})
	// Keep the newest sample older than the window too: it was the target
	// when the window began.
	cut := 0
	for i := 1; i < len(ps.samples) && now.Sub(ps.samples[i].at) >= grow; i++ {
		cut = i
	}
	ps.samples = ps.samples[cut:]
	low := target
	for _, s := range ps.samples {
		low = min(low, s.share)
	}
	return low
}

// applyLocked applies the table scaled by each pool's share. Caller must hold
// c.mu, so that tables are applied in the order they were computed.
func (c *Controller) applyLocked() error {
	if c.tbl == nil {
		return nil
	}
	t := &table.Table{Version: c.tbl.Version, Pools: make([]table.Pool, len(c.tbl.Pools))}
	for i := range c.tbl.Pools {
		p := &c.tbl.Pools[i]
		t.Pools[i] = Scale(*p, Of(p, c.pools[p.Key()].applied))
	}
	c.applied = c.o.Now()
	return c.o.Apply(t)
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
	// Demand is this router's calls per second to the pool.
	Demand float64 `json:"demand"`
	// StoreError is the last exchange's error, if it failed.
	StoreError string `json:"storeError,omitempty"`
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
		out = append(out, PoolShare{
			Pool: label(k), Share: Of(p, ps.applied), CapacityShare: cs, ReplicaShare: ps.applied,
			Replicas: c.replicas, Source: ps.source, Demand: meters[k].Rate(now), StoreError: c.storeErr,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pool < out[j].Pool })
	return out
}

// label names a pool in the store and in /debug/pools.
func label(k table.Key) string { return fmt.Sprintf("%s/%s/%s", k.Project, k.Publisher, k.Model) }
