package server_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"google.golang.org/genai"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// cacheIn is the name of a cached content in location loc.
func cacheIn(loc string) string {
	return "projects/" + project + "/locations/" + loc + "/cachedContents/4711"
}

// TestCachedContentGoesWhereItLives calls a pool of a provisioned region,
// where first attempts go, and a shared one, with a cached content that
// lives in the shared one: every call, through the genai SDK on both API
// versions, streamed or not, and through the aiplatform gRPC client, is
// served there, and the provisioned region's first attempt that was picked
// before the body was read is given back. A cache where the pool has no
// region is refused with an error that names it; a prompt that only
// mentions a cache is routed as usual.
func TestCachedContentGoesWhereItLives(t *testing.T) {
	pt, shared, r := ptAndShared(t)
	g := r.serveGRPC()
	ctx := context.Background()
	cached := &genai.GenerateContentConfig{CachedContent: cacheIn("us-central1")}

	for _, version := range []string{"", "v1"} {
		c := r.client(version)
		for i := range 5 {
			resp, err := c.Models.GenerateContent(ctx, model, genai.Text("From the cache."), cached)
			if err != nil {
				t.Fatal(err)
			}
			if got := resp.Text(); got != "us-central1 answers: From the cache." {
				t.Errorf("version %q call %d: %q, want the cache's region's answer", version, i+1, got)
			}
		}
		var streamed strings.Builder
		for resp, err := range c.Models.GenerateContentStream(ctx, model, genai.Text("Stream it."), cached) {
			if err != nil {
				t.Fatal(err)
			}
			streamed.WriteString(resp.Text())
		}
		if !strings.HasPrefix(streamed.String(), "[us-central1 chunk 0]") {
			t.Errorf("version %q streamed %q, want the cache's region's chunks", version, streamed.String())
		}

		_, err := c.Models.GenerateContent(ctx, model, genai.Text("From afar."), &genai.GenerateContentConfig{CachedContent: cacheIn("asia-northeast1")})
		var apiErr genai.APIError
		if !errors.As(err, &apiErr) || apiErr.Code != 400 || !strings.Contains(apiErr.Message, "cachedContent") || !strings.Contains(apiErr.Message, `"asia-northeast1"`) {
			t.Errorf("version %q, a cache where the pool has no region: %v, want 400 naming cachedContent and its location", version, err)
		}
	}

	req := grpcRequest("From the cache.")
	req.CachedContent = cacheIn("us-central1")
	resp, err := g.prediction.GenerateContent(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if got := answerOf(resp); got != "us-central1 answers: From the cache." {
		t.Errorf("gRPC: %q, want the cache's region's answer", got)
	}
	req.CachedContent = cacheIn("asia-northeast1")
	if _, err := g.prediction.GenerateContent(ctx, req); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "cachedContent") {
		t.Errorf("gRPC, a cache where the pool has no region: %v, want InvalidArgument naming cachedContent", err)
	}

	before := pt.calls.Load()
	text, err := r.generate(r.client("v1"), `Explain "cachedContent": "`+cacheIn("us-central1")+`"`)
	if err != nil || !strings.HasPrefix(text, "europe-west1 answers:") {
		t.Errorf("a prompt that mentions a cache: %q, %v; want the provisioned region's answer", text, err)
	}
	servedBy(t, r, pt, shared, before, 1, 13)
}

// servedBy checks where the calls of a test of ptAndShared went: ptCalls to
// the provisioned region since it had before, cached to the cache's region
// in all; and that the provisioned region holds no call in flight, the
// first attempts withdrawn from it given back.
func servedBy(t *testing.T, r *router, pt, shared *fakeRegion, before, ptCalls, cached int64) {
	t.Helper()
	if n := pt.calls.Load() - before; n != ptCalls {
		t.Errorf("the provisioned region got %d calls, want %d: those that name no cache where it is read", n, ptCalls)
	}
	if n := shared.calls.Load(); n != cached {
		t.Errorf("the cache's region got %d calls, want %d: the cached ones", n, cached)
	}
	if s := r.snapshotOf("europe-west1"); s.InFlight != 0 {
		t.Errorf("the provisioned region holds %d calls in flight after every call ended, want 0: the withdrawn first attempts were not given back", s.InFlight)
	}
}

// TestCachedContentIsReadAsGoogleReadsIt: only a top-level field names a
// cache, in either of the spellings protojson reads, and only a name of a
// cached content pins a call; anything else is routed as usual and left to
// the region to judge, its bytes unchanged.
func TestCachedContentIsReadAsGoogleReadsIt(t *testing.T) {
	pt, shared, r := ptAndShared(t)
	regions := map[string]*fakeRegion{"europe-west1": pt, "us-central1": shared}
	for _, tc := range []struct {
		body, region string
	}{
		{`{"cached_content":"` + cacheIn("us-central1") + `","contents":[{"parts":[{"text":"hi"}]}]}`, "us-central1"},
		{`{"contents":[{"parts":[{"text":"hi"}]}],"cachedContent":"` + cacheIn("us-central1") + `"}`, "us-central1"},
		{`{"contents":[{"parts":[{"text":"hi"}]}],"generationConfig":{"cachedContent":"` + cacheIn("us-central1") + `"}}`, "europe-west1"},
		{`{"contents":[{"parts":[{"text":"hi"}]}],"cachedContent":"us-central1/cachedContents/4711"}`, "europe-west1"},
		{`{"contents":[{"parts":[{"text":"hi"}]}],"cachedContent":17}`, "europe-west1"},
		{`{"contents":[{"parts":[{"text":"hi"}]}],"cachedContent":`, "europe-west1"},
	} {
		before := regions[tc.region].calls.Load()
		_, body := r.post(generatePath, tc.body, nil)
		if regions[tc.region].calls.Load() != before+1 {
			t.Errorf("%s: answered %s, not by %s", tc.body, body, tc.region)
		}
	}
}

// TestChatCachedContentGoesWhereItLives: a chat completion through the
// OpenAI SDK that names a cached content where Vertex AI's
// OpenAI-compatible API reads it (extra_body.google.cached_content) is
// served by the cache's region, not the provisioned one that takes first
// attempts, its body unchanged; one whose cache lives where the pool has no
// region is refused with an error that names the location; a cache named
// anywhere else in the body pins nothing.
func TestChatCachedContentGoesWhereItLives(t *testing.T) {
	pt, shared, r := ptAndShared(t)
	c := openai.NewClient(
		option.WithBaseURL(r.http.URL+"/v1/projects/"+project+"/locations/global/endpoints/openapi/"),
		option.WithAPIKey("caller"), option.WithMaxRetries(0))
	ask := func(text string, opts ...option.RequestOption) (string, error) {
		resp, err := c.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
			Model:    "google/" + model,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(text)},
		}, opts...)
		if err != nil {
			return "", err
		}
		return resp.Choices[0].Message.Content, nil
	}
	// What extra_body={"extra_body": {"google": {...}}} sends.
	google := func(member string, loc string) option.RequestOption {
		return option.WithJSONSet("extra_body", map[string]any{"google": map[string]any{member: cacheIn(loc)}})
	}

	for _, member := range []string{"cached_content", "cachedContent"} {
		got, err := ask("From the cache.", google(member, "us-central1"))
		if err != nil {
			t.Fatal(err)
		}
		if got != "us-central1 answers: From the cache." {
			t.Errorf("%s: %q, want the cache's region's answer", member, got)
		}
		if body := shared.Last().Body; !bytes.Contains(body, []byte(`"extra_body":{"google":{"`+member+`":"`+cacheIn("us-central1")+`"}}`)) {
			t.Errorf("%s: the region got %s, want the caller's extra_body unchanged", member, body)
		}
	}

	_, err := ask("From afar.", google("cached_content", "asia-northeast1"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || !strings.Contains(apiErr.Message, `"asia-northeast1"`) {
		t.Errorf("a cache where the pool has no region: %v, want 400 naming its location", err)
	}

	before := pt.calls.Load()
	for _, opt := range []option.RequestOption{
		option.WithJSONSet("cached_content", cacheIn("us-central1")),
		option.WithJSONSet("extra_body", map[string]any{"cached_content": cacheIn("us-central1")}),
		option.WithJSONSet("extra_body", map[string]any{"google": map[string]any{"cached_content": 17}}),
	} {
		if got, err := ask("Not a cache.", opt); err != nil || !strings.HasPrefix(got, "europe-west1 answers:") {
			t.Errorf("a cache named where the API does not read it: %q, %v; want the provisioned region's answer", got, err)
		}
	}
	servedBy(t, r, pt, shared, before, 3, 2)
}
