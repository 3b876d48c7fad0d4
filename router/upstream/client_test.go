package upstream

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"

	"cloud.google.com/go/aiplatform/apiv1/aiplatformpb"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc/metadata"

	"github.com/regionwarden/regionwarden/router/table"
)

// callers are the three calls, each returning the answer's text.
var callers = []struct {
	method string
	param  string // the routing header's field
	call   func(ctx context.Context, c *Clients, p *table.Pool, r table.Region) (string, error)
}{
	{"GenerateContent", "model", func(ctx context.Context, c *Clients, p *table.Pool, r table.Region) (string, error) {
		resp, err := c.GenerateContent(ctx, userRequest(), p, r)
		return answerText(resp), err
	}},
	{"StreamGenerateContent", "model", func(ctx context.Context, c *Clients, p *table.Pool, r table.Region) (string, error) {
		stream, err := c.StreamGenerateContent(ctx, userRequest(), p, r)
		if err != nil {
			return "", err
		}
		var text string
		for {
			resp, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				return text, nil
			}
			if err != nil {
				return text, err
			}
			text += answerText(resp)
		}
	}},
	{"CountTokens", "endpoint", func(ctx context.Context, c *Clients, p *table.Pool, r table.Region) (string, error) {
		_, err := c.CountTokens(ctx, &aiplatformpb.CountTokensRequest{Model: "gemini-2.5-flash", Contents: userRequest().Contents}, p, r)
		return "", err
	}},
}

// userRequest is a request as a caller sends it, naming the model its own way.
func userRequest() *aiplatformpb.GenerateContentRequest {
	return &aiplatformpb.GenerateContentRequest{
		Model:    "projects/caller/locations/somewhere/publishers/google/models/gemini-2.5-flash",
		Contents: []*aiplatformpb.Content{{Role: "user", Parts: []*aiplatformpb.Part{{Data: &aiplatformpb.Part_Text{Text: "hi"}}}}},
	}
}

func TestCallsCarryRegionModelAndRequestType(t *testing.T) {
	f := startFake(t)
	c := newClients(t)
	cases := []struct {
		name        string
		requestType table.RequestType
		provisioned bool
		want        []string
	}{
		{"provisioned spillover sends no header", table.RequestTypeSpillover, true, nil},
		{"provisioned dedicated sends dedicated", table.RequestTypeDedicated, true, []string{"dedicated"}},
		{"shared sends shared", table.RequestTypeSpillover, false, []string{"shared"}},
		{"shared of a dedicated pool sends shared", table.RequestTypeDedicated, false, []string{"shared"}},
	}
	for _, tc := range cases {
		for _, cl := range callers {
			t.Run(tc.name+"/"+cl.method, func(t *testing.T) {
				g := NewWithT(t)
				pool, prov, shared := testPool(f, tc.requestType)
				region := shared
				if tc.provisioned {
					region = prov
				}
				// An earlier attempt's request type must not leak into this one.
				ctx := metadata.AppendToOutgoingContext(t.Context(), RequestTypeHeader, "stale", "x-other", "kept")
				_, err := cl.call(ctx, c, pool, region)
				g.Expect(err).NotTo(HaveOccurred())

				want := "projects/proj/locations/" + region.Name + "/publishers/google/models/gemini-2.5-flash"
				got := f.lastCall()
				g.Expect(got.method).To(Equal(cl.method))
				g.Expect(got.model).To(Equal(want))
				if cl.method == "CountTokens" {
					g.Expect(got.endpoint).To(Equal(want))
				}
				g.Expect(got.requestType).To(Equal(tc.want))
				g.Expect(got.params).To(ContainElement(ContainSubstring(cl.param + "=" + url.QueryEscape(want))))
				g.Expect(got.auth).To(BeEmpty(), "insecure clients send no credentials")
			})
		}
	}
}

func TestCallerRequestIsNotModified(t *testing.T) {
	g := NewWithT(t)
	f := startFake(t)
	c := newClients(t)
	pool, prov, _ := testPool(f, table.RequestTypeSpillover)
	req := userRequest()
	before := req.GetModel()
	_, err := c.GenerateContent(t.Context(), req, pool, prov)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(req.GetModel()).To(Equal(before))
	g.Expect(f.lastCall().model).NotTo(Equal(before))
}

func TestAnswersArriveIntact(t *testing.T) {
	g := NewWithT(t)
	f := startFake(t)
	c := newClients(t)
	pool, prov, _ := testPool(f, table.RequestTypeSpillover)
	model := ModelName(pool, prov)

	text, err := callers[0].call(t.Context(), c, pool, prov)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(text).To(Equal("unary from " + model))

	for _, n := range []int{0, 1, 5} {
		f.set(func(f *fakeRegion) { f.chunks = n })
		text, err := callers[1].call(t.Context(), c, pool, prov)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(text).To(Equal("abcde"[:n]), "%d chunks in order", n)
	}

	resp, err := c.CountTokens(t.Context(), &aiplatformpb.CountTokensRequest{Contents: make([]*aiplatformpb.Content, 4)}, pool, prov)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.GetTotalTokens()).To(BeEquivalentTo(4))
}

func TestCallerCancellationCancelsUpstream(t *testing.T) {
	for _, cl := range callers {
		t.Run(cl.method, func(t *testing.T) {
			g := NewWithT(t)
			f := startFake(t)
			f.set(func(f *fakeRegion) { f.block = true })
			c := newClients(t)
			pool, _, shared := testPool(f, table.RequestTypeSpillover)

			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() {
				_, err := cl.call(ctx, c, pool, shared)
				done <- err
			}()
			g.Eventually(f.started).Should(Receive(Equal(cl.method)))
			cancel()
			g.Eventually(f.ended).Should(Receive(Equal(cl.method)), "the region sees the call end")
			var err error
			g.Eventually(done).Should(Receive(&err))
			g.Expect(err).To(HaveOccurred())
			g.Expect(ClassifyContext(ctx, err)).To(Equal(gaveUp))
		})
	}
}

func TestClientsAreReusedPerEndpoint(t *testing.T) {
	g := NewWithT(t)
	a, b := startFake(t), startFake(t)
	c := newClients(t)

	var wg sync.WaitGroup
	got := make([]*endpoint, 8)
	for i := range got {
		wg.Go(func() {
			e, err := c.get(a.addr)
			g.Expect(err).NotTo(HaveOccurred())
			got[i] = e
		})
	}
	wg.Wait()
	for _, e := range got {
		g.Expect(e).To(BeIdenticalTo(got[0]), "one endpoint, one client")
	}
	g.Expect(c.Endpoints()).To(Equal(1))

	pool, prov, shared := testPool(a, table.RequestTypeSpillover)
	_, err := c.GenerateContent(t.Context(), userRequest(), pool, prov)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.GenerateContent(t.Context(), userRequest(), pool, shared)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Endpoints()).To(Equal(1), "two regions on one endpoint share its client")

	other := table.Region{Name: "asia-east1", Endpoint: b.addr, Tier: table.TierShared}
	_, err = c.GenerateContent(t.Context(), userRequest(), pool, other)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Endpoints()).To(Equal(2))
	e, err := c.get(a.addr)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(e).To(BeIdenticalTo(got[0]))

	g.Expect(c.Close()).To(Succeed())
	_, err = c.GenerateContent(t.Context(), userRequest(), pool, prov)
	g.Expect(err).To(MatchError(ErrClosed))
}

func TestUnreachableRegionIsAFailure(t *testing.T) {
	g := NewWithT(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	addr := lis.Addr().String()
	g.Expect(lis.Close()).To(Succeed())

	c := newClients(t)
	pool := &table.Pool{Project: "p", Publisher: "google", Model: "m"}
	region := table.Region{Name: "europe-west1", Endpoint: addr, Tier: table.TierShared}
	for _, cl := range callers {
		_, err := cl.call(t.Context(), c, pool, region)
		g.Expect(err).To(HaveOccurred())
		g.Expect(Classify(err).String()).To(Equal("failure"), "%s: %v", cl.method, err)
	}
}
