// Package metrics is the router's Prometheus instrumentation, on a registry
// of its own so that what /metrics serves is exactly what the router counts.
//
// Counters and histograms are recorded on the request path; the live state
// of every pool (ejections, panic, in-flight limits, throttle) is read from
// the policy's snapshots at scrape time, so the hot path pays nothing for it.
// Labels are bounded: pools and regions come from the routing table, outcomes,
// tiers, priorities and reasons are fixed words.
//
// Metrics never carry prompts, responses or credentials.
package metrics

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/regionwarden/regionwarden/router/policy"
)

// Namespace prefixes every metric name.
const Namespace = "regionwarden_router"

// latencyBuckets span a fast countTokens call to a long generation, in seconds.
var latencyBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// Metrics holds every metric the router records. It implements
// source.Observer, so table loads and refusals are counted where they happen.
// It is safe for concurrent use.
type Metrics struct {
	registry *prometheus.Registry

	storeOnce sync.Once
	storeUp   prometheus.Gauge // nil until ShareStoreUp

	requests        *prometheus.CounterVec
	requestDuration *prometheus.HistogramVec
	attempts        *prometheus.CounterVec
	attemptDuration *prometheus.HistogramVec
	retriesRefused  *prometheus.CounterVec
	shed            *prometheus.CounterVec
	inFlight        *prometheus.GaugeVec
	liveSessions    *prometheus.GaugeVec
	trafficType     *prometheus.CounterVec
	tokens          *prometheus.CounterVec
	callers         *prometheus.CounterVec
	callerRefusals  *prometheus.CounterVec
	tableLoads      prometheus.Counter
	tableRejections *prometheus.CounterVec
	tableInfo       *prometheus.GaugeVec

	pools *poolCollector

	mu       sync.Mutex // serializes tableInfo updates
	lastHash string
}

// counter, latency and gauge define one of the router's metrics, in its
// namespace; latency histograms share latencyBuckets.
func counter(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help}, labels)
}

func latency(name, help string, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: name, Help: help, Buckets: latencyBuckets,
	}, labels)
}

func gauge(name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: name, Help: help}, labels)
}

// New returns the router's metrics on a fresh registry that also carries the
// Go runtime and process collectors.
func New() *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		requests: counter("requests_total",
			"Requests answered, by pool, method and HTTP status code.",
			"pool", "method", "code"),
		requestDuration: latency("request_duration_seconds",
			"Time from a request's arrival to its last byte, all attempts included, by pool and method.",
			"pool", "method"),
		attempts: counter("attempts_total",
			"Attempts sent to regions, by pool, region, tier (what the attempt asked for: provisioned or shared) and outcome (success, capacity: a pay-as-you-go 429, provisioned_full: a 429 of a full PT, failure, caller_fault, cancelled).", //nolint:misspell // the policy's outcome label
			"pool", "region", "tier", "outcome"),
		attemptDuration: latency("attempt_duration_seconds",
			"Time one attempt spent with its region, by pool, region and tier.",
			"pool", "region", "tier"),
		retriesRefused: counter("retries_refused_total",
			"Retries the policy refused, by pool and reason (budget, attempts, deadline: the call's deadline passed, too_late: no region it may use has lately answered in the time left, capacity).",
			"pool", "reason"),
		shed: counter("shed_total",
			"Requests refused with 429 before any attempt, by pool, priority and reason (shed: over the concurrency share of the priority, or gave way to calls of a higher priority waiting for a full quota; over_capacity: no region has headroom).",
			"pool", "priority", "reason"),
		inFlight: gauge("in_flight_requests",
			"Requests being served, by pool.",
			"pool"),
		liveSessions: gauge("live_sessions",
			"Live API sessions being relayed (set up, not yet closed), by pool; they are not in in_flight_requests once set up.",
			"pool"),
		trafficType: counter("traffic_type_total",
			"Answers by the usageMetadata.trafficType the region reported (PROVISIONED_THROUGHPUT, ON_DEMAND, ...), by pool and region: what share provisioned capacity really served.",
			"pool", "region", "traffic_type"),
		tokens: counter("tokens_total",
			"Tokens of answered calls, by pool, region, tier (what the attempt asked for: provisioned, the region's PT, or shared, pay-as-you-go alone), "+
				"pay_go_tier (the pay-as-you-go tier it named: standard, priority, flex, or none for a PT called dedicated), "+
				"traffic_type (what the region says served it: PROVISIONED_THROUGHPUT, ON_DEMAND, ON_DEMAND_PRIORITY, ON_DEMAND_FLEX) "+
				"and direction (input: the prompt; output: candidates and thoughts).",
			"pool", "region", "tier", "pay_go_tier", "traffic_type", "direction"),
		callers: counter("caller_requests_total",
			"Requests admitted from callers the router authenticated as Kubernetes ServiceAccounts, by pool and the caller's namespace.",
			"pool", "caller_namespace"),
		callerRefusals: counter("caller_refusals_total",
			"Requests refused for who they came from, by pool and reason (unauthenticated: 401; forbidden: 403, a ServiceAccount the pool does not list; unavailable: 503, the token could not be checked).",
			"pool", "reason"),
		tableLoads: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Name: "table_loads_total",
			Help: "Routing tables that started serving.",
		}),
		tableRejections: counter("table_rejections_total",
			"Routing tables refused (the last good one kept serving), by reason.",
			"reason"),
		tableInfo: gauge("table_info",
			"1 for the hash of the routing table being served.",
			"hash"),
		pools: newPoolCollector(),
	}
	m.registry.MustRegister(
		m.requests, m.requestDuration, m.attempts, m.attemptDuration,
		m.retriesRefused, m.shed, m.inFlight, m.liveSessions, m.trafficType, m.tokens,
		m.callers, m.callerRefusals,
		m.tableLoads, m.tableRejections, m.tableInfo, m.pools,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// ShareStoreUp is the gauge of the share store (--share-store): 1 while it
// meters the regions' request quotas for all routers, 0 while it does not
// answer and this router meters its shares. It is registered on first use,
// so a router without a store has no such series.
func (m *Metrics) ShareStoreUp() prometheus.Gauge {
	m.storeOnce.Do(func() {
		m.storeUp = prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "share_store_up",
			Help: "1 while the share store meters the regions' request quotas for all routers; 0 while it does not answer and this router meters its shares.",
		})
		m.registry.MustRegister(m.storeUp)
	})
	return m.storeUp
}

// Registry is the registry the metrics are registered on.
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}

// Loaded counts a routing table that started serving and records its hash.
func (m *Metrics) Loaded(_, hash string) {
	m.tableLoads.Inc()
	m.setHash(hash)
}

// Rejected counts a refused routing table under its reason.
func (m *Metrics) Rejected(_, reason string, _ error) {
	m.tableRejections.WithLabelValues(reason).Inc()
}

func (m *Metrics) setHash(hash string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if hash == m.lastHash {
		return
	}
	if m.lastHash != "" {
		m.tableInfo.DeleteLabelValues(m.lastHash)
	}
	m.tableInfo.WithLabelValues(hash).Set(1)
	m.lastHash = hash
}

// Request counts one answered request.
func (m *Metrics) Request(pool, method string, code int, d time.Duration) {
	m.requests.WithLabelValues(pool, method, strconv.Itoa(code)).Inc()
	if pool != "" {
		m.requestDuration.WithLabelValues(pool, method).Observe(d.Seconds())
	}
}

// Attempt counts one attempt on a region and how long it took.
func (m *Metrics) Attempt(pool, region, tier string, o policy.Outcome, d time.Duration) {
	m.attempts.WithLabelValues(pool, region, tier, o.String()).Inc()
	m.attemptDuration.WithLabelValues(pool, region, tier).Observe(d.Seconds())
}

// RequestSeries returns the counter and the histogram Request records an
// answer of pool and method with code in, for a caller that binds them once.
func (m *Metrics) RequestSeries(pool, method string, code int) (prometheus.Counter, prometheus.Observer) {
	return m.requests.WithLabelValues(pool, method, strconv.Itoa(code)), m.requestDuration.WithLabelValues(pool, method)
}

// AttemptSeries returns the counter and the histogram Attempt records an
// attempt of pool in region of tier with outcome o in, for a caller that
// binds them once.
func (m *Metrics) AttemptSeries(pool, region, tier string, o policy.Outcome) (prometheus.Counter, prometheus.Observer) {
	return m.attempts.WithLabelValues(pool, region, tier, o.String()), m.attemptDuration.WithLabelValues(pool, region, tier)
}

// TrafficTypeSeries returns the counter TrafficType counts in, for a caller
// that binds it once.
func (m *Metrics) TrafficTypeSeries(pool, region, trafficType string) prometheus.Counter {
	return m.trafficType.WithLabelValues(pool, region, trafficType)
}

// Token directions, the direction label of TokenSeries.
const (
	DirectionInput  = "input"
	DirectionOutput = "output"
)

// TokenSeries returns the counter of tokens of pool in region, asked of
// tier and payGo ("" is none), served as trafficType, in direction, for a
// caller that binds it once.
func (m *Metrics) TokenSeries(pool, region, tier, payGo, trafficType, direction string) prometheus.Counter {
	if payGo == "" {
		payGo = "none"
	}
	return m.tokens.WithLabelValues(pool, region, tier, payGo, trafficType, direction)
}

// RetryRefused counts a retry the policy refused; reason is budget, attempts,
// deadline, too_late or capacity.
func (m *Metrics) RetryRefused(pool, reason string) {
	m.retriesRefused.WithLabelValues(pool, reason).Inc()
}

// Shed counts a request refused before any attempt; reason is shed or
// over_capacity.
func (m *Metrics) Shed(pool string, pr policy.Priority, reason string) {
	m.shed.WithLabelValues(pool, pr.String(), reason).Inc()
}

// Caller counts a request admitted from a ServiceAccount of namespace.
func (m *Metrics) Caller(pool, namespace string) {
	m.callers.WithLabelValues(pool, namespace).Inc()
}

// CallerRefused counts a request refused for who it came from; reason is
// unauthenticated, forbidden or unavailable.
func (m *Metrics) CallerRefused(pool, reason string) {
	m.callerRefusals.WithLabelValues(pool, reason).Inc()
}

// LiveSessions returns the gauge of a pool's Live sessions being relayed,
// to Inc and Dec around a session's relay.
func (m *Metrics) LiveSessions(pool string) prometheus.Gauge {
	return m.liveSessions.WithLabelValues(pool)
}

// InFlight returns the in-flight gauge of a pool, to Inc and Dec around a request.
func (m *Metrics) InFlight(pool string) prometheus.Gauge { return m.inFlight.WithLabelValues(pool) }

// TrafficType counts one answer by the traffic type that served it.
func (m *Metrics) TrafficType(pool, region, trafficType string) {
	m.trafficType.WithLabelValues(pool, region, trafficType).Inc()
}

// WatchPools makes every scrape read the live state of the pools that
// snapshots returns. Only the last function given is used.
func (m *Metrics) WatchPools(snapshots func() []policy.Snapshot) { m.pools.set(snapshots) }

// ForgetPool deletes every series of a pool that left the routing table, so
// that a router that served many pools over its life does not export them
// all forever.
func (m *Metrics) ForgetPool(pool string) {
	l := prometheus.Labels{"pool": pool}
	for _, v := range m.poolVecs() {
		v.DeletePartialMatch(l)
	}
}

// ForgetRegion deletes the series of a region that left a pool.
func (m *Metrics) ForgetRegion(pool, region string) {
	l := prometheus.Labels{"pool": pool, "region": region}
	for _, v := range []interface{ DeletePartialMatch(prometheus.Labels) int }{m.attempts, m.attemptDuration, m.trafficType, m.tokens} {
		v.DeletePartialMatch(l)
	}
}

// poolVecs are the metric vectors labeled by pool.
func (m *Metrics) poolVecs() []interface{ DeletePartialMatch(prometheus.Labels) int } {
	return []interface{ DeletePartialMatch(prometheus.Labels) int }{
		m.requests, m.requestDuration, m.attempts, m.attemptDuration,
		m.retriesRefused, m.shed, m.inFlight, m.liveSessions, m.trafficType, m.tokens,
		m.callers, m.callerRefusals,
	}
}
