package replay

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/regionwarden/regionwarden/internal/redisserver"
	"github.com/regionwarden/regionwarden/internal/tcpproxy"
	"github.com/regionwarden/regionwarden/router/policy"
	"github.com/regionwarden/regionwarden/router/share"
	"github.com/regionwarden/regionwarden/router/table"
)

// ShareMode says how the routers of a Replicas column share the regions'
// capacity.
type ShareMode uint8

const (
	// ShareNone: every router meters each region's whole capacity, as
	// routers did before router/share.
	ShareNone ShareMode = iota
	// ShareStatic: each router meters 1/N of it.
	ShareStatic
	// ShareStore: with a real Redis server, the routers meter each region's
	// request quota together in it (share.Meter), exchange their demand
	// through it and share the rest of the capacity by demand; a router the
	// store does not answer holds the share its last epochs gave it.
	ShareStore
)

// ReplicaOptions describe a column of several routers.
type ReplicaOptions struct {
	// N is the number of routers, at least one.
	N int
	// Split is the part of the calls each router receives (as keep-alive and
	// gRPC pin clients to routers); nil spreads them evenly. Its length is N;
	// it need not add up to one.
	Split []float64
	// Share is how the routers share capacity.
	Share ShareMode
	// KillStoreAt, when positive, kills the Redis server at that scenario
	// time, as a crash would (ShareStore only).
	KillStoreAt time.Duration
	// CutOffAt, when positive, cuts the first router off from the Redis
	// server at that scenario time, as a network policy or a partition
	// would, while the others still reach it (ShareStore only).
	CutOffAt time.Duration
}

// Name is the column's name: the routers, their share and the split.
func (o ReplicaOptions) Name() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d routers, ", o.N)
	switch o.Share {
	case ShareNone:
		b.WriteString("no share")
	case ShareStatic:
		b.WriteString("static share")
	case ShareStore:
		b.WriteString("shared store")
	}
	if o.Split == nil {
		b.WriteString(", calls even")
	} else {
		parts := make([]string, len(o.Split))
		for i, s := range o.Split {
			parts[i] = fmt.Sprintf("%g", s)
		}
		b.WriteString(", calls " + strings.Join(parts, "/"))
	}
	if o.KillStoreAt > 0 {
		b.WriteString(", store killed at " + fmtDuration(o.KillStoreAt))
	}
	if o.CutOffAt > 0 {
		b.WriteString(", router 1 cut off from the store at " + fmtDuration(o.CutOffAt))
	}
	return b.String()
}

// Replicas is N routers in process against the same regions, each with the
// adaptive policy and its own share of the capacity (router/share, applied
// through the policy's Update as the router binary does), each call sent to
// one of them by the split. With ShareStore a real redis-server runs for the
// column (make redis); without one the column is skipped.
func Replicas(o ReplicaOptions) Policy {
	return InProcess(o.Name(), func(env *Env) (Selector, error) { return newReplicated(env, o) })
}

// replicated sends each call to one of several routers.
type replicated struct {
	routers []*replica
	cum     []float64 // cumulative split, ending at 1
	env     *Env

	mu  sync.Mutex // guards rnd
	rnd *rand.Rand

	cancel context.CancelFunc
	wg     sync.WaitGroup
	store  *redisserver.Server
	link   *tcpproxy.Proxy // the first router's way to the store; nil unless CutOffAt
	closed []func() error
	tally  *tally // nil without diagnostics
	name   string
}

// replica is one router: its policy and its share controller (nil under
// ShareNone).
type replica struct {
	sel   adaptive // its policy, made once: its calls wait on the replay's clock
	ctl   *share.Controller
	meter *share.Demand
}

func newReplicated(env *Env, o ReplicaOptions) (_ *replicated, err error) {
	if o.N < 1 || (o.Split != nil && len(o.Split) != o.N) {
		return nil, fmt.Errorf("replicas: %d routers with a split of %d", o.N, len(o.Split))
	}
	split := o.Split
	if split == nil {
		split = make([]float64, o.N)
		for i := range split {
			split[i] = 1
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &replicated{env: env, cancel: cancel, rnd: rand.New(rand.NewPCG(env.Seed, 0x5ba7e)), name: o.Name()}
	if env.Logf != nil {
		r.tally = newTally(env)
	}
	defer func() {
		if err != nil {
			_ = r.Close()
		}
	}()
	var total float64
	for _, s := range split {
		total += s
	}
	for _, s := range split {
		prev := 0.0
		if len(r.cum) > 0 {
			prev = r.cum[len(r.cum)-1]
		}
		r.cum = append(r.cum, prev+s/total)
	}
	if o.Share == ShareStore {
		if r.store, err = redisserver.Start(ctx); err != nil {
			if errors.Is(err, redisserver.ErrNotInstalled) {
				return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
			}
			return nil, err
		}
	}
	scale := env.Clock.Scale()
	tbl := &table.Table{Version: table.Version, Pools: []table.Pool{env.Pool}}
	for i := range o.N {
		// Each router has its own seed, as separate processes would.
		p, err := policy.New(env.Pool, policy.Options{Now: env.Now, Seed: env.Seed + uint64(i)*0x9e3779b9, Logger: env.logger()})
		if err != nil {
			return nil, err
		}
		rep := &replica{sel: adaptive{p, env.Clock.Sleep}}
		r.routers = append(r.routers, rep)
		if o.Share == ShareNone {
			continue
		}
		opts := share.Options{
			Apply: func(t *table.Table) error { return p.Update(t.Pools[0]) },
			// Each router knows its place, as routers in a cluster do from
			// their Service's EndpointSlices and POD_NAME.
			Replicas: share.StaticRank{N: o.N, Index: i},
			Now:      env.Now,
			// The ticker runs in real time: an exchange every 250 ms of
			// scenario time. Ages and delays are read on the scenario clock.
			Interval: time.Duration(float64(share.DefaultInterval) / scale),
			Logger:   env.logger(),
		}
		if r.store != nil {
			url := r.store.URL()
			if i == 0 && o.CutOffAt > 0 {
				l, err := tcpproxy.New(r.store.Addr)
				if err != nil {
					return nil, err
				}
				r.link, url = l, "redis://"+l.Addr()+"/0"
			}
			x, err := share.NewExchange(share.ExchangeOptions{
				URL: url, ID: fmt.Sprintf("router-%d", i),
				Epoch: time.Duration(float64(share.DefaultEpoch) / scale),
				Keep:  time.Duration(float64(share.DefaultKeep) / scale),
			})
			if err != nil {
				return nil, err
			}
			r.closed = append(r.closed, x.Close)
			opts.Store = x
			m, err := share.NewMeter(share.MeterOptions{URL: url, ID: fmt.Sprintf("router-%d", i), Scale: scale, Logger: env.logger()})
			if err != nil {
				return nil, err
			}
			r.closed = append(r.closed, m.Close)
			opts.Meter = m
		}
		rep.ctl = share.New(opts)
		if err := rep.ctl.SetTable(tbl); err != nil {
			return nil, err
		}
		// As the router's server does for each pool it makes.
		p.SetSharedMeter(rep.ctl.SharedMeter(env.Pool.Key()))
		rep.meter = rep.ctl.Demand(env.Pool.Key())
		r.wg.Add(1)
		go func() { defer r.wg.Done(); _ = rep.ctl.Run(ctx) }()
	}
	if r.store != nil && o.KillStoreAt > 0 {
		r.at(ctx, o.KillStoreAt, func() {
			env.logger().Info("share store killed", "at", env.Clock.Elapsed())
			r.store.Kill()
		})
	}
	if r.link != nil {
		r.at(ctx, o.CutOffAt, func() {
			env.logger().Info("router 1 cut off from the share store", "at", env.Clock.Elapsed())
			r.link.Close()
		})
	}
	return r, nil
}

// at runs f at scenario time t, unless ctx ends first.
func (r *replicated) at(ctx context.Context, t time.Duration, f func()) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for r.env.Clock.Elapsed() < t {
			if r.env.Clock.Sleep(ctx, 100*time.Millisecond) != nil {
				return
			}
		}
		f()
	}()
}

// Start sends the call to a router drawn by the split and counts it in that
// router's demand, admitted or not, and in the diagnostics' tally.
func (r *replicated) Start(deadline time.Time, pr table.Priority) Selection {
	r.mu.Lock()
	x := r.rnd.Float64()
	r.mu.Unlock()
	i := 0
	for i < len(r.cum)-1 && x >= r.cum[i] {
		i++
	}
	rep := r.routers[i]
	if rep.meter != nil {
		rep.meter.Add(r.env.Now().UnixNano())
	}
	sel := rep.sel.Start(deadline, pr)
	if r.tally != nil {
		return &tallied{Selection: sel, t: r.tally, c: r.tally.start(i)}
	}
	return sel
}

// Shares is each router's share in force, in router order (1 under ShareNone).
func (r *replicated) Shares() []float64 {
	out := make([]float64, len(r.routers))
	for i, rep := range r.routers {
		out[i] = 1
		if rep.ctl != nil {
			out[i] = rep.ctl.Shares()[0].Share
		}
	}
	return out
}

// Close stops the share controllers and the store.
func (r *replicated) Close() error {
	if r.tally != nil {
		r.tally.log(r.name, len(r.routers))
	}
	r.cancel()
	r.wg.Wait()
	var errs []error
	for _, c := range r.closed {
		errs = append(errs, c())
	}
	if r.link != nil {
		r.link.Close()
	}
	if r.store != nil {
		r.store.Kill()
	}
	return errors.Join(errs...)
}

// ScenarioManyRouters is the scenario of several routers: the provisioned
// region down for four minutes behind three pay-as-you-go regions.
const ScenarioManyRouters = "many-routers"

// Targets of the routers sharing capacity.
const (
	// MaxSharedSecondsOver is the longest run of seconds a region may receive
	// more than its capacity from routers that share it.
	MaxSharedSecondsOver = 1
	// MaxShareLoss is how much lower than one router's success the routers
	// sharing capacity may be, in points.
	MaxShareLoss = 0.005
)

// SplitSkewed is the uneven spread of calls over three routers that
// keep-alive makes: 70/20/10.
var SplitSkewed = []float64{0.7, 0.2, 0.1}

// ReplicaColumns are the columns of n routers that the many-routers scenario
// is replayed with: no share (each router meters whole capacities,
// as before router/share), the static share and the shared store with calls
// spread evenly and (for three routers) 70/20/10, and the shared store
// killed at killAt. The busiest router cut off from the store while the
// others reach it (CutOffAt) is replayed by TestRoutersShareQuota: a ninth
// column of three routers and a store on two cores, beside the eight, made
// every column's load late enough to count seconds over quota that no
// router admitted.
func ReplicaColumns(n int, killAt time.Duration) []ReplicaOptions {
	cols := []ReplicaOptions{{N: n, Share: ShareNone}, {N: n, Share: ShareStatic}}
	skew := SplitSkewed
	if n != len(skew) {
		skew = nil
	}
	if skew != nil {
		cols = append(cols, ReplicaOptions{N: n, Share: ShareStatic, Split: skew})
	}
	cols = append(cols, ReplicaOptions{N: n, Share: ShareStore})
	if skew != nil {
		cols = append(cols, ReplicaOptions{N: n, Share: ShareStore, Split: skew})
	}
	cols = append(cols, ReplicaOptions{N: n, Share: ShareStore, KillStoreAt: killAt})
	if skew != nil {
		cols = append(cols, ReplicaOptions{N: n, Share: ShareStore, Split: skew, KillStoreAt: killAt})
	}
	return cols
}

// replicaChecks are the targets of the columns of several routers that share
// capacity: no region over its capacity for more than MaxSharedSecondsOver in
// a row, nor longer than one router sends it more (a PT's window lets one
// router send a PT more than its rate for as long as the window absorbs, and
// a call its quota refuses counts as received: the routers together are held
// to what one router does there, not to less), and success within
// MaxShareLoss of one router's.
func replicaChecks(rep *Report) []Check {
	var one *Result
	for _, r := range rep.Results {
		if r.Policy == NameRegionwarden && r.Skipped == "" {
			one = r
		}
	}
	var cs []Check
	for _, r := range rep.Results {
		if !strings.Contains(r.Policy, " routers, ") || strings.Contains(r.Policy, "no share") {
			continue
		}
		over := Check{Target: fmt.Sprintf("under %s no region receives more than its capacity for longer in a row than %d s or than one router sends it more, whichever is longer", r.Policy, MaxSharedSecondsOver)}
		succ := Check{Target: fmt.Sprintf("%s serves within %.1f points of one router", r.Policy, 100*MaxShareLoss)}
		if r.Skipped != "" {
			over.Measured, over.Skipped = "skipped", true
			succ.Measured, succ.Skipped = "skipped", true
			cs = append(cs, over, succ)
			continue
		}
		over.Pass = true
		var parts []string
		for _, rl := range r.Regions {
			allowed, part := MaxSharedSecondsOver, fmt.Sprintf("%s %d s", rl.Name, rl.LongestOver)
			if one != nil {
				if alone := one.Region(rl.Name); alone != nil && alone.LongestOver > allowed {
					allowed, part = alone.LongestOver, part+fmt.Sprintf(" (one router %d s)", alone.LongestOver)
				}
			}
			parts = append(parts, part)
			over.Pass = over.Pass && rl.LongestOver <= allowed
		}
		over.Measured = "longest run over capacity: " + strings.Join(parts, ", ")
		if one == nil {
			succ.Measured, succ.Skipped = "one router not replayed", true
		} else {
			d := r.SuccessRate() - one.SuccessRate()
			succ.Measured = fmt.Sprintf("%s against %s (%+.2f points)", pct(r.SuccessRate()), pct(one.SuccessRate()), 100*d)
			succ.Pass = d >= -MaxShareLoss
		}
		cs = append(cs, over, succ)
	}
	return cs
}
