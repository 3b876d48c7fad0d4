package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/aiplatform/apiv1/aiplatformpb"
	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/genproto/googleapis/api/httpbody"
	"google.golang.org/grpc/codes"

	"github.com/regionwarden/regionwarden/internal/defaults"
	"github.com/regionwarden/regionwarden/router/auth"
	"github.com/regionwarden/regionwarden/router/metrics"
	"github.com/regionwarden/regionwarden/router/policy"
	"github.com/regionwarden/regionwarden/router/share"
	"github.com/regionwarden/regionwarden/router/source"
	"github.com/regionwarden/regionwarden/router/table"
	"github.com/regionwarden/regionwarden/router/upstream"
)

// Defaults of Options.
const (
	// DefaultRequestTimeout bounds a request, every attempt included, when the
	// caller's context sets no earlier deadline: long enough for a long
	// generation.
	DefaultRequestTimeout = 5 * time.Minute
	// DefaultMaxBodyBytes bounds a request body: Vertex AI takes up to 20 MB
	// of inline data, plus the JSON around it.
	DefaultMaxBodyBytes = 32 << 20
	// DefaultMaxBodyBytesInFlight bounds the request bodies held at once when
	// the process has no memory limit to take a share of.
	DefaultMaxBodyBytesInFlight = 256 << 20
	// DefaultBodyReadTimeout bounds reading a request body: a caller in the
	// cluster sends the largest body allowed in well under a second.
	DefaultBodyReadTimeout = 30 * time.Second
	// DefaultWriteTimeout bounds each write of an answer to the caller: a
	// caller that stops reading a stream for this long is cut off.
	DefaultWriteTimeout = 30 * time.Second
)

// HeaderPriority is the request header that sets a call's priority for
// shedding: critical, default or sheddable. Absent means default. Over gRPC
// it is the metadata key x-regionwarden-priority. It is never sent on.
const HeaderPriority = upstream.HeaderPriority

// Upstream calls one region for one attempt. *upstream.Clients implements
// it: the call goes to the region's endpoint with its location, the request
// type its tier asks for, and the credentials the Authorizer chooses.
type Upstream interface {
	// Send makes a REST call and returns a 200 answer to relay, or an error
	// (*upstream.Error for the region's other answers).
	Send(ctx context.Context, t upstream.Target, r *upstream.Request) (*http.Response, error)
	// GenerateContent, StreamGenerateContent and CountTokens make the gRPC
	// calls of the same names.
	GenerateContent(ctx context.Context, req *aiplatformpb.GenerateContentRequest, t upstream.Target) (*aiplatformpb.GenerateContentResponse, error)
	StreamGenerateContent(ctx context.Context, req *aiplatformpb.GenerateContentRequest, t upstream.Target) (aiplatformpb.PredictionService_StreamGenerateContentClient, error)
	CountTokens(ctx context.Context, req *aiplatformpb.CountTokensRequest, t upstream.Target) (*aiplatformpb.CountTokensResponse, error)
	// ComputeTokens, Predict and EmbedContent make the gRPC calls of those
	// names.
	ComputeTokens(ctx context.Context, req *aiplatformpb.ComputeTokensRequest, t upstream.Target) (*aiplatformpb.ComputeTokensResponse, error)
	Predict(ctx context.Context, req *aiplatformpb.PredictRequest, t upstream.Target) (*aiplatformpb.PredictResponse, error)
	EmbedContent(ctx context.Context, req *aiplatformpb.EmbedContentRequest, t upstream.Target) (*aiplatformpb.EmbedContentResponse, error)
	// RawPredict and StreamRawPredict make a partner model's gRPC calls
	// (Claude's), on the region of t.
	RawPredict(ctx context.Context, req *aiplatformpb.RawPredictRequest, t upstream.Target) (*httpbody.HttpBody, error)
	StreamRawPredict(ctx context.Context, req *aiplatformpb.StreamRawPredictRequest, t upstream.Target) (aiplatformpb.PredictionService_StreamRawPredictClient, error)
	// Retain keeps the connections of the endpoints in keep and closes the
	// others once their calls have ended.
	Retain(keep map[string]bool)
	// CallersCredentials reports whether calls carry their callers' own
	// credentials (upstream.Report).
	CallersCredentials() bool
	// Forward sends a call outside routing to one endpoint as it came and
	// returns its answer, whatever its status (caches.go).
	Forward(ctx context.Context, endpoint, callerAuthorization string, p *upstream.Passthrough) (*http.Response, error)
	// Caches readies a GenAiCacheService call to one endpoint, outside
	// routing (caches.go).
	Caches(ctx context.Context, endpoint, callerAuthorization, routing string) (aiplatformpb.GenAiCacheServiceClient, context.Context, func(), error)
	// Live opens a Live API session's websocket with the region of t
	// (live.go).
	Live(ctx context.Context, t upstream.Target, version string, header http.Header) (*websocket.Conn, error)
}

// Options configures a Server. Every zero field but Upstream takes its default.
type Options struct {
	// Upstream calls the regions. Required.
	Upstream Upstream
	// Metrics records requests, attempts and pool state. Default: new metrics
	// on a registry of their own.
	Metrics *metrics.Metrics
	// Logger receives request and table logs. Default slog.Default().
	Logger *slog.Logger
	// Now is the policy's clock. Default time.Now.
	Now func() time.Time
	// ClockScale is how many times faster than real time Now runs, so that a
	// request's real-time deadline is read right on the policy's clock.
	// Default 1; see ScaledClock.
	ClockScale float64
	// Sleep waits d on the policy's clock, or until ctx is done and then
	// returns its error: how a call waits for a full quota to have room
	// (policy.Call.PickWaiting). Default a timer, scaled by ClockScale.
	Sleep func(ctx context.Context, d time.Duration) error
	// Seed seeds the policies' random choices; each pool derives its own from
	// it and its key. Default 0: seeded from the clock at New.
	Seed uint64
	// RequestTimeout bounds a request, all attempts included, unless the
	// request's context ends earlier. Default DefaultRequestTimeout.
	RequestTimeout time.Duration
	// MaxBodyBytes bounds a request body; a larger one is answered 413.
	// Default DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// MaxBodyBytesInFlight bounds the request bodies the router holds at
	// once, all requests together; a body that does not fit is answered 429
	// with Retry-After before it is read. Default: a quarter of the Go
	// memory limit (GOMEMLIMIT) when one is set, else
	// DefaultMaxBodyBytesInFlight; never less than MaxBodyBytes.
	MaxBodyBytesInFlight int64
	// BodyReadTimeout bounds reading a request body; a caller slower than
	// that is answered 408 and cut off. Default DefaultBodyReadTimeout.
	BodyReadTimeout time.Duration
	// WriteTimeout bounds each write of an answer (each chunk of a stream);
	// a caller that does not take it in time is cut off, and its call ends
	// and frees its place. Default DefaultWriteTimeout.
	WriteTimeout time.Duration
	// TracerProvider makes the spans of calls (a server span per call, a
	// client span per attempt). Default the global one
	// (otel.GetTracerProvider), which records nothing until
	// internal/tracing.Setup installs one. A noop.TracerProvider turns
	// tracing off altogether: no span is started, and a caller's
	// traceparent goes on as it came, with its other headers.
	TracerProvider trace.TracerProvider
	// Propagator reads the caller's trace context (W3C traceparent) from its
	// headers. Default the global one (otel.GetTextMapPropagator).
	Propagator propagation.TextMapPropagator
	// Auth decides who each call is from, once its pool is known and before
	// it is admitted or its body read, and caps the priority it may claim.
	// Nil checks nobody and caps nothing: tests of routing alone.
	Auth *auth.Authenticator
	// Shares, when set, is the router's share of each pool's capacity: it
	// applies the source's tables to the server scaled by the shares, counts
	// each pool's calls (admitted or refused) as its demand, and /debug/pools
	// shows the shares in force. Nil: the router meters whole capacities.
	Shares *share.Controller
	// Refusals are the table source's standing refusals, which /debug/pools
	// shows beside the table being served. Default none.
	Refusals func() []source.Refusal
}

// Server routes Vertex AI calls to the regions of their pool. Make one with
// New, give it tables with Apply and serve Handler. It is safe for concurrent
// use; a request takes no lock.
type Server struct {
	up           Upstream
	metrics      *metrics.Metrics
	log          *slog.Logger
	now          func() time.Time
	scale        float64
	sleep        func(context.Context, time.Duration) error // waits for headroom on the policy's clock (policy.Call.PickWaiting)
	seed         uint64
	timeout      time.Duration
	maxBody      int64
	bodies       budget
	bodyTimeout  time.Duration
	writeTimeout time.Duration
	budget       *policy.Budget
	tracer       trace.Tracer // nil: tracing off
	propagator   propagation.TextMapPropagator
	auth         *auth.Authenticator
	callersCreds bool // calls carry their callers' own credentials
	shares       *share.Controller
	refusals     func() []source.Refusal

	live     liveSessions            // the Live sessions being relayed (live.go)
	handles  liveHandles             // the resumption handles every router relayed; nil without a share store
	state    atomic.Pointer[routing] // nil until the first Apply
	draining atomic.Bool             // Drain was called: not ready
	mu       sync.Mutex              // serializes Apply
}

// routing is one applied table: the pools by key. It never changes once
// published; Apply publishes a new one.
type routing struct {
	hash  string
	pools map[table.Key]*poolEntry
}

// poolEntry is one pool of an applied table.
type poolEntry struct {
	router   *policy.Pool
	table    table.Pool // the pool as applied, defaults filled
	label    string     // metric label: project/publisher/model
	inFlight prometheus.Gauge
	series   *series
	demand   *share.Demand // the pool's calls, for its share; nil without shares

	// calls counts the requests holding the entry; once the pool has left
	// the table (retired), the last of them deletes its metric series.
	calls   atomic.Int64
	retired atomic.Bool
	forget  sync.Once
	s       *Server
}

// hold counts a request on the pool.
func (e *poolEntry) hold() { e.calls.Add(1) }

// release ends a request on the pool; the last request on a pool that left
// the table deletes its metric series.
func (e *poolEntry) release() {
	if e.calls.Add(-1) == 0 && e.retired.Load() {
		e.retire()
	}
}

// retire deletes the pool's metric series, once, unless a later table
// brought the pool back.
func (e *poolEntry) retire() {
	e.forget.Do(func() {
		if e.s.lookupEntry(e.table.Key()) == nil {
			e.s.metrics.ForgetPool(e.label)
		}
	})
}

// New returns a server that serves no pool until Apply.
func New(opts Options) (*Server, error) {
	if opts.Upstream == nil {
		return nil, errors.New("server: Options.Upstream is required")
	}
	if opts.Metrics == nil {
		opts.Metrics = metrics.New()
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	defaults.Positive(&opts.ClockScale, 1)
	if opts.Sleep == nil {
		opts.Sleep = scaledSleep(opts.ClockScale)
	}
	opts.Seed = cmp.Or(opts.Seed, uint64(time.Now().UnixNano()))
	defaults.Positive(&opts.RequestTimeout, DefaultRequestTimeout)
	defaults.Positive(&opts.MaxBodyBytes, DefaultMaxBodyBytes)
	defaults.Positive(&opts.MaxBodyBytesInFlight, defaultBodiesInFlight())
	opts.MaxBodyBytesInFlight = max(opts.MaxBodyBytesInFlight, opts.MaxBodyBytes)
	defaults.Positive(&opts.BodyReadTimeout, DefaultBodyReadTimeout)
	defaults.Positive(&opts.WriteTimeout, DefaultWriteTimeout)
	if opts.TracerProvider == nil {
		opts.TracerProvider = otel.GetTracerProvider()
	}
	if opts.Propagator == nil {
		opts.Propagator = otel.GetTextMapPropagator()
	}
	s := &Server{
		up:           opts.Upstream,
		metrics:      opts.Metrics,
		log:          opts.Logger,
		now:          opts.Now,
		scale:        opts.ClockScale,
		sleep:        opts.Sleep,
		seed:         opts.Seed,
		timeout:      opts.RequestTimeout,
		maxBody:      opts.MaxBodyBytes,
		bodies:       budget{max: opts.MaxBodyBytesInFlight},
		bodyTimeout:  opts.BodyReadTimeout,
		writeTimeout: opts.WriteTimeout,
		budget:       policy.NewBudget(),
		propagator:   opts.Propagator,
		auth:         opts.Auth,
		callersCreds: opts.Upstream.CallersCredentials(),
		shares:       opts.Shares,
		handles:      handlesOf(opts.Shares),
		refusals:     opts.Refusals,
	}
	if _, off := opts.TracerProvider.(noop.TracerProvider); !off {
		s.tracer = opts.TracerProvider.Tracer(tracerName)
	}
	s.metrics.WatchPools(s.Snapshots)
	return s, nil
}

// Metrics returns the server's metrics.
func (s *Server) Metrics() *metrics.Metrics { return s.metrics }

// MaxBodyBytesInFlight is the bound on request bodies held at once.
func (s *Server) MaxBodyBytesInFlight() int64 { return s.bodies.max }

// Apply installs table t. A pool already served is updated in place and keeps
// the live state of its regions still present; a new pool starts fresh; a
// pool that left the table is dropped (requests holding it finish on it),
// and its metric series are deleted once they have. Connections to endpoints
// no pool names any more are closed once their calls end. A pool the policy
// refuses keeps its previous config, or is not served if it is new; the error
// names it. t must not be modified afterwards.
func (s *Server) Apply(t *table.Table) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var old map[table.Key]*poolEntry
	if cur := s.state.Load(); cur != nil {
		old = cur.pools
	}
	next := &routing{hash: t.Hash(), pools: make(map[table.Key]*poolEntry, len(t.Pools))}
	var errs []error
	for _, tp := range t.Pools {
		key := tp.Key()
		label := metrics.PoolLabel(key.Project, key.Publisher, key.Model)
		var router *policy.Pool
		e := old[key]
		if e != nil {
			router = e.router
			if err := router.Update(tp); err != nil {
				errs = append(errs, fmt.Errorf("pool %s: %w", label, err))
				next.pools[key] = e
				continue
			}
		} else {
			p, err := policy.New(tp, policy.Options{Now: s.now, Seed: s.seed ^ keySeed(label), Budget: s.budget, Logger: s.log})
			if err != nil {
				errs = append(errs, fmt.Errorf("pool %s: %w", label, err))
				continue
			}
			if s.shares != nil {
				// With a meter in the share store, the pool's quotas are
				// metered there for every router (share.Meter).
				p.SetSharedMeter(s.shares.SharedMeter(key))
			}
			router = p
		}
		ne := s.entry(router, tp, label)
		if e != nil {
			s.forgetRegions(e, ne)
			// Requests still holding the old entry count on it; the pool
			// stays, so its series do too.
		}
		next.pools[key] = ne
	}
	keep := map[string]bool{}
	for _, e := range next.pools {
		for _, r := range e.table.Regions {
			keep[r.Endpoint] = true
		}
	}
	s.state.Store(next)
	s.up.Retain(keep)
	for key, e := range old {
		if _, kept := next.pools[key]; !kept {
			s.log.Info("pool left the routing table", "pool", e.label)
			e.retired.Store(true)
			if e.calls.Load() == 0 {
				e.retire()
			}
		}
	}
	// A share that moves applies the same pools with other capacities, up to
	// a few times a second: logged at debug level. A change of pools is news.
	level := slog.LevelDebug
	if len(old) != len(next.pools) {
		level = slog.LevelInfo
	}
	for key := range next.pools {
		if old[key] == nil {
			level = slog.LevelInfo
		}
	}
	s.log.Log(context.Background(), level, "routing table applied", "hash", next.hash, "pools", len(next.pools))
	return errors.Join(errs...)
}

// forgetRegions deletes the metric series of the regions of old that next
// no longer has.
func (s *Server) forgetRegions(old, next *poolEntry) {
	for _, r := range old.table.Regions {
		found := false
		for _, n := range next.table.Regions {
			found = found || n.Name == r.Name
		}
		if !found {
			s.metrics.ForgetRegion(old.label, r.Name)
		}
	}
}

// entry builds the poolEntry of router for table pool tp.
func (s *Server) entry(router *policy.Pool, tp table.Pool, label string) *poolEntry {
	// The regions are copied before Default sorts them: the applied table is
	// shared with the source.
	tp.Regions = append([]table.Region(nil), tp.Regions...)
	tp.Default()
	e := &poolEntry{
		router:   router,
		table:    tp,
		label:    label,
		inFlight: s.metrics.InFlight(label),
		series:   newSeries(s.metrics, label, tp.Regions),
		s:        s,
	}
	if s.shares != nil {
		e.demand = s.shares.Demand(tp.Key())
	}
	return e
}

// keySeed spreads the server's seed over pools.
func keySeed(label string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(label))
	return h.Sum64()
}

// Ready reports whether the router has a pool to route: a table has been
// applied and it holds at least one pool the policy took, and it is not
// draining.
func (s *Server) Ready() bool {
	st := s.state.Load()
	return st != nil && len(st.pools) > 0 && !s.draining.Load()
}

// Drain makes the router unready for good (/readyz answers 503), while it
// goes on serving every call it is sent: the first step of a shutdown, so
// that callers are moved to other routers before it stops listening.
func (s *Server) Drain() { s.draining.Store(true) }

// lookup returns the pool for key, held for the request, or nil. The caller
// must release a pool it got.
func (s *Server) lookup(key table.Key) *poolEntry {
	e := s.lookupEntry(key)
	if e != nil {
		e.hold()
	}
	return e
}

// lookupEntry returns the pool served for key, or nil.
func (s *Server) lookupEntry(key table.Key) *poolEntry {
	if st := s.state.Load(); st != nil {
		return st.pools[key]
	}
	return nil
}

// Snapshots returns the live state of every pool, sorted by project,
// publisher and model.
func (s *Server) Snapshots() []policy.Snapshot {
	st := s.state.Load()
	if st == nil {
		return nil
	}
	out := make([]policy.Snapshot, 0, len(st.pools))
	for _, e := range st.pools {
		out = append(out, e.router.Snapshot())
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return metrics.PoolLabel(a.Project, a.Publisher, a.Model) < metrics.PoolLabel(b.Project, b.Publisher, b.Model)
	})
	return out
}

// request is the policy request for a call of priority pr under ctx: its
// real-time deadline read onto the policy's clock.
func (s *Server) request(ctx context.Context, pr policy.Priority) policy.Request {
	req := policy.Request{Priority: pr}
	if d, ok := ctx.Deadline(); ok {
		req.Deadline = s.now().Add(time.Duration(float64(time.Until(d)) * s.scale))
	}
	return req
}

// Handler serves the Vertex AI surface and the operations endpoints on one
// address. APIHandler and OpsHandler serve them apart.
func (s *Server) Handler() http.Handler {
	ops := http.NewServeMux()
	s.routeOps(ops)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Calls of the Vertex surface skip the mux; it serves the operations
		// endpoints alone, and any other path is the surface's 404.
		if r.Method != http.MethodPost {
			switch r.URL.Path {
			case "/metrics", "/debug/pools", "/healthz", "/readyz":
				ops.ServeHTTP(w, r)
				return
			}
		}
		s.serveREST(w, r)
	})
}

// APIHandler serves the Vertex AI surface alone.
func (s *Server) APIHandler() http.Handler { return http.HandlerFunc(s.serveREST) }

// OpsHandler serves /metrics, /debug/pools, /healthz and /readyz alone.
func (s *Server) OpsHandler() http.Handler {
	mux := http.NewServeMux()
	s.routeOps(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, codes.NotFound, "The requested URL was not found on this server.", 0)
	})
	return mux
}

func (s *Server) routeOps(mux *http.ServeMux) {
	mux.Handle("GET /metrics", s.bounded(s.metrics.Handler()))
	mux.Handle("GET /debug/pools", s.bounded(http.HandlerFunc(s.serveDebugPools)))
	mux.Handle("GET /healthz", s.bounded(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})))
	mux.Handle("GET /readyz", s.bounded(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		switch {
		case s.draining.Load():
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		case !s.Ready():
			http.Error(w, "no routing pool loaded", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})))
}

// bounded gives the answers of h the write timeout: a connection may carry
// an expired deadline from its previous request.
func (s *Server) bounded(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.writeTimeout))
		h.ServeHTTP(w, r)
	})
}

// debugPools is the body of /debug/pools.
type debugPools struct {
	// TableHash is the hash of the table applied last, as its source gave it
	// (the ConfigMap's annotation), before shares scaled it; "" before the
	// first.
	TableHash string `json:"tableHash"`
	// RefusedTables are the tables refused and not replaced since by a good
	// one from the same origin: what they would change is not served.
	RefusedTables []source.Refusal  `json:"refusedTables"`
	Pools         []policy.Snapshot `json:"pools"`
	// Shares are the shares of the pools' capacity this router meters, and
	// where they come from; absent when the router meters whole capacities.
	Shares []share.PoolShare `json:"shares,omitempty"`
}

func (s *Server) serveDebugPools(w http.ResponseWriter, _ *http.Request) {
	d := debugPools{Pools: s.Snapshots(), RefusedTables: []source.Refusal{}}
	if s.refusals != nil {
		d.RefusedTables = s.refusals()
	}
	if st := s.state.Load(); st != nil {
		d.TableHash = st.hash
	}
	if s.shares != nil {
		d.TableHash, d.Shares = s.shares.TableHash(), s.shares.Shares()
	}
	if d.Pools == nil {
		d.Pools = []policy.Snapshot{}
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(d)
}
