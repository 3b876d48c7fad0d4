package share

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/regionwarden/regionwarden/internal/defaults"
)

// Defaults of ExchangeOptions.
const (
	// DefaultEpoch is how long one epoch of published demand lasts on the
	// store's clock. Shares follow demand one to two epochs late.
	DefaultEpoch = 500 * time.Millisecond
	// DefaultStoreTimeout bounds one exchange, connecting included.
	DefaultStoreTimeout = 100 * time.Millisecond
	// DefaultKeyPrefix starts every key the exchange writes.
	DefaultKeyPrefix = "regionwarden:share:"
	// DefaultKeep is how long the store's roster keeps the last share a
	// router published: the hold (DefaultHold) and a minute more, beyond the
	// grow delay and the spread of the routers' clocks.
	DefaultKeep = DefaultHold + time.Minute
)

// ExchangeOptions configure an Exchange. Every zero field takes its default.
type ExchangeOptions struct {
	// URL is the store, redis://[user:password@]host:port/db (rediss:// for
	// TLS). Required.
	URL string
	// Password, when set, is the store's password, in place of the URL's:
	// for a password kept in a Secret rather than in the router's
	// arguments, which anyone who may read the pod sees.
	Password string
	// ID names this router among its peers; unique per pool and store.
	// Default: the host name (the pod's name in a cluster).
	ID string
	// Epoch is the length of an epoch on the store's clock. Default
	// DefaultEpoch; a replay at a compressed time scale shortens it.
	Epoch time.Duration
	// Timeout bounds one exchange. Default DefaultStoreTimeout.
	Timeout time.Duration
	// KeyPrefix starts every key. Default DefaultKeyPrefix; routers of
	// different clusters that share a store but not their capacity need
	// different prefixes.
	KeyPrefix string
	// Keep is how long the roster keeps the last share a router published,
	// for the others to hold it for the router while the store does not
	// answer it. It must be longer than every router's Options.Hold plus
	// its GrowDelay, on the same clock. Default DefaultKeep; a replay at a
	// compressed time scale shortens it with Epoch.
	Keep time.Duration
}

// Exchange publishes one router's demand per pool to a Redis or Valkey store
// and reads its peers'. It is a single round trip: one script that the store
// runs atomically, which stamps the write with the store's own clock into the
// current epoch and returns the previous epoch, now closed. No router can
// write into an epoch once the store's clock has left it, so every router
// that reads a closed epoch reads the same entries: the same snapshot, from
// which Allocate gives shares that add up to one.
//
// Keys expire after four epochs: a router that stops publishing drops out of
// the next epoch by itself; the last share it published stays in the pool's
// roster for Keep, for the others to reserve (Allocate). The keys are not
// declared to the script, so the store must not be a Redis Cluster (a single
// server, or a primary with replicas, as LiteLLM and Envoy's rate-limit
// service use it).
type Exchange struct {
	rdb     *redis.Client
	id      string
	epoch   time.Duration
	keep    int64 // epochs
	timeout time.Duration
	prefix  string
}

// exchangeScript writes this router's entries into the current epoch and
// returns the closed epoch before it, per pool, with the pool's roster.
//
// The roster (the key "held" of each pool) keeps, per router, the share it
// published last and the one it published in an earlier epoch before that:
// "epoch share epoch share", the newest first. Whatever router reads a closed
// epoch E, reading in epoch E+1, finds for every router the last share it
// published in an epoch up to E (the first pair, or the second once the
// router has written into E+1): the same for all readers, as the epoch is.
// A router's fields leave the roster keep epochs after its last write.
//
// KEYS[1]: the key prefix. ARGV[1]: epoch length in microseconds; ARGV[2]:
// the epochs the roster keeps; ARGV[3]: the router's ID; ARGV[4]: the
// replicas it counts; then pairs of pool and entry ("demand share calls";
// an earlier version's has no calls, and any fields a later version adds
// after them this one reads past: parsePeers). The script reads only the
// share.
// Returns the epoch number, then per pool a flat HGETALL of the closed epoch
// (field ID, value "replicas demand share calls") and one of the roster.
// Microseconds since 1970 fit a Lua number (a double) exactly until the
// year 2255.
var exchangeScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local len = tonumber(ARGV[1])
local keep = tonumber(ARGV[2])
local id = ARGV[3]
local e = math.floor(now / len)
local ttl = math.ceil(len * 4 / 1000)
local out = {tostring(e)}
for i = 5, #ARGV, 2 do
  local k = KEYS[1] .. ARGV[i] .. '|'
  redis.call('HSET', k .. e, id, ARGV[4] .. ' ' .. ARGV[i + 1])
  redis.call('PEXPIRE', k .. e, ttl)
  local r = k .. 'held'
  local share = string.match(ARGV[i + 1], '^%S+ (%S+)')
  local val = tostring(e) .. ' ' .. share .. ' -1 0'
  local cur = redis.call('HGET', r, id)
  if cur then
    local ce, cs, pe, ps = string.match(cur, '^(%S+) (%S+) (%S+) (%S+)$')
    if ce and tonumber(ce) < e then
      val = tostring(e) .. ' ' .. share .. ' ' .. ce .. ' ' .. cs
    elseif ce then
      val = tostring(e) .. ' ' .. share .. ' ' .. pe .. ' ' .. ps
    end
  end
  redis.call('HSET', r, id, val)
  local all = redis.call('HGETALL', r)
  for j = 1, #all, 2 do
    local fe = tonumber(string.match(all[j + 1], '^(%S+)'))
    if not fe or fe < e - keep then
      redis.call('HDEL', r, all[j])
    end
  end
  redis.call('PEXPIRE', r, math.ceil(len * (keep + 4) / 1000))
  out[#out + 1] = redis.call('HGETALL', k .. (e - 1))
  out[#out + 1] = redis.call('HGETALL', r)
end
return out
`)

// quiet discards go-redis's own log lines: a store that is down would log a
// dial failure four times a second. The controller logs the store's state
// once per change instead.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// NewExchange returns an exchange with the store at o.URL. It does not
// connect until the first exchange.
func NewExchange(o ExchangeOptions) (*Exchange, error) {
	ro, err := storeOptions("share store", o.URL, o.Password)
	if err != nil {
		return nil, err
	}
	var herr error
	if o.ID == "" {
		if o.ID, herr = os.Hostname(); herr != nil || o.ID == "" {
			return nil, errors.New("share store: no ID given and no host name")
		}
	}
	if strings.ContainsAny(o.ID, " \n") {
		return nil, fmt.Errorf("share store: ID %q holds a space", o.ID)
	}
	defaults.Positive(&o.Epoch, DefaultEpoch)
	defaults.Positive(&o.Timeout, DefaultStoreTimeout)
	defaults.Positive(&o.Keep, DefaultKeep)
	o.KeyPrefix = cmp.Or(o.KeyPrefix, DefaultKeyPrefix)
	// A failed exchange is not retried: the next one comes a tick later
	// with fresher demand. One exchange at a time: two connections.
	ro.PoolSize, ro.MinIdleConns = 2, 1
	return &Exchange{rdb: storeClient(ro, o.Timeout), id: o.ID, epoch: o.Epoch, keep: int64((o.Keep + o.Epoch - 1) / o.Epoch), timeout: o.Timeout, prefix: o.KeyPrefix}, nil
}

// storeOptions reads a store's URL, redis://[user:password@]host:port/db
// (rediss:// for TLS), for what (the errors' first words), with password,
// when set, in place of the URL's. An error names the URL without its
// password: one that does not parse as a URL is not quoted at all, as
// url.Parse's own error would quote it whole, password and all.
func storeOptions(what, rawURL, password string) (*redis.Options, error) {
	if rawURL == "" {
		return nil, fmt.Errorf("%s: no URL", what)
	}
	ro, err := redis.ParseURL(rawURL)
	if err != nil {
		u, perr := url.Parse(rawURL)
		if perr != nil {
			return nil, fmt.Errorf("%s: the URL does not parse; want redis://[user:password@]host:port/db", what)
		}
		// go-redis's own errors name a part of the URL, never its password.
		return nil, fmt.Errorf("%s %q: %w", what, u.Redacted(), err)
	}
	if password != "" {
		ro.Password = password
	}
	return ro, nil
}

// storeClient is a client of the store that ro describes, for the hot path
// or a tick: every wait (connecting, a free connection, each read and write)
// is bounded by timeout, nothing is retried, and the client's own logging is
// quiet.
func storeClient(ro *redis.Options, timeout time.Duration) *redis.Client {
	ro.DialTimeout, ro.ReadTimeout, ro.WriteTimeout = timeout, timeout, timeout
	ro.PoolTimeout = timeout
	ro.MaxRetries = -1
	ro.ContextTimeoutEnabled = true
	redis.SetLogger(quiet{})
	return redis.NewClient(ro)
}

// ID is this router's name among its peers.
func (x *Exchange) ID() string { return x.id }

// Close closes the connections to the store.
func (x *Exchange) Close() error { return x.rdb.Close() }

// Entry is what a router publishes for one pool.
type Entry struct {
	// Demand is its calls per second, admitted and refused.
	Demand float64
	// Share is the share it took from the last epoch, 0 if none.
	Share float64
	// Calls is how many calls Demand counts: the evidence it rests on.
	Calls uint64
}

// Exchange publishes this router's entries by pool, with the replicas it
// counts, into the current epoch, and returns the previous epoch's entries
// by pool, followed by the routers of the roster that epoch lacks, as
// absent peers. It takes at most the exchange's timeout.
func (x *Exchange) Exchange(ctx context.Context, replicas int, demand map[string]Entry) (map[string][]Peer, error) {
	ctx, cancel := context.WithTimeout(ctx, x.timeout)
	defer cancel()
	pools := make([]string, 0, len(demand))
	for p := range demand {
		pools = append(pools, p)
	}
	sort.Strings(pools)
	args := []any{x.epoch.Microseconds(), x.keep, x.id, replicas}
	for _, p := range pools {
		e := demand[p]
		args = append(args, p, strconv.FormatFloat(e.Demand, 'g', 6, 64)+" "+strconv.FormatFloat(e.Share, 'g', 9, 64)+" "+strconv.FormatUint(e.Calls, 10))
	}
	res, err := exchangeScript.Run(ctx, x.rdb, []string{x.prefix}, args...).Slice()
	if err != nil {
		return nil, fmt.Errorf("share store: %w", err)
	}
	if len(res) != 2*len(pools)+1 {
		return nil, fmt.Errorf("share store: %d answers for %d pools", len(res)-1, len(pools))
	}
	es, _ := res[0].(string)
	epoch, err := strconv.ParseInt(es, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("share store: epoch %q is not a number", es)
	}
	out := make(map[string][]Peer, len(pools))
	for i, p := range pools {
		fields, ok1 := res[2*i+1].([]any)
		roster, ok2 := res[2*i+2].([]any)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("share store: pool %s: unexpected answer %T, %T", p, res[2*i+1], res[2*i+2])
		}
		peers, err := parsePeers(fields)
		if err != nil {
			return nil, fmt.Errorf("share store: pool %s: %w", p, err)
		}
		absent, err := parseRoster(roster, epoch-1, x.keep, peers)
		if err != nil {
			return nil, fmt.Errorf("share store: pool %s: %w", p, err)
		}
		out[p] = append(peers, absent...)
	}
	return out, nil
}

// parseRoster reads a flat HGETALL of the roster (exchangeScript) for the
// closed epoch closed: the routers with no entry among peers whose last share
// published up to closed is at most keep epochs old, as absent peers, sorted
// by ID.
func parseRoster(fields []any, closed, keep int64, peers []Peer) ([]Peer, error) {
	in := make(map[string]bool, len(peers))
	for _, p := range peers {
		in[p.ID] = true
	}
	var out []Peer
	for i := 0; i+1 < len(fields); i += 2 {
		id, _ := fields[i].(string)
		val, _ := fields[i+1].(string)
		if in[id] {
			continue
		}
		f := strings.Fields(val)
		var v [4]float64
		bad := len(f) != 4
		for j := 0; !bad && j < 4; j++ {
			var err error
			v[j], err = strconv.ParseFloat(f[j], 64)
			bad = err != nil
		}
		if bad {
			return nil, fmt.Errorf("roster entry %q of %q is not \"epoch share epoch share\"", val, id)
		}
		// The newest pair published up to the closed epoch.
		e, share := int64(v[0]), v[1]
		if e > closed {
			e, share = int64(v[2]), v[3]
		}
		if e < 0 || e > closed || e < closed-keep {
			continue
		}
		if !(share >= 0 && share <= 1) {
			return nil, fmt.Errorf("roster entry %q of %q holds a share out of [0, 1]", val, id)
		}
		out = append(out, Peer{ID: id, Share: share, Absent: true})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// parsePeers reads a flat HGETALL of ID, "replicas demand share calls"
// pairs. An entry without calls is an earlier version's (Peer.Counted
// false).
// Fields after the calls are a later version's, and are read past: in a
// rolling upgrade the routers of both versions exchange through the same
// epochs, and an entry this version refused would fail its every exchange
// until the upgrade ended.
func parsePeers(fields []any) ([]Peer, error) {
	peers := make([]Peer, 0, len(fields)/2)
	for i := 0; i+1 < len(fields); i += 2 {
		id, _ := fields[i].(string)
		val, _ := fields[i+1].(string)
		f := strings.Fields(val)
		if len(f) < 3 {
			return nil, fmt.Errorf("entry %q of %q is not \"replicas demand share\"", val, id)
		}
		replicas, err1 := strconv.Atoi(f[0])
		demand, err2 := strconv.ParseFloat(f[1], 64)
		share, err3 := strconv.ParseFloat(f[2], 64)
		if err1 != nil || err2 != nil || err3 != nil || replicas < 1 || !(demand >= 0) || !(share >= 0 && share <= 1) {
			return nil, fmt.Errorf("entry %q of %q is not \"replicas demand share\"", val, id)
		}
		p := Peer{ID: id, Replicas: replicas, Demand: demand, Share: share}
		if len(f) > 3 {
			n, err := strconv.ParseUint(f[3], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("entry %q of %q: calls %q is not a count", val, id, f[3])
			}
			p.Calls, p.Counted = n, true
		}
		peers = append(peers, p)
	}
	sort.Slice(peers, func(i, j int) bool { return peers[i].ID < peers[j].ID })
	return peers, nil
}
