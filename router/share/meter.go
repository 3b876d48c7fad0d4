package share

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/regionwarden/regionwarden/internal/defaults"
	"github.com/regionwarden/regionwarden/router/policy"
	"github.com/regionwarden/regionwarden/router/table"
)

// Defaults of MeterOptions.
const (
	// DefaultMeterTimeout bounds what one request waits for the store. A
	// store in the cluster answers in well under a millisecond; a call that
	// waits this long for it is metered by its router's share instead, and
	// so are the calls of the next window.
	DefaultMeterTimeout = 20 * time.Millisecond
	// DefaultMeterPrefix starts every key the meter writes.
	DefaultMeterPrefix = "regionwarden:meter:"
)

// MeterOptions configure a Meter. Every zero field takes its default.
type MeterOptions struct {
	// URL and Password are the store, as for ExchangeOptions. URL is
	// required.
	URL, Password string
	// ID names this router in the meter's logs (ExchangeOptions.ID).
	ID string
	// Timeout bounds one request's wait for the store. Default
	// DefaultMeterTimeout.
	Timeout time.Duration
	// Scale is the pool clock's seconds per real second (a replay at a
	// compressed time scale); quotas count over one second of the pool's
	// clock. Default 1.
	Scale float64
	// KeyPrefix starts every key: routers of clusters that share a store
	// but not their quota need different prefixes. Default
	// DefaultMeterPrefix.
	KeyPrefix string
	// Logger receives the store's changes of state. Default slog.Default().
	Logger *slog.Logger
	// OnState, when set, is told each change of the store's state: false
	// when it stops answering, true when it answers again. The meter starts
	// as answering.
	OnState func(answering bool)
}

// Meter meters regions' request quotas in a Redis or Valkey store, for every
// router that uses the store at once: one sliding window per region, on the
// store's clock, of the requests admitted in the last second (and the
// fortieth of it that the router's own meter may hold a call longer). It implements
// the store's side of policy.SharedMeter: each request to a region with a
// quota of N requests a second is one round trip, one script the store runs
// atomically, which admits it if the window holds fewer than N, so that no
// second of the store's clock admits more than the quota, however the calls
// spread over the routers.
//
// # Never a single point of failure
//
// A request waits at most Timeout for the store. When the store errs or
// does not answer in time, the request is metered by the router's share
// (policy.SharedUnknown), and so is every request of the next window; then
// one request tries the store again. The router's own meters are charged
// with every request the store admits, so its share meters from the first
// moment with what the router sent in the last second counted; and the
// requests its share admits are counted in the store in the background
// (add), so that while one router's store answers late, the others, still
// metering in it, leave room for what that router sends. The first request
// the store does not answer is told what the region's window held at its
// last answer (SharedAnswer.Held), for the router's share to hold its part
// of it: the requests the other routers sent.
//
// A router that the store does not answer at all (cut off from it, while
// the others are not) sends on its share, and nothing of that reaches the
// windows. It is missing from the epochs of the demand exchange, which
// reserve its share for it (Allocate); each router's windows leave those
// reserves free (poolMeter.absent), as the shares do.
//
// When the store answers again, its windows know nothing of what the routers
// sent on their shares meanwhile: for two windows (each router tries the
// store once a window, so every router has found it back within a window of
// its return, and its requests of the window before have left the region's
// count by the end of the next) the store and the router's share must both
// admit a request (policy.SharedAdmittedIfLocal), and the sum stays within
// the quota since the shares add up to it.
type Meter struct {
	rdb     *redis.Client
	id      string
	prefix  string
	timeout time.Duration
	scale   float64
	// window is how long a request stays in a region's window, in
	// microseconds of the store's clock: one second of the pool's clock,
	// and the fortieth of it that the router's own meter may hold a call
	// longer (policy.MaxHeadroomWait), so that the store tolerates the same
	// spread of delays between admitting a request and its arrival as the
	// router's own meter does.
	window int64
	// tick is a tick of the router's own meters (policy.MeterTick), in
	// microseconds of the store's clock, and rtt the round trip to the
	// store the meter last measured, in microseconds: a waiting request
	// of a higher priority holds a region's room for tick + 2 rtt past the
	// moment it frees (meterScript). Its router hears the wait half a
	// round trip after the store worked it out, and its request arrives
	// half a round trip after the call wakes: the room waits a round trip
	// (twice the last one measured, for its jitter) and a tick for the
	// call to wake. A store in the cluster adds well under a millisecond;
	// one tens of milliseconds away adds what it takes, no more.
	tick int64
	rtt  atomic.Int64
	log  *slog.Logger
	// onState is MeterOptions.OnState, or a no-op.
	onState func(answering bool)

	// nonce and seq name each request in the store uniquely: a random
	// prefix per Meter, so that no two routers (nor a router restarted under
	// the same name) can name two requests alike and have the store count
	// them as one.
	nonce string
	seq   atomic.Uint64

	// bg writes in the background (extender): its own connections, with a
	// timeout of a window, so that a slow store delays no call's wait and
	// a write the hot path could not wait for still gets through.
	bg            *redis.Client
	startExtender sync.Once
	extensions    chan extension // writes for the extender (extend, add)
	closed        chan struct{}
	// down is, in nanoseconds of the pool's clock, until when the store is
	// not asked after a failure; 0 while it answers.
	down atomic.Int64
	// warm is until when a request the store admits needs the router's
	// share too, after the store came back.
	warm atomic.Int64
}

// meterScript admits a request into KEYS[1]'s window if it holds fewer than
// ARGV[2] requests: a sorted set of the admitted requests by their time on
// the store's clock, in microseconds, from which those older than the
// window (ARGV[1], microseconds) are dropped first. ARGV[3] names the
// request. Returns {1, the request's time, the requests in the window} when
// admitted, else {0, microseconds until the oldest request leaves the
// window, the requests in the window}. The key expires a second after the
// window: a region no one calls leaves nothing behind.
//
// Classes (policy's reserve.go): ARGV[4] is the request's class
// (policy.Class: priority first, a retry before a first attempt), ARGV[6]
// the highest class. A request of a class over 0 that the window refuses
// claims, in the hash KEYS[2], the room that frees next for its class:
// until that moment and ARGV[5] microseconds more, the time its router
// takes to wake the waiting call and ask again. A request of a lower class
// asking while a claim of a higher one stands is refused without being
// counted: {2, microseconds until the claim ends, the claim's class}.
// Before the room frees the window refuses it anyway; in the moment after,
// the room is the waiting request's, whichever router it waits in.
var meterScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local win = tonumber(ARGV[1])
local class = tonumber(ARGV[4])
for c = tonumber(ARGV[6]), class + 1, -1 do
  local u = tonumber(redis.call('HGET', KEYS[2], tostring(c)))
  if u and u > now then
    return {2, u - now, c}
  end
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - win)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[1], now, ARGV[3])
  redis.call('PEXPIRE', KEYS[1], math.ceil(win / 1000) + 1000)
  return {1, now, redis.call('ZCARD', KEYS[1])}
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local free = tonumber(first[2]) + win
if class > 0 then
  redis.call('HSET', KEYS[2], ARGV[4], free + tonumber(ARGV[5]))
  redis.call('PEXPIRE', KEYS[2], math.ceil(win / 1000) + 1000)
end
return {0, free - now, redis.call('ZCARD', KEYS[1])}
`)

// NewMeter returns a meter with the store at o.URL. It does not connect
// until the first request.
func NewMeter(o MeterOptions) (*Meter, error) {
	ro, err := storeOptions("share meter", o.URL, o.Password)
	if err != nil {
		return nil, err
	}
	defaults.Positive(&o.Timeout, DefaultMeterTimeout)
	if !(o.Scale > 0) {
		o.Scale = 1
	}
	o.KeyPrefix = cmp.Or(o.KeyPrefix, DefaultMeterPrefix)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.OnState == nil {
		o.OnState = func(bool) {}
	}
	// A failed request is not retried: the router's share meters it.
	ro.MinIdleConns = 2
	bgo := *ro
	bgo.MinIdleConns = 0
	window := int64(float64(policy.MaxHeadroomWait.Microseconds()) / o.Scale)
	return &Meter{
		rdb: storeClient(ro, o.Timeout), bg: storeClient(&bgo, time.Duration(window)*time.Microsecond),
		id: o.ID, prefix: o.KeyPrefix, timeout: o.Timeout, scale: o.Scale, window: window, log: o.Logger,
		tick:       int64(float64(policy.MeterTick.Microseconds()) / o.Scale),
		onState:    o.OnState,
		nonce:      strconv.FormatUint(rand.Uint64(), 36) + ":",
		extensions: make(chan extension, extensionQueue), closed: make(chan struct{}),
	}, nil
}

// Close stops the updates and closes the connections to the store.
func (m *Meter) Close() error {
	close(m.closed)
	return errors.Join(m.rdb.Close(), m.bg.Close())
}

// windowNanos is one window on the pool's clock, in nanoseconds.
const windowNanos = int64(time.Second)

// take asks the store to admit one request of class c into key's
// window of limit requests, at now on the pool's clock. With SharedFull,
// wait is how long until the window has room, or, when the request gave
// way to a higher class's claim (yielded), until the claim ends; held is
// how many requests the window holds when the store answers (with
// SharedUnknown: 0; yielded: the class of the claim).
func (m *Meter) take(key string, limit int64, now int64, c policy.Class) (v policy.SharedVerdict, wait, held int64, yielded bool, ticket uint64) {
	probe := false
	if d := m.down.Load(); d != 0 {
		// One request a window tries the store; the others use the share.
		if now < d || !m.down.CompareAndSwap(d, now+windowNanos) {
			return policy.SharedUnknown, 0, 0, false, 0
		}
		probe = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.timeout)
	defer cancel()
	ticket = m.seq.Add(1)
	member := m.member(ticket)
	sent := time.Now()
	claim := m.tick + 2*m.rtt.Load()
	res, err := meterScript.Run(ctx, m.rdb, []string{key, key + claimsSuffix}, m.window, limit, member, int(c), claim, policy.Classes-1).Int64Slice()
	rtt := time.Since(sent)
	if err == nil && len(res) != 3 {
		err = fmt.Errorf("%d values in the answer", len(res))
	}
	if err != nil {
		if m.down.Swap(now+windowNanos) == 0 {
			m.log.Warn("share meter: the store does not answer; each region's quota is metered by this router's share", "router", m.id, "error", err)
			m.onState(false)
		}
		return policy.SharedUnknown, 0, 0, false, 0
	}
	m.rtt.Store(rtt.Microseconds())
	if probe {
		m.warm.Store(now + 2*windowNanos)
		m.down.Store(0)
		m.log.Info("share meter: the store answers again; quotas are metered in it", "router", m.id)
		m.onState(true)
	}
	if res[0] != 1 {
		return policy.SharedFull, int64(float64(res[1]*int64(time.Microsecond)) * m.scale), res[2], res[0] == 2, 0
	}
	m.extend(key, member, res[1]+rtt.Microseconds())
	if now < m.warm.Load() {
		return policy.SharedAdmittedIfLocal, 0, res[2], false, ticket
	}
	return policy.SharedAdmitted, 0, res[2], false, ticket
}

// member is the name in the store's windows of this router's request of
// ticket: unique across routers (the nonce) and requests (the sequence).
func (m *Meter) member(ticket uint64) string {
	return m.nonce + strconv.FormatUint(ticket, 36)
}

// claimsSuffix names, after a region's window key, the hash of the claims
// that requests of a higher class hold on its next room (meterScript). Its
// fields are classes (policy.Class). Routers of an earlier version kept
// claims of priorities (sheddable 0 to critical 2) under ":claims": the
// new name keeps the two apart while both run in a rolling update (each
// orders its own requests, as the other's were not there).
const claimsSuffix = ":classes"

// extend moves a request's time in the store to at (microseconds on the
// store's clock), later than the time the store admitted it.
//
// A region counts a request when it arrives, some time after the store
// admitted it: the answer's way back to the router and what the router does
// before it sends. With the same delay for every request, a window of one
// second on the store's clock is one on the region's; but the delays differ
// (a router waiting for a CPU hears back late), and a request admitted one
// second after another that was delayed more reaches the region within the
// same second of its clock: one request over the quota. So each admitted
// request is counted from when the router heard back, its admission time
// plus the round trip the router measured: it stays in the window that much
// longer, and the delays of the answers' way back no longer add up into the
// region's second. The update goes in the background, in batches, long
// before the request would leave the window; should it be lost, the request
// is counted from its admission, as before.
func (m *Meter) extend(key, member string, at int64) {
	m.queue(extension{key: key, member: member, at: at})
}

// add counts in key's window, in the background, a request that the
// router's share admitted while the store did not answer it in time: from
// when the store receives it, later than the router admitted it (the
// longer it counts, the less the other routers admit; never more). The
// store may already have counted it, when it ran the script but its answer
// came too late: counted twice then, a request fewer for a second, once per
// window that the store answers late (take asks it no more until then).
func (m *Meter) add(key string) (ticket uint64) {
	ticket = m.seq.Add(1)
	m.queue(extension{key: key, member: m.member(ticket), queued: time.Now()})
	return ticket
}

// forget removes from key's window, in the background, the request of
// ticket: the region did not count it (policy.Report.Uncounted). Writes
// leave in the order they were queued, and a batch removes after it adds,
// so a request is removed after it was counted, never before.
func (m *Meter) forget(key string, ticket uint64) {
	m.queue(extension{key: key, member: m.member(ticket), remove: true})
}

func (m *Meter) queue(e extension) {
	m.startExtender.Do(func() { go m.extender() })
	select {
	case m.extensions <- e:
	default: // a full queue drops the write
	}
}

// extension is a write for the extender: a request's later time in the
// store (at), a request to count from when the store receives it (queued,
// when the router queued it), a request to remove (remove), or a value to
// set for a while (set, handles.go).
type extension struct {
	key, member string
	at          int64
	queued      time.Time
	remove      bool
	set         time.Duration
}

// extensionQueue bounds the updates waiting to be sent; extensionBatch is
// the most sent in one round trip.
const (
	extensionQueue = 4096
	extensionBatch = 256
)

// addScript counts the requests ARGV[2..] in the windows KEYS (one each),
// from the store's clock now; ARGV[1] is the window, as for meterScript.
var addScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local win = tonumber(ARGV[1])
for i, k in ipairs(KEYS) do
  redis.call('ZADD', k, now, ARGV[i + 1])
  redis.call('PEXPIRE', k, math.ceil(win / 1000) + 1000)
end
return #KEYS
`)

// extender sends the queued writes, as many as are waiting in one
// pipeline, until Close. An add queued a window ago or more is dropped: the
// request it counts has left the region's window.
func (m *Meter) extender() {
	batch := make([]extension, 0, extensionBatch)
	var keys []string
	var args []any
	for {
		select {
		case <-m.closed:
			return
		case e := <-m.extensions:
			batch = append(batch[:0], e)
		}
	drain:
		for len(batch) < extensionBatch {
			select {
			case e := <-m.extensions:
				batch = append(batch, e)
			default:
				break drain
			}
		}
		window := time.Duration(m.window) * time.Microsecond
		ctx, cancel := context.WithTimeout(context.Background(), window)
		pipe := m.bg.Pipeline()
		keys, args = keys[:0], append(args[:0], m.window)
		for _, e := range batch {
			if e.remove {
				continue
			}
			if e.set > 0 {
				pipe.Set(ctx, e.key, e.member, e.set)
				continue
			}
			if !e.queued.IsZero() {
				if time.Since(e.queued) < window {
					keys, args = append(keys, e.key), append(args, e.member)
				}
				continue
			}
			// XX: a request that left the window stays out; GT: only later.
			pipe.ZAddArgs(ctx, e.key, redis.ZAddArgs{XX: true, GT: true, Members: []redis.Z{{Score: float64(e.at), Member: e.member}}})
		}
		if len(keys) > 0 {
			addScript.Eval(ctx, pipe, keys, args...)
		}
		for _, e := range batch {
			if e.remove {
				pipe.ZRem(ctx, e.key, e.member)
			}
		}
		_, _ = pipe.Exec(ctx)
		cancel()
	}
}

// state says what meters the request quotas at now (PoolShare.RequestQuotas).
func (m *Meter) state(now int64) string {
	switch {
	case m.down.Load() != 0:
		return "share: the store does not answer"
	case now < m.warm.Load():
		return "store and share"
	}
	return "store"
}

// poolMeter is a Meter bound to one pool: its regions' quotas, in whole
// requests a second, cut to the cluster's share (a share of a quota in a
// store that the clusters do not share), and its keys.
type poolMeter struct {
	m      *Meter
	limits atomic.Pointer[map[string]poolLimit]
	// absent is what the routers missing from the last epoch this router
	// read may send on their shares (Allocate's reserves): a router the
	// store does not answer sends it without the store's windows counting
	// it, so the windows leave it room. Nil: none.
	absent atomic.Pointer[absentReserves]
}

// absentReserves are the reserves of one epoch (reservesOf).
type absentReserves struct {
	shares   []float64
	rostered int
}

// poolLimit is one region's key and quota in the store.
type poolLimit struct {
	key   string
	limit int64
	// full is until when, on the pool's clock, the store said the window has
	// no room: the time its oldest request leaves it. Nothing can free room
	// earlier (other routers' requests only fill the window), so until then
	// a request is refused here, without a round trip: under overload most
	// requests find the quota full, and they do not all ask the store.
	full *atomic.Int64
	// seen is what the store last said the window held, for
	// SharedAnswer.Held.
	seen *lastSeen
}

// lastSeen is how many requests a region's window in the store held
// (count) when it last answered, at (the pool's clock; 0: told already, or
// never answered).
type lastSeen struct {
	count, at atomic.Int64
}

// note keeps the store's count of the window at now.
func (ls *lastSeen) note(count, now int64) {
	ls.count.Store(count)
	ls.at.Store(now)
}

// take is the part of limit that the window held at the store's last
// answer, once: 0 after the first call, and when that answer is a window
// old or more (its requests have left the region's window).
func (ls *lastSeen) take(limit, now int64) float64 {
	at := ls.at.Swap(0)
	if at == 0 || now-at >= windowNanos {
		return 0
	}
	return float64(ls.count.Load()) / float64(limit)
}

// TakeShared implements policy.SharedMeter. A region without a quota of at
// least one whole request a second is left to the router's own meter.
func (pm *poolMeter) TakeShared(region string, now int64, c policy.Class) policy.SharedAnswer {
	l, ok := (*pm.limits.Load())[region]
	if !ok {
		return policy.SharedAnswer{}
	}
	if until := l.full.Load(); now < until && pm.m.down.Load() == 0 {
		return policy.SharedAnswer{Verdict: policy.SharedFull, Wait: until - now}
	}
	limit := l.limit
	if a := pm.absent.Load(); a != nil {
		limit -= int64(reservedCalls(float64(l.limit), a.shares, a.rostered))
	}
	if limit < 1 {
		// The absent routers may send the whole quota: this router's share
		// meters what is left (none in the epoch's allocation).
		return policy.SharedAnswer{}
	}
	v, wait, held, yielded, ticket := pm.m.take(l.key, limit, now, c)
	switch {
	case yielded:
		// The window was not read: nothing is known of it.
		return policy.SharedAnswer{Verdict: v, Wait: wait, Yielded: true, Claimant: policy.Class(held)}
	case v == policy.SharedUnknown:
		return policy.SharedAnswer{Held: l.seen.take(l.limit, now)}
	case v == policy.SharedFull:
		l.full.Store(now + wait)
	}
	l.seen.note(held, now)
	return policy.SharedAnswer{Verdict: v, Wait: wait, Ticket: ticket}
}

// AdmittedLocally implements policy.SharedMeter: a request to a region
// with a quota in the store, admitted by the router's share, is counted in
// the store too (Meter.add).
func (pm *poolMeter) AdmittedLocally(region string, now int64) uint64 {
	if l, ok := (*pm.limits.Load())[region]; ok {
		return pm.m.add(l.key)
	}
	return 0
}

// Forget implements policy.SharedMeter: the request leaves the region's
// window in the store (Meter.forget), and the window is no longer taken as
// full here: it may have room now, which the store will say.
func (pm *poolMeter) Forget(region string, ticket uint64) {
	if l, ok := (*pm.limits.Load())[region]; ok {
		pm.m.forget(l.key, ticket)
		l.full.Store(0)
	}
}

// setAbsent keeps the reserves of the routers missing from the last epoch
// this router read.
func (pm *poolMeter) setAbsent(reserves []float64, rostered int) {
	if len(reserves) == 0 {
		pm.absent.Store(nil)
		return
	}
	pm.absent.Store(&absentReserves{shares: reserves, rostered: rostered})
}

// set takes the quotas of p, as the table gives them (not scaled by any
// replica share).
func (pm *poolMeter) set(p *table.Pool) {
	prefix := pm.m.prefix
	c := cluster(p)
	var old map[string]poolLimit
	if cur := pm.limits.Load(); cur != nil {
		old = *cur
	}
	limits := make(map[string]poolLimit, len(p.Regions))
	k := p.Key()
	for _, r := range p.Regions {
		n := floor(r.Capacity.RequestsPerSecond * c)
		if n < 1 || n > 1e9 {
			continue
		}
		l := poolLimit{key: prefix + k.Project + "/" + k.Publisher + "/" + k.Model + "|" + r.Name, limit: int64(n)}
		// What the store said of the same window holds; a new quota's
		// window may have room at once.
		if o, ok := old[r.Name]; ok && o.key == l.key && o.limit == l.limit {
			l.full, l.seen = o.full, o.seen
		} else {
			l.full, l.seen = new(atomic.Int64), new(lastSeen)
		}
		limits[r.Name] = l
	}
	pm.limits.Store(&limits)
}
