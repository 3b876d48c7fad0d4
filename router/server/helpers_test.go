package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/auth"
	"go.uber.org/goleak"
	"google.golang.org/genai"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/regionwarden/regionwarden/internal/clocktest"
	"github.com/regionwarden/regionwarden/internal/metricstest"
	"github.com/regionwarden/regionwarden/internal/redisserver"
	"github.com/regionwarden/regionwarden/internal/waittest"
	"github.com/regionwarden/regionwarden/router/metrics"
	"github.com/regionwarden/regionwarden/router/policy"
	"github.com/regionwarden/regionwarden/router/server"
	"github.com/regionwarden/regionwarden/router/share"
	"github.com/regionwarden/regionwarden/router/table"
	"github.com/regionwarden/regionwarden/router/upstream"
	"github.com/regionwarden/regionwarden/router/upstream/upstreamtest"
)

// TestMain fails the package's tests when goroutines outlive them: a server
// that left one behind a call, a stream or a table would grow in a router
// until it failed.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	project   = "demo-project"
	model     = "gemini-2.5-flash-lite"
	callerTok = "caller-secret-token"
)

// seen is what a fake region saw of one call.
type seen struct {
	method      string
	model       string
	requestType string
	auth        []string
}

// fakeRegion is the fake Vertex AI region of the router's tests
// (upstreamtest), serving both surfaces on one loopback address. It answers
// with text naming itself, or as its Behavior says.
type fakeRegion struct {
	*upstreamtest.Region
	name  string
	tier  table.Tier
	calls *atomic.Int64
}

func startRegion(t testing.TB, name string, tier table.Tier) *fakeRegion {
	t.Helper()
	r := upstreamtest.Start(t, name, tier)
	return &fakeRegion{Region: r, name: name, tier: tier, calls: r.Counter()}
}

// set changes the region's behavior.
func (f *fakeRegion) set(fn func(b *upstreamtest.Behavior)) { f.Set(fn) }

// saw returns what the region saw so far.
func (f *fakeRegion) saw() []seen {
	var out []seen
	for _, c := range f.Seen() {
		s := seen{method: c.Method, model: c.Model, auth: c.Auth}
		if len(c.RequestType) > 0 {
			s.requestType = c.RequestType[0]
		}
		out = append(out, s)
	}
	return out
}

// streamChunks is how many chunks a streamed answer has.
const streamChunks = upstreamtest.StreamChunks

// newFakeClock is the policy's clock; tests move it.
func newFakeClock() *clocktest.Clock {
	return clocktest.At(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC))
}

func quietLogger() *slog.Logger                      { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
func region(f *fakeRegion, rps float64) table.Region { return f.TableRegion(rps) }

// onePT starts a provisioned region, europe-west1, and a router whose one
// pool routes to it under a generous policy.
func onePT(t testing.TB) (*fakeRegion, *router) {
	t.Helper()
	pt := startRegion(t, "europe-west1", table.TierProvisioned)
	return pt, startRouter(t, poolOf(generous(), region(pt, 0)))
}

// ptAndShared starts a provisioned region, europe-west1, a shared one,
// us-central1, and a router whose one pool routes to both under a generous
// policy.
func ptAndShared(t testing.TB) (pt, shared *fakeRegion, r *router) {
	t.Helper()
	pt = startRegion(t, "europe-west1", table.TierProvisioned)
	shared = startRegion(t, "us-central1", table.TierShared)
	return pt, shared, startRouter(t, poolOf(generous(), region(pt, 0), region(shared, 0)))
}

// oneOfThreeFailing starts three shared regions, the first of which fails
// every call (Unavailable), and a generous policy that ejects a region after
// five calls.
func oneOfThreeFailing(t testing.TB) (bad, s2, s3 *fakeRegion, pol table.Policy) {
	t.Helper()
	bad = startRegion(t, "us-central1", table.TierShared)
	s2 = startRegion(t, "europe-west4", table.TierShared)
	s3 = startRegion(t, "asia-northeast1", table.TierShared)
	bad.set(func(b *upstreamtest.Behavior) {
		b.Fault = func(int64) error { return status.Error(codes.Unavailable, "connection reset") }
	})
	pol = generous()
	pol.Ejection.MinRequests = 5
	return bad, s2, s3, pol
}

// generous is a policy whose budget lets every failed call retry once, so
// that tests see the policy's choices and not the budget's.
func generous() table.Policy {
	p := table.DefaultPolicy()
	p.Retry = table.Retry{MaxAttempts: 3, BudgetPercent: new(100), MinRetriesPerSecond: new(100)}
	return p
}

func poolOf(pol table.Policy, regions ...table.Region) table.Pool {
	return table.Pool{Project: project, Publisher: "google", Model: model, Regions: regions, Policy: pol}
}

// router is a server in front of fake regions, on an httptest server.
type router struct {
	t       testing.TB
	srv     *server.Server
	http    *httptest.Server
	clock   *clocktest.Clock
	metrics *metrics.Metrics
}

func startRouter(t testing.TB, pools ...table.Pool) *router {
	t.Helper()
	return startRouterWith(t, nil, pools...)
}

// startRouterWith is startRouter with options changed by opts.
func startRouterWith(t testing.TB, opts func(*server.Options), pools ...table.Pool) *router {
	t.Helper()
	clients := upstream.New(upstream.Options{Insecure: true})
	t.Cleanup(func() { _ = clients.Close() })
	clock := newFakeClock()
	m := metrics.New()
	o := server.Options{
		Upstream: clients, Metrics: m, Logger: quietLogger(), Now: clock.Now, Seed: 1,
		RequestTimeout: 20 * time.Second, MaxBodyBytes: 1 << 20,
		// A call that waits for headroom moves the policy's clock.
		Sleep: func(_ context.Context, d time.Duration) error { clock.Advance(d); return nil },
	}
	if opts != nil {
		opts(&o)
	}
	srv, err := server.New(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(pools) > 0 {
		if err := srv.Apply(&table.Table{Version: table.Version, Pools: pools}); err != nil {
			t.Fatal(err)
		}
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return &router{t: t, srv: srv, http: hs, clock: clock, metrics: m}
}

// staticToken is the caller's credential: the router must never forward it.
type staticToken struct{}

func (staticToken) Token(context.Context) (*auth.Token, error) {
	return &auth.Token{Value: callerTok, Type: "Bearer", Expiry: time.Now().Add(time.Hour)}, nil
}

// withStore gives a router the share store at store, as --share-store does
// (its meter named id, closed when t ends): the meter keeps the Live
// sessions' resumption handles for every router sharing the store.
func withStore(t testing.TB, store *redisserver.Server, id string) (*share.Meter, func(*server.Options)) {
	t.Helper()
	m, err := share.NewMeter(share.MeterOptions{URL: store.URL(), ID: id, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	ctl := share.New(share.Options{Apply: func(*table.Table) error { return nil }, Meter: m})
	return m, func(o *server.Options) { o.Shares = ctl }
}

// handleStored waits until the store m reads holds handle: the router that
// relayed it notes it there in the background.
func handleStored(t testing.TB, m *share.Meter, handle string) {
	t.Helper()
	waittest.For(t, 10*time.Second, "the handle "+handle+" in the store", func() bool {
		_, _, ok, _ := m.HandleOf(context.Background(), handle)
		return ok
	})
}

// client is the official genai SDK pointed at the router. version "" is the
// SDK's default, v1beta1.
func (r *router) client(version string) *genai.Client {
	r.t.Helper()
	return r.clientAt(r.http.URL, "europe-west1", version)
}

// clientAt is the genai SDK on location, pointed at base (the router's URL,
// or its ws:// twin for the Live API).
func (r *router) clientAt(base, location, version string) *genai.Client {
	r.t.Helper()
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		Backend:     genai.BackendVertexAI,
		Project:     project,
		Location:    location,
		Credentials: auth.NewCredentials(&auth.CredentialsOptions{TokenProvider: staticToken{}}),
		HTTPOptions: genai.HTTPOptions{BaseURL: base, APIVersion: version},
	})
	if err != nil {
		r.t.Fatal(err)
	}
	return c
}

// generate calls generateContent through the SDK and returns the answer's text.
func (r *router) generate(c *genai.Client, prompt string) (string, error) {
	resp, err := c.Models.GenerateContent(context.Background(), model, genai.Text(prompt), nil)
	if err != nil {
		return "", err
	}
	return resp.Text(), nil
}

// post sends a raw request to the router.
func (r *router) post(path, body string, header http.Header) (*http.Response, []byte) {
	r.t.Helper()
	return r.do(http.MethodPost, path, strings.NewReader(body), header)
}

// get reads path from the router: the status code and the body.
func (r *router) get(path string) (int, string) {
	r.t.Helper()
	resp, b := r.do(http.MethodGet, path, nil, nil)
	return resp.StatusCode, string(b)
}

// do sends a request to the router and reads the whole answer.
func (r *router) do(method, path string, body io.Reader, header http.Header) (*http.Response, []byte) {
	r.t.Helper()
	req, err := http.NewRequest(method, r.http.URL+path, body)
	if err != nil {
		r.t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := r.http.Client().Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		r.t.Fatal(err)
	}
	return resp, b
}

// googleErr parses Google's error JSON.
func googleErr(t testing.TB, b []byte) (code int, message, status string) {
	t.Helper()
	var e struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Status  string `json:"status"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("not Google's error JSON: %v: %s", err, b)
	}
	return e.Error.Code, e.Error.Message, e.Error.Status
}

// snapshotOf returns the live state of region name in the only pool.
func (r *router) snapshotOf(name string) policy.RegionSnapshot {
	r.t.Helper()
	for _, p := range r.srv.Snapshots() {
		if rs, ok := p.Region(name); ok {
			return rs
		}
	}
	r.t.Fatalf("no region %s in the snapshots", name)
	return policy.RegionSnapshot{}
}

// attempts reads the attempts counter of a region and outcome.
func (r *router) attempts(region, tier string, o policy.Outcome) float64 {
	return counter(r.t, r.metrics, "regionwarden_router_attempts_total", map[string]string{
		"pool": project + "/google/" + model, "region": region, "tier": tier, "outcome": o.String()})
}

// requestsCounted waits until regionwarden_router_requests_total with labels
// is n, and fails the test, saying what, if it does not get there: a request
// is counted once its handler returns, which may be just after its client
// has read the answer.
func (r *router) requestsCounted(what string, labels map[string]string, n float64) {
	r.t.Helper()
	waittest.Until(r.t, 10*time.Second, fmt.Sprintf("%s counted %v times", what, n),
		func() float64 { return counter(r.t, r.metrics, "regionwarden_router_requests_total", labels) },
		func(v float64) bool { return v == n })
}

// counter reads one sample of a metric from the registry; 0 if absent.
func counter(t testing.TB, m *metrics.Metrics, name string, labels map[string]string) float64 {
	t.Helper()
	v, _ := metricstest.Value(t, m.Registry(), name, labels)
	return v
}
