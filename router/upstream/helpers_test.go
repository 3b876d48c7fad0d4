package upstream

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"cloud.google.com/go/aiplatform/apiv1/aiplatformpb"
	"go.uber.org/goleak"

	"github.com/regionwarden/regionwarden/router/table"
	"github.com/regionwarden/regionwarden/router/upstream/upstreamtest"
)

// TestMain fails the package's tests when goroutines outlive them: a client
// that left one behind a call or a connection would grow in a router until
// it failed.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// generateBody is a generateContent body as a caller sends it.
const generateBody = `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`

// caller is one way to call a region: a method on one surface, returning the
// answer's text (or the raw body, over REST).
type caller struct {
	name   string
	method string // as the fake region names it
	call   func(ctx context.Context, c *Clients, t Target) (string, error)
}

// callers are the three methods on both surfaces.
var callers = []caller{
	{"rest/generateContent", upstreamtest.MethodGenerate, func(ctx context.Context, c *Clients, t Target) (string, error) {
		return restCall(ctx, c, t, "generateContent", "")
	}},
	{"rest/streamGenerateContent", upstreamtest.MethodStream, func(ctx context.Context, c *Clients, t Target) (string, error) {
		return restCall(ctx, c, t, "streamGenerateContent", "alt=sse")
	}},
	{"rest/countTokens", upstreamtest.MethodCount, func(ctx context.Context, c *Clients, t Target) (string, error) {
		return restCall(ctx, c, t, "countTokens", "")
	}},
	{"grpc/GenerateContent", upstreamtest.MethodGenerate, func(ctx context.Context, c *Clients, t Target) (string, error) {
		resp, err := c.GenerateContent(ctx, userRequest(), t)
		return answerText(resp), err
	}},
	{"grpc/StreamGenerateContent", upstreamtest.MethodStream, func(ctx context.Context, c *Clients, t Target) (string, error) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stream, err := c.StreamGenerateContent(ctx, userRequest(), t)
		if err != nil {
			return "", err
		}
		msgs, err := upstreamtest.RecvAll(stream)
		var text string
		for _, m := range msgs {
			text += answerText(m)
		}
		return text, err
	}},
	{"grpc/CountTokens", upstreamtest.MethodCount, func(ctx context.Context, c *Clients, t Target) (string, error) {
		_, err := c.CountTokens(ctx, &aiplatformpb.CountTokensRequest{Endpoint: "projects/caller/locations/x/publishers/google/models/m", Contents: userRequest().Contents}, t)
		return "", err
	}},
}

// restCall sends a REST call with the caller's body and returns the answer's
// bytes.
func restCall(ctx context.Context, c *Clients, t Target, method, query string) (string, error) {
	resp, err := c.Send(ctx, t, &Request{Version: "v1", Method: method, RawQuery: query,
		Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(generateBody)})
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// userRequest is a request as a caller sends it, naming the model its own way.
func userRequest() *aiplatformpb.GenerateContentRequest {
	return &aiplatformpb.GenerateContentRequest{
		Model:    "projects/caller/locations/somewhere/publishers/google/models/gemini-2.5-flash",
		Contents: []*aiplatformpb.Content{{Role: "user", Parts: []*aiplatformpb.Part{{Data: &aiplatformpb.Part_Text{Text: "hi"}}}}},
	}
}

func answerText(r *aiplatformpb.GenerateContentResponse) string {
	var b strings.Builder
	for _, c := range r.GetCandidates() {
		for _, p := range c.GetContent().GetParts() {
			b.WriteString(p.GetText())
		}
	}
	return b.String()
}

// testPool is a pool with one provisioned region and one shared region,
// served by the fake regions prov and shared.
func testPool(prov, shared *upstreamtest.Region, rt table.RequestType) *table.Pool {
	p := &table.Pool{
		Project: "proj", Publisher: "google", Model: "gemini-2.5-flash",
		Regions: []table.Region{
			{Name: prov.Name, Endpoint: prov.Addr, Tier: table.TierProvisioned},
			{Name: shared.Name, Endpoint: shared.Addr, Tier: table.TierShared},
		},
	}
	p.Policy.Provisioned.RequestType = rt
	return p
}

// regions starts a provisioned and a shared fake region.
func regions(t testing.TB) (prov, shared *upstreamtest.Region) {
	return upstreamtest.Start(t, "europe-west1", table.TierProvisioned), upstreamtest.Start(t, "us-central1", table.TierShared)
}

func newClients(t testing.TB, opts Options) *Clients {
	t.Helper()
	opts.Insecure = true
	c := New(opts)
	t.Cleanup(func() { _ = c.Close() })
	return c
}
