package gcp

import (
	"cmp"
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/regionwarden/regionwarden/internal/defaults"
)

// Cache defaults.
const (
	// DefaultCacheTTL is how long a good answer is served when CacheOptions.TTL is zero.
	DefaultCacheTTL = time.Minute
	// DefaultErrorTTL is how long a failure is served when CacheOptions.ErrorTTL is zero.
	DefaultErrorTTL = 5 * time.Second
)

// CacheOptions configure a CachedSource. Every zero value means the default.
type CacheOptions struct {
	// TTL is how long a project's answer is served before the next caller asks
	// again; set it to the verification interval. Zero means DefaultCacheTTL.
	TTL time.Duration
	// ErrorTTL is how long a failed answer is served, so that callers retrying
	// during an outage still make one call per project per ErrorTTL. Zero
	// means DefaultErrorTTL; negative means failures are not cached: the next
	// caller after a failure makes a new call (concurrent callers still share
	// the failing one).
	ErrorTTL time.Duration
	// FetchTimeout bounds a shared call, which does not end when the caller
	// that started it gives up; zero means DefaultTimeout.
	FetchTimeout time.Duration
	// Now is the clock for expiry; nil means time.Now.
	Now func() time.Time
}

// CachedSource shares a Source's answers per project: an answer is served for
// a TTL, and callers that ask for the same project while a call is in flight
// wait for that call instead of making their own. So the calls it makes depend
// on the projects asked for and the TTL, never on the number of callers. Every
// caller gets its own copy of the facts. It is safe for concurrent use.
type CachedSource struct {
	src Source
	o   CacheOptions

	mu      sync.Mutex
	entries map[string]*cacheEntry
}

// cacheEntry is one project's answer, or the call that will give it. Fields
// other than done are written once, before done is closed, and read only after.
type cacheEntry struct {
	done    chan struct{}
	facts   *ProjectFacts
	err     error
	expires time.Time
	// joined counts the callers that waited for this call. Guarded by
	// CachedSource.mu.
	joined int
}

var _ Source = (*CachedSource)(nil)

// NewCachedSource wraps src.
func NewCachedSource(src Source, o CacheOptions) *CachedSource {
	defaults.Positive(&o.TTL, DefaultCacheTTL)
	o.ErrorTTL = cmp.Or(o.ErrorTTL, DefaultErrorTTL)
	defaults.Positive(&o.FetchTimeout, DefaultTimeout)
	if o.Now == nil {
		o.Now = time.Now
	}
	return &CachedSource{src: src, o: o, entries: map[string]*cacheEntry{}}
}

// ProvisionedThroughput returns the project's cached facts, or joins or starts
// the call that reads them. A caller whose ctx ends stops waiting; the shared
// call goes on for the others.
func (c *CachedSource) ProvisionedThroughput(ctx context.Context, project string) (*ProjectFacts, error) {
	c.mu.Lock()
	e := c.entries[project]
	answer := "cached"
	// An entry in flight is joined; a settled one is served until it expires.
	if e == nil || (e.settled() && !c.o.Now().Before(e.expires)) {
		e = &cacheEntry{done: make(chan struct{})}
		c.entries[project] = e
		answer = "fetched"
		go c.fetch(context.WithoutCancel(ctx), project, e)
	}
	if !e.settled() {
		e.joined++
		if answer == "cached" {
			answer = "joined"
		}
	}
	c.mu.Unlock()
	// The caller's span says whether this reconcile asked GCP or shared an
	// answer: a trace without a Cloud Monitoring call under it is not a gap.
	trace.SpanFromContext(ctx).AddEvent("gcp facts", trace.WithAttributes(
		attribute.String("cloud.account.id", project), attribute.String("regionwarden.gcp.answer", answer)))

	select {
	case <-e.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if e.err != nil {
		return nil, e.err
	}
	return e.facts.clone(), nil
}

// Forget drops the project's answer, so the next caller asks again. A call in
// flight is still shared by those already waiting for it.
func (c *CachedSource) Forget(project string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, project)
}

// joined is how many callers waited for the project's current call.
func (c *CachedSource) joined(project string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.entries[project]; e != nil {
		return e.joined
	}
	return 0
}

func (e *cacheEntry) settled() bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}

// fetch makes the shared call and settles e.
func (c *CachedSource) fetch(ctx context.Context, project string, e *cacheEntry) {
	ctx, cancel := context.WithTimeout(ctx, c.o.FetchTimeout)
	defer cancel()
	facts, err := c.src.ProvisionedThroughput(ctx, project)

	c.mu.Lock()
	defer c.mu.Unlock()
	e.facts, e.err = facts, err
	ttl := c.o.TTL
	if err != nil {
		ttl = c.o.ErrorTTL
	}
	e.expires = c.o.Now().Add(ttl)
	if ttl < 0 && c.entries[project] == e {
		delete(c.entries, project)
	}
	close(e.done)
}

// IntervalCache shares a Source's answers among callers that each accept
// answers up to some age, such as a verification or a discovery interval: one
// CachedSource per age, with the age as its TTL. Callers that ask about one
// project and accept the same age share one call per age, and no caller is
// served an answer older than it accepts. It is safe for concurrent use.
type IntervalCache struct {
	src          Source
	errorTTL     time.Duration
	fetchTimeout time.Duration
	now          func() time.Time

	mu    sync.Mutex
	byAge map[time.Duration]*CachedSource
}

// NewIntervalCache wraps src. A failed answer is served for errorTTL, or for
// the age asked for when that is shorter, so callers retrying during an outage
// make one call per project per errorTTL. fetchTimeout bounds one shared call
// (CacheOptions.FetchTimeout; zero means DefaultTimeout). now is the clock for
// expiry; nil means time.Now.
func NewIntervalCache(src Source, errorTTL, fetchTimeout time.Duration, now func() time.Time) *IntervalCache {
	return &IntervalCache{src: src, errorTTL: errorTTL, fetchTimeout: fetchTimeout, now: now, byAge: map[time.Duration]*CachedSource{}}
}

// ProjectFacts returns the project's facts, no older than maxAge.
func (c *IntervalCache) ProjectFacts(ctx context.Context, project string, maxAge time.Duration) (*ProjectFacts, error) {
	c.mu.Lock()
	cs := c.byAge[maxAge]
	if cs == nil {
		cs = NewCachedSource(c.src, CacheOptions{TTL: maxAge, ErrorTTL: min(maxAge, c.errorTTL), FetchTimeout: c.fetchTimeout, Now: c.now})
		c.byAge[maxAge] = cs
	}
	c.mu.Unlock()
	return cs.ProvisionedThroughput(ctx, project)
}
