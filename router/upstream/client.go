package upstream

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	aiplatform "cloud.google.com/go/aiplatform/apiv1"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/regionwarden/regionwarden/router/table"
)

// Metadata keys that pick the capacity of a call (table.HeaderRequestType
// and table.HeaderSharedRequestType), as gRPC carries them, in lower case.
const (
	RequestTypeHeader       = "x-vertex-ai-llm-request-type"
	SharedRequestTypeHeader = "x-vertex-ai-llm-shared-request-type"
)

// userAgent names the router in the calls it makes.
const userAgent = "regionwarden-router"

// Reconnect is how a gRPC connection to a region tries again after the
// region refused or dropped it: at once after a connection that worked,
// then after 100 ms, growing to at most a second between attempts.
//
// gRPC's default grows to two minutes, and while it waits every call on the
// connection fails at once without reaching the region: a region down for a
// few minutes would be found back only up to two minutes after it recovered,
// its probes failing in this process all the while, and a provisioned region
// would stay demoted with its paid capacity unused. Whether and how often a
// failing region gets calls is the routing policy's to decide (its probes, a
// few a second); the transport must not hide a recovery behind a pause of its
// own longer than that. A try a second costs a region that is down one TCP
// (and TLS) handshake a second from each router.
func Reconnect() grpc.DialOption {
	return ReconnectOn(func(d time.Duration) time.Duration { return d })
}

// ReconnectOn is Reconnect for a caller on another clock (a replay's, which
// runs faster than real time): toReal turns each of the router's delays into
// the real time that clock takes for it, so that the transport hides a
// recovery for no longer, in that clock's time, than the router's does.
func ReconnectOn(toReal func(time.Duration) time.Duration) grpc.DialOption {
	return grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           backoff.Config{BaseDelay: toReal(100 * time.Millisecond), Multiplier: 1.6, Jitter: 0.2, MaxDelay: toReal(time.Second)},
		MinConnectTimeout: toReal(20 * time.Second), // gRPC's default
	})
}

// ErrClosed is returned by calls made after Close.
var ErrClosed = errors.New("upstream: clients closed")

// Options configures Clients.
type Options struct {
	// Insecure calls regions in plaintext: REST over HTTP/1.1 (with the
	// router's own client, h1) and gRPC over HTTP/2 without TLS, for
	// emulators and tests on loopback, never for Google. It is the only way
	// credentials ever travel without TLS, and only when an Authorizer is
	// given. Default false: TLS, with HTTP/2 for both surfaces.
	Insecure bool
	// Authorizer chooses each call's credentials. Nil sends none.
	Authorizer Authorizer
	// Propagator writes the trace context of the call's context into each
	// call's headers (W3C traceparent), so the region's spans continue the
	// trace; it replaces the caller's own trace headers when the call's
	// context carries a span. Nil uses the global propagator
	// (otel.GetTextMapPropagator), which internal/tracing.Setup sets to W3C
	// trace context and baggage, and which writes nothing until it is set:
	// the caller's headers then pass unchanged.
	Propagator propagation.TextMapPropagator
}

// Target is where one attempt goes and on whose behalf.
type Target struct {
	// Pool is the pool the call belongs to; Region the region the policy
	// picked. Region.Tier is the capacity the attempt asks for (the region's
	// Provisioned Throughput, or pay-as-you-go alone) and PayGo the
	// pay-as-you-go tier: the pay-as-you-go tier it uses, or the one a PT's
	// overflow spills into. Together they decide the headers (Headers).
	Pool   *table.Pool
	Region table.Region
	PayGo  table.PayGoTier
	// CallerAuthorization is the Authorization the router's caller presented
	// ("" for none), for an Authorizer that forwards it.
	CallerAuthorization string
}

// endpoint holds the connections to one host:port: an HTTP transport for
// REST (its own pool of HTTP/2 connections; under Insecure, h1's HTTP/1.1
// ones, or net/http's through a proxy) and a gRPC connection with the
// aiplatform clients on it. CountTokens lives on the LlmUtilityService, the
// rest on the PredictionService.
type endpoint struct {
	rest       *http.Transport
	h1         *h1  // the REST transport of a plaintext endpoint not behind a proxy; nil otherwise
	insecure   bool // plaintext (Options.Insecure)
	conn       *grpc.ClientConn
	prediction *aiplatform.PredictionClient
	utility    *aiplatform.LlmUtilityClient

	calls     atomic.Int64 // calls in flight
	retired   atomic.Bool  // left the table: close once idle
	closeOnce sync.Once
}

// release ends a call on e; the last call on a retired endpoint closes it.
func (e *endpoint) release() {
	if e.calls.Add(-1) == 0 && e.retired.Load() {
		e.close()
	}
}

// close closes e's connections.
func (e *endpoint) close() {
	e.closeOnce.Do(func() {
		e.rest.CloseIdleConnections()
		if e.h1 != nil {
			e.h1.closeIdle()
		}
		_ = e.prediction.Close()
		_ = e.utility.Close()
		_ = e.conn.Close()
	})
}

// Clients holds the connections of every region endpoint the router calls.
// An endpoint's are made on first use and reused by every later call, until
// Retain drops the endpoint or Close. It is safe for concurrent use; a call
// to a known endpoint takes no lock.
type Clients struct {
	opts Options
	// endpoints is a copy-on-write map: readers load it, writers (under mu)
	// store a new one.
	endpoints atomic.Pointer[map[string]*endpoint]
	mu        sync.Mutex // serializes writers of endpoints and closed
	closed    bool
}

// New returns clients with no connection yet.
func New(opts Options) *Clients {
	if opts.Propagator == nil {
		opts.Propagator = otel.GetTextMapPropagator()
	}
	c := &Clients{opts: opts}
	c.endpoints.Store(&map[string]*endpoint{})
	return c
}

// CallersCredentials reports whether calls carry their callers' own
// credentials: whether the Authorizer is a CallersOwn that says so. Report
// takes it.
func (c *Clients) CallersCredentials() bool {
	a, ok := c.opts.Authorizer.(CallersOwn)
	return ok && a.CallersOwn()
}

// Endpoints returns how many endpoints have connections.
func (c *Clients) Endpoints() int { return len(*c.endpoints.Load()) }

// acquire returns the connections of hostport, made on first use, with a
// call counted on them; the caller must release it.
func (c *Clients) acquire(hostport string) (*endpoint, error) {
	for {
		e, err := c.get(hostport)
		if err != nil {
			return nil, err
		}
		e.calls.Add(1)
		if !e.retired.Load() {
			return e, nil
		}
		// Retain dropped it between get and the count: take the fresh one.
		e.release()
	}
}

// get returns the endpoint of hostport, making it on first use.
func (c *Clients) get(hostport string) (*endpoint, error) {
	if e := (*c.endpoints.Load())[hostport]; e != nil {
		return e, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	old := *c.endpoints.Load()
	if e := old[hostport]; e != nil {
		return e, nil
	}
	e, err := c.dial(hostport)
	if err != nil {
		return nil, err
	}
	next := make(map[string]*endpoint, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[hostport] = e
	c.endpoints.Store(&next)
	return e, nil
}

// Retain keeps the connections of the endpoints in keep and closes the
// others, each once its calls in flight have ended: the endpoints of regions
// that left the routing table stop holding connections.
func (c *Clients) Retain(keep map[string]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := *c.endpoints.Load()
	next := make(map[string]*endpoint, len(old))
	var gone []*endpoint
	for k, e := range old {
		if keep[k] {
			next[k] = e
		} else {
			gone = append(gone, e)
		}
	}
	c.endpoints.Store(&next)
	for _, e := range gone {
		e.retired.Store(true)
		if e.calls.Load() == 0 {
			e.close()
		}
	}
}

// dial makes an endpoint's connections. Both connect lazily, so this does
// not wait for the network.
func (c *Clients) dial(hostport string) (*endpoint, error) {
	if _, _, err := net.SplitHostPort(hostport); err != nil {
		return nil, fmt.Errorf("upstream endpoint %q: %w", hostport, err)
	}
	transport := credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12})
	if c.opts.Insecure {
		transport = insecure.NewCredentials()
	}
	conn, err := grpc.NewClient(hostport,
		grpc.WithTransportCredentials(transport),
		grpc.WithPerRPCCredentials(callCredentials{secure: !c.opts.Insecure}),
		Reconnect(),
		// As the aiplatform clients dial by default: an answer may be large.
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32)),
		grpc.WithUserAgent(userAgent))
	if err != nil {
		return nil, fmt.Errorf("upstream %s: %w", hostport, err)
	}
	ctx := context.Background()
	pc, err := aiplatform.NewPredictionClient(ctx, option.WithGRPCConn(conn))
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("upstream %s: prediction client: %w", hostport, err)
	}
	uc, err := aiplatform.NewLlmUtilityClient(ctx, option.WithGRPCConn(conn))
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("upstream %s: llm utility client: %w", hostport, err)
	}
	e := &endpoint{rest: newTransport(c.opts.Insecure), insecure: c.opts.Insecure, conn: conn, prediction: pc, utility: uc}
	if c.opts.Insecure && !proxied(hostport) {
		e.h1 = newH1(hostport)
	}
	return e, nil
}

// proxied reports whether plaintext calls to hostport go through an HTTP
// proxy named by the environment (HTTP_PROXY, NO_PROXY): net/http's
// transport then carries them, as it speaks to proxies.
func proxied(hostport string) bool {
	u, err := http.ProxyFromEnvironment(&http.Request{URL: &url.URL{Scheme: "http", Host: hostport}})
	return err != nil || u != nil
}

// Connection settings of the REST transports.
const (
	dialTimeout = 10 * time.Second
	// idleConnsPerHost is how many idle HTTP/1.1 connections an endpoint
	// keeps (Insecure only; HTTP/2 multiplexes on a few): enough for the
	// calls in flight at thousands per second not to dial anew.
	idleConnsPerHost = 512
	idleConnTimeout  = 90 * time.Second
	// pingAfter and pingTimeout find a dead HTTP/2 connection: a ping after
	// this much silence, and the connection closed if it is not answered.
	pingAfter   = 15 * time.Second
	pingTimeout = 15 * time.Second
	// ioBuffer is the size of a connection's read and write buffers.
	ioBuffer = 32 << 10
)

// newTransport is the HTTP transport of one endpoint. Compression is off:
// the router reads the answers it relays, and asks for them uncompressed.
func newTransport(plaintext bool) *http.Transport {
	d := &net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	if !plaintext {
		protocols.SetHTTP2(true)
	}
	return &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         d.DialContext,
		TLSClientConfig:     &tls.Config{MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout: dialTimeout,
		Protocols:           &protocols,
		HTTP2:               &http.HTTP2Config{SendPingTimeout: pingAfter, PingTimeout: pingTimeout},
		DisableCompression:  true,
		MaxIdleConnsPerHost: idleConnsPerHost,
		IdleConnTimeout:     idleConnTimeout,
		WriteBufferSize:     ioBuffer,
		ReadBufferSize:      ioBuffer,
	}
}

// Close closes every connection. Calls made after Close return ErrClosed;
// calls in flight end with an error.
func (c *Clients) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for _, e := range *c.endpoints.Load() {
		e.close()
	}
	c.endpoints.Store(&map[string]*endpoint{})
	return nil
}

// ModelName is the publisher model resource name of pool's model in region:
// projects/{project}/locations/{region}/publishers/{publisher}/models/{model}.
func ModelName(pool *table.Pool, region table.Region) string {
	var b strings.Builder
	writeModelName(&b, pool, region.Name, pool.Model, 0)
	return b.String()
}

// writeModelName writes the resource name of model, of pool's project and
// publisher, in region to b, growing b for it and extra bytes more.
func writeModelName(b *strings.Builder, pool *table.Pool, region, model string, extra int) {
	b.Grow(len("projects//locations//publishers//models/") + len(pool.Project) + len(region) + len(pool.Publisher) + len(model) + extra)
	b.WriteString("projects/")
	b.WriteString(pool.Project)
	b.WriteString("/locations/")
	b.WriteString(region)
	b.WriteString("/publishers/")
	b.WriteString(pool.Publisher)
	b.WriteString("/models/")
	b.WriteString(model)
}

// Headers are the request type and shared request type (table.Headers; ""
// for none) an attempt to t carries: derived here, where it is sent, from
// the capacity the policy picked for the attempt.
func Headers(t *Target) (requestType, sharedRequestType string) {
	return t.Pool.Policy.Provisioned.Headers(t.Region.Tier, t.PayGo)
}

// authKey carries a gRPC call's Authorization value to callCredentials.
type authKey struct{}

// callCredentials attaches the Authorization the Authorizer chose for a call
// to the call. Over TLS it requires transport security, so gRPC refuses to
// send it in plaintext.
type callCredentials struct{ secure bool }

func (c callCredentials) GetRequestMetadata(ctx context.Context, _ ...string) (map[string]string, error) {
	if v, _ := ctx.Value(authKey{}).(string); v != "" {
		return map[string]string{"authorization": v}, nil
	}
	return nil, nil
}

func (c callCredentials) RequireTransportSecurity() bool { return c.secure }

// authorization asks the Authorizer for a call's credentials.
func (c *Clients) authorization(ctx context.Context, t *Target) (string, error) {
	if c.opts.Authorizer == nil {
		return "", nil
	}
	return c.opts.Authorizer.Authorization(ctx, t.CallerAuthorization)
}
