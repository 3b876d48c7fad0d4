package upstream

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/auth"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/metadata"

	"github.com/regionwarden/regionwarden/router/table"
	"github.com/regionwarden/regionwarden/router/upstream/upstreamtest"
)

func TestCallsCarryRegionModelAndRequestType(t *testing.T) {
	prov, shared := regions(t)
	c := newClients(t, Options{})
	cases := []struct {
		name        string
		requestType table.RequestType
		provisioned bool
		payGo       table.PayGoTier
		want        []string
		wantShared  []string
	}{
		{"provisioned spillover sends no header", table.RequestTypeSpillover, true, "", nil, nil},
		{"provisioned spillover into standard sends no header", table.RequestTypeSpillover, true, table.PayGoStandard, nil, nil},
		{"provisioned spillover into priority sends the tier alone", table.RequestTypeSpillover, true, table.PayGoPriority, nil, []string{"priority"}},
		{"provisioned dedicated sends dedicated", table.RequestTypeDedicated, true, "", []string{"dedicated"}, nil},
		{"provisioned dedicated never sends a tier", table.RequestTypeDedicated, true, table.PayGoFlex, []string{"dedicated"}, nil},
		{"shared sends shared", table.RequestTypeSpillover, false, table.PayGoStandard, []string{"shared"}, nil},
		{"shared priority sends shared and priority", table.RequestTypeSpillover, false, table.PayGoPriority, []string{"shared"}, []string{"priority"}},
		{"shared flex sends shared and flex", table.RequestTypeDedicated, false, table.PayGoFlex, []string{"shared"}, []string{"flex"}},
		{"shared of a dedicated pool sends shared", table.RequestTypeDedicated, false, table.PayGoStandard, []string{"shared"}, nil},
	}
	for _, tc := range cases {
		for _, cl := range callers {
			t.Run(tc.name+"/"+cl.name, func(t *testing.T) {
				g := NewWithT(t)
				pool := testPool(prov, shared, tc.requestType)
				region, fake := pool.Regions[1], shared
				if tc.provisioned {
					region, fake = pool.Regions[0], prov
				}
				// An earlier attempt's request type must not leak into this one.
				ctx := metadata.AppendToOutgoingContext(t.Context(), RequestTypeHeader, "stale", SharedRequestTypeHeader, "stale", "x-other", "kept")
				_, err := cl.call(ctx, c, Target{Pool: pool, Region: region, PayGo: tc.payGo})
				g.Expect(err).NotTo(HaveOccurred())

				want := "projects/proj/locations/" + region.Name + "/publishers/google/models/gemini-2.5-flash"
				got := fake.Last()
				g.Expect(got.Method).To(Equal(cl.method))
				if got.Surface == upstreamtest.GRPC && cl.method == upstreamtest.MethodCount {
					g.Expect(got.Model).To(BeEmpty(), "a model field the caller left empty stays empty")
				} else {
					g.Expect(got.Model).To(Equal(want))
				}
				g.Expect(got.RequestType).To(Equal(tc.want))
				g.Expect(got.SharedRequestType).To(Equal(tc.wantShared))
				g.Expect(got.Auth).To(BeEmpty(), "no Authorizer sends no credentials")
				if got.Surface == upstreamtest.GRPC {
					param := "model"
					if cl.method == upstreamtest.MethodCount {
						param = "endpoint"
						g.Expect(got.Endpoint).To(Equal(want))
					}
					g.Expect(got.Params).To(ContainElement(ContainSubstring(param + "=" + strings.ReplaceAll(want, "/", "%2F"))))
				}
			})
		}
	}
}

// TestRESTSendsTheCallersBytes: the body reaches the region byte for byte,
// with the caller's query and headers, less what stays with the router.
func TestRESTSendsTheCallersBytes(t *testing.T) {
	g := NewWithT(t)
	prov, shared := regions(t)
	c := newClients(t, Options{})
	pool := testPool(prov, shared, table.RequestTypeDedicated)
	body := []byte(`{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"someFutureOption":{"x":[1,2]}},"aFieldFromNextYear":"\u00e9"}`)
	header := http.Header{
		"Content-Type":                        {"application/json"},
		"User-Agent":                          {"google-genai-sdk/1.0 gl-go/1.26"},
		"X-Goog-Api-Client":                   {"google-genai-sdk/1.0"},
		"X-Goog-User-Project":                 {"billing-project"},
		"X-Vertex-Ai-Llm-Request-Type":        {"shared"},
		"X-Vertex-Ai-Llm-Shared-Request-Type": {"priority"},
		"X-Regionwarden-Priority":             {"critical"},
		"Authorization":                       {"Bearer caller"},
		"Accept-Encoding":                     {"gzip"},
		"Connection":                          {"X-Hop"},
		"X-Hop":                               {"1"},
	}
	resp, err := c.Send(t.Context(), Target{Pool: pool, Region: pool.Regions[0]},
		&Request{Version: "v1beta1", Method: "streamGenerateContent", RawQuery: "alt=sse", Header: header, Body: body})
	g.Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()

	got := prov.Last()
	g.Expect(got.Body).To(Equal(body))
	g.Expect(got.Path).To(Equal("/v1beta1/projects/proj/locations/europe-west1/publishers/google/models/gemini-2.5-flash:streamGenerateContent"))
	for _, k := range []string{"Content-Type", "User-Agent", "X-Goog-Api-Client", "X-Goog-User-Project"} {
		g.Expect(got.Header.Values(k)).To(Equal(header.Values(k)), k)
	}
	g.Expect(got.RequestType).To(Equal([]string{"dedicated"}), "the tier decides the request type, not the caller")
	g.Expect(got.SharedRequestType).To(BeEmpty(), "the policy decides the pay-as-you-go tier, not the caller")
	for _, k := range []string{"X-Regionwarden-Priority", "Authorization", "Accept-Encoding", "X-Hop"} {
		g.Expect(got.Header.Values(k)).To(BeEmpty(), k)
	}
	g.Expect(header).To(HaveLen(11), "the caller's header is not modified")
}

// forward sends the caller's own credentials.
type forward struct{}

func (forward) Authorization(_ context.Context, caller string) (string, error) { return caller, nil }

type staticToken struct{}

func (staticToken) Token(context.Context) (*auth.Token, error) {
	return &auth.Token{Value: "router-token", Type: "Bearer", Expiry: time.Now().Add(time.Hour)}, nil
}

// TestAuthorizerChoosesCredentialsPerCall: each call carries what the
// Authorizer chose for it, on both surfaces.
func TestAuthorizerChoosesCredentialsPerCall(t *testing.T) {
	prov, shared := regions(t)
	pool := testPool(prov, shared, table.RequestTypeSpillover)
	for _, tc := range []struct {
		name string
		a    Authorizer
		want []string
	}{
		{"the router's own token", TokenAuthorizer(staticToken{}), []string{"Bearer router-token"}},
		{"the caller's token, forwarded", forward{}, []string{"Bearer caller-token"}},
	} {
		c := newClients(t, Options{Authorizer: tc.a})
		for _, cl := range callers {
			t.Run(tc.name+"/"+cl.name, func(t *testing.T) {
				g := NewWithT(t)
				_, err := cl.call(t.Context(), c, Target{Pool: pool, Region: pool.Regions[0], CallerAuthorization: "Bearer caller-token"})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(prov.Last().Auth).To(Equal(tc.want))
			})
		}
	}
}

// TestCredentialsNeedTLS: without Insecure, calls are TLS only: a region
// listening in plaintext never sees the credentials.
func TestCredentialsNeedTLS(t *testing.T) {
	g := NewWithT(t)
	prov, shared := regions(t)
	pool := testPool(prov, shared, table.RequestTypeSpillover)
	c := New(Options{Authorizer: TokenAuthorizer(staticToken{})})
	t.Cleanup(func() { _ = c.Close() })
	for _, cl := range callers {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		_, err := cl.call(ctx, c, Target{Pool: pool, Region: pool.Regions[0]})
		cancel()
		g.Expect(err).To(HaveOccurred(), cl.name)
	}
	g.Expect(prov.Calls()).To(BeZero(), "a plaintext region got a call, credentials and all")
}

// TestTLSRegion: a TLS region is called over HTTP/2 with the credentials.
func TestTLSRegion(t *testing.T) {
	g := NewWithT(t)
	var got []string
	var proto string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, proto = r.Header.Values("Authorization"), r.Proto
		_, _ = w.Write([]byte(`{}`))
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	c := New(Options{Authorizer: TokenAuthorizer(staticToken{})})
	t.Cleanup(func() { _ = c.Close() })
	// Trust the test server's certificate in the endpoint's transport.
	e, err := c.get(srv.Listener.Addr().String())
	g.Expect(err).NotTo(HaveOccurred())
	e.rest.TLSClientConfig = &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs, MinVersion: tls.VersionTLS12}
	pool := &table.Pool{Project: "p", Publisher: "google", Model: "m"}
	_, err = restCall(t.Context(), c, Target{Pool: pool, Region: table.Region{Name: "europe-west1", Endpoint: srv.Listener.Addr().String(), Tier: table.TierShared}}, "generateContent", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal([]string{"Bearer router-token"}))
	g.Expect(proto).To(Equal("HTTP/2.0"))
}

func TestAnswersArriveIntact(t *testing.T) {
	g := NewWithT(t)
	prov, shared := regions(t)
	c := newClients(t, Options{})
	pool := testPool(prov, shared, table.RequestTypeSpillover)
	target := Target{Pool: pool, Region: pool.Regions[0]}

	text, err := callers[3].call(t.Context(), c, target)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(text).To(Equal("europe-west1 answers: hi"))

	for _, n := range []int{0, 1, 5} {
		prov.Set(func(b *upstreamtest.Behavior) { b.Chunks = n })
		text, err := callers[4].call(t.Context(), c, target)
		g.Expect(err).NotTo(HaveOccurred())
		want := ""
		for i := range n {
			want += "[europe-west1 chunk " + string(rune('0'+i)) + "]"
		}
		g.Expect(text).To(Equal(want), "%d chunks in order", n)

		raw, err := callers[1].call(t.Context(), c, target)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(strings.Count(raw, "data: ")).To(Equal(n), raw)
	}
}

func TestCallerCancellationCancelsUpstream(t *testing.T) {
	for _, cl := range callers {
		t.Run(cl.name, func(t *testing.T) {
			g := NewWithT(t)
			prov, shared := regions(t)
			shared.Set(func(b *upstreamtest.Behavior) { b.Block = true })
			c := newClients(t, Options{})
			pool := testPool(prov, shared, table.RequestTypeSpillover)

			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() {
				_, err := cl.call(ctx, c, Target{Pool: pool, Region: pool.Regions[1]})
				done <- err
			}()
			g.Eventually(shared.Started).Should(Receive(Equal(cl.method)))
			cancel()
			g.Eventually(shared.Ended).Should(Receive(), "the region sees the call end")
			var err error
			g.Eventually(done).Should(Receive(&err))
			g.Expect(err).To(HaveOccurred())
			g.Expect(ClassifyContext(ctx, err)).To(Equal(gaveUp))
		})
	}
}

func TestClientsAreReusedPerEndpoint(t *testing.T) {
	g := NewWithT(t)
	prov, shared := regions(t)
	c := newClients(t, Options{})

	var wg sync.WaitGroup
	got := make([]*endpoint, 8)
	for i := range got {
		wg.Go(func() {
			e, err := c.get(prov.Addr)
			g.Expect(err).NotTo(HaveOccurred())
			got[i] = e
		})
	}
	wg.Wait()
	for _, e := range got {
		g.Expect(e).To(BeIdenticalTo(got[0]), "one endpoint, one set of connections")
	}
	g.Expect(c.Endpoints()).To(Equal(1))

	pool := testPool(prov, shared, table.RequestTypeSpillover)
	other := table.Region{Name: "asia-east1", Endpoint: prov.Addr, Tier: table.TierShared}
	for _, cl := range callers {
		_, err := cl.call(t.Context(), c, Target{Pool: pool, Region: pool.Regions[0]})
		g.Expect(err).NotTo(HaveOccurred())
		_, err = cl.call(t.Context(), c, Target{Pool: pool, Region: other})
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(c.Endpoints()).To(Equal(1), "two regions on one endpoint share its connections")
	_, err := callers[0].call(t.Context(), c, Target{Pool: pool, Region: pool.Regions[1]})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Endpoints()).To(Equal(2))
	e, err := c.get(prov.Addr)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(e).To(BeIdenticalTo(got[0]))

	g.Expect(c.Close()).To(Succeed())
	_, err = callers[0].call(t.Context(), c, Target{Pool: pool, Region: pool.Regions[0]})
	g.Expect(err).To(MatchError(ErrClosed))
}

// TestRetainClosesEndpointsThatLeft: an endpoint that left the table is
// closed once its calls in flight have ended, and not before.
func TestRetainClosesEndpointsThatLeft(t *testing.T) {
	g := NewWithT(t)
	prov, shared := regions(t)
	c := newClients(t, Options{})
	pool := testPool(prov, shared, table.RequestTypeSpillover)
	for _, r := range pool.Regions {
		_, err := callers[0].call(t.Context(), c, Target{Pool: pool, Region: r})
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(c.Endpoints()).To(Equal(2))
	gone, err := c.get(shared.Addr)
	g.Expect(err).NotTo(HaveOccurred())

	// A stream in flight on the endpoint that leaves.
	hold := make(chan struct{})
	shared.Set(func(b *upstreamtest.Behavior) { b.Hold = hold })
	done := make(chan error, 1)
	go func() {
		_, err := callers[1].call(t.Context(), c, Target{Pool: pool, Region: pool.Regions[1]})
		done <- err
	}()
	g.Eventually(shared.Started).Should(Receive())

	c.Retain(map[string]bool{prov.Addr: true})
	g.Expect(c.Endpoints()).To(Equal(1))
	g.Expect(gone.calls.Load()).To(BeEquivalentTo(1))
	close(hold)
	g.Eventually(done).Should(Receive(BeNil()), "the call in flight finishes on its connections")
	g.Eventually(gone.conn.GetState).Should(Equal(connectivity.Shutdown))

	// A later call to the same endpoint gets fresh connections.
	_, err = callers[3].call(t.Context(), c, Target{Pool: pool, Region: pool.Regions[1]})
	g.Expect(err).NotTo(HaveOccurred())
	fresh, err := c.get(shared.Addr)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fresh).NotTo(BeIdenticalTo(gone))
}

// unreachable is a target on a loopback address where nothing listens, and
// Clients to call it.
func unreachable(t *testing.T) (*Clients, Target) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	if err := lis.Close(); err != nil {
		t.Fatal(err)
	}
	pool := &table.Pool{Project: "p", Publisher: "google", Model: "m"}
	return newClients(t, Options{}), Target{Pool: pool, Region: table.Region{Name: "europe-west1", Endpoint: addr, Tier: table.TierShared}}
}

func TestUnreachableRegionIsAFailure(t *testing.T) {
	g := NewWithT(t)
	c, target := unreachable(t)
	for _, cl := range callers {
		_, err := cl.call(t.Context(), c, target)
		g.Expect(err).To(HaveOccurred())
		g.Expect(Classify(err).String()).To(Equal("failure"), "%s: %v", cl.name, err)
	}
}

// TestRegionBackIsReachedAtOnce refuses a region's connections for 30 s,
// calling it all the while as a demoted region's probes would, then brings
// it back on the same address: every surface reaches it within 3 s. gRPC's
// default reconnect back-off has grown to about 17 s by then, and its calls
// fail without reaching the region until it ends (Reconnect).
func TestRegionBackIsReachedAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("refuses connections for 30 seconds")
	}
	t.Parallel()
	g := NewWithT(t)
	c, target := unreachable(t)
	call := func(cl caller) error {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		_, err := cl.call(ctx, c, target)
		return err
	}
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		for _, cl := range callers {
			g.Expect(call(cl)).To(HaveOccurred(), "%s reached a region that is not there", cl.name)
		}
	}

	upstreamtest.StartAt(t, "europe-west1", table.TierShared, target.Region.Endpoint)
	for _, cl := range callers {
		g.Eventually(func() error { return call(cl) }).WithTimeout(3*time.Second).WithPolling(100*time.Millisecond).
			Should(Succeed(), "%s: the region came back and is not reached", cl.name)
	}
}

// TestParseServerTimeout reads X-Server-Timeout as Google does, seconds whole
// or decimal, and keeps an absurd value within a Duration.
func TestParseServerTimeout(t *testing.T) {
	for v, want := range map[string]time.Duration{
		"30":   30 * time.Second,
		"2.5":  2500 * time.Millisecond,
		" 1 ":  time.Second,
		"1e30": 365 * 24 * time.Hour,
	} {
		if got, err := ParseServerTimeout(v); err != nil || got != want {
			t.Errorf("%q: %v, %v; want %v", v, got, err, want)
		}
	}
	for _, v := range []string{"", "soon", "0", "-1", "NaN", "+Inf", "1s"} {
		if _, err := ParseServerTimeout(v); err == nil || !strings.Contains(err.Error(), HeaderServerTimeout) {
			t.Errorf("%q: error %v, want one naming the header", v, err)
		}
	}
}
