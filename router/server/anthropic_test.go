package server_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"cloud.google.com/go/aiplatform/apiv1/aiplatformpb"
	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/vertex"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
	"google.golang.org/genproto/googleapis/api/httpbody"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/regionwarden/regionwarden/router/policy"
	"github.com/regionwarden/regionwarden/router/table"
	"github.com/regionwarden/regionwarden/router/upstream/upstreamtest"
)

// claude is a Claude model as Vertex AI names it: its version after an @.
const claude = "claude-sonnet-4-5@20250929"

// claudePool is a pool of claude (publisher anthropic) over regions.
func claudePool(regions ...table.Region) table.Pool {
	p := poolOf(generous(), regions...)
	p.Publisher, p.Model = "anthropic", claude
	return p
}

// anthropicClient is Anthropic's Go SDK on Vertex AI (its vertex option, as
// an application calls Claude on Vertex) pointed at the router: the SDK
// turns a Messages call into rawPredict, or streamRawPredict for a stream,
// of the model in location europe-west1. Its own retries are off, so that
// what a test sees is the router's doing. opts are added to every request.
func (r *router) anthropicClient(opts ...option.RequestOption) anthropic.Client {
	creds := &google.Credentials{ProjectID: project, TokenSource: oauth2.StaticTokenSource(&oauth2.Token{AccessToken: callerTok})}
	return anthropic.NewClient(append([]option.RequestOption{
		vertex.WithCredentials(context.Background(), "europe-west1", project, creds),
		option.WithBaseURL(r.http.URL + "/"), option.WithMaxRetries(0),
	}, opts...)...)
}

// claudeAttempts is how many attempts of the claude pool on the PT's
// region, europe-west1, ended with o.
func claudeAttempts(r *router, o policy.Outcome) float64 {
	return counter(r.t, r.metrics, "regionwarden_router_attempts_total", map[string]string{
		"pool": project + "/anthropic/" + claude, "region": "europe-west1", "tier": "provisioned", "outcome": o.String()})
}

// ask is a Messages call of prompt to claude.
func ask(prompt string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model: claude, MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))},
	}
}

// streamMessage streams a Messages call and returns the message its events
// add up to, and the stream's error.
func streamMessage(c anthropic.Client, prompt string) (anthropic.Message, error) {
	var msg anthropic.Message
	s := c.Messages.NewStreaming(context.Background(), ask(prompt))
	defer func() { _ = s.Close() }()
	for s.Next() {
		if err := msg.Accumulate(s.Current()); err != nil {
			return msg, err
		}
	}
	return msg, s.Err()
}

// text is the text of a message's content.
func text(m anthropic.Message) string {
	var b strings.Builder
	for _, c := range m.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// TestClaudeOnVertexThroughRouter calls Claude on Vertex AI through the
// router with Anthropic's SDK, unary and streamed: the calls go to the PT's
// region as rawPredict and streamRawPredict of the pool's model, the
// caller's body reaches the region with a member no API of this build knows
// and the answer comes back with one, and the tokens of Anthropic's usage
// are counted.
func TestClaudeOnVertexThroughRouter(t *testing.T) {
	pt := startRegion(t, "europe-west1", table.TierProvisioned)
	shared := startRegion(t, "us-central1", table.TierShared)
	pt.set(func(b *upstreamtest.Behavior) { b.ExtraJSON = `"a_future_answer_field":{"n":1}` })
	r := startRouter(t, claudePool(region(pt, 0), region(shared, 0)))
	c := r.anthropicClient(option.WithJSONSet("a_future_option", map[string]any{"level": 3}))

	msg, err := c.Messages.New(context.Background(), ask("Which regions hold capacity?"))
	if err != nil {
		t.Fatal(err)
	}
	if text(*msg) != "europe-west1 answers: Which regions hold capacity?" {
		t.Errorf("answer %q", text(*msg))
	}
	if msg.Usage.InputTokens != upstreamtest.AnthropicInputTokens || !strings.Contains(msg.RawJSON(), `"a_future_answer_field":{"n":1}`) {
		t.Errorf("answer usage %+v, raw %s", msg.Usage, msg.RawJSON())
	}

	streamed, err := streamMessage(c, "Stream it.")
	if err != nil {
		t.Fatal(err)
	}
	if text(streamed) != "[europe-west1 chunk 0][europe-west1 chunk 1][europe-west1 chunk 2]" || streamed.Usage.OutputTokens != upstreamtest.AnthropicOutputTokens {
		t.Errorf("streamed %q, usage %+v", text(streamed), streamed.Usage)
	}

	calls := pt.Seen()
	if len(calls) != 2 || calls[0].Method != upstreamtest.MethodRaw || calls[1].Method != upstreamtest.MethodStreamRaw {
		t.Fatalf("the PT's region saw %+v, want a rawPredict and a streamRawPredict", calls)
	}
	for _, call := range calls {
		if want := "projects/" + project + "/locations/europe-west1/publishers/anthropic/models/" + claude; call.Model != want {
			t.Errorf("%s of model %q, want %q", call.Method, call.Model, want)
		}
		body := string(call.Body)
		if !strings.Contains(body, `"a_future_option":{"level":3}`) || !strings.Contains(body, `"anthropic_version":`) {
			t.Errorf("%s body %s: the caller's members did not reach the region", call.Method, body)
		}
	}
	if n := shared.calls.Load(); n != 0 {
		t.Errorf("the shared region saw %d calls while the PT answered", n)
	}
	for dir, want := range map[string]float64{"input": 2 * upstreamtest.AnthropicInputTokens, "output": 2 * upstreamtest.AnthropicOutputTokens} {
		if got := counter(t, r.metrics, "regionwarden_router_tokens_total", map[string]string{"region": "europe-west1", "direction": dir}); got != want {
			t.Errorf("%s tokens counted %v, want %v", dir, got, want)
		}
	}
}

// TestClaudeFailsOverAndEndsBrokenStreams: a Claude call the PT's region
// fails is retried in another region, as a Gemini call is; a stream that
// fails after its first event is committed, and the caller's SDK reads its
// error, whether the region ended it with Anthropic's error event or broke
// off, where the router ends it with an error event of its own (Anthropic's
// SDKs skip an event without a name: a stream ended by Google's bare error
// would seem to have ended well).
func TestClaudeFailsOverAndEndsBrokenStreams(t *testing.T) {
	// A call the PT's region refuses is answered by the shared region,
	// and the PT's attempt counted as what it was: an UNAVAILABLE is a
	// failure; Anthropic's 529 overloaded_error refuses the call before
	// the model runs, as a 429 does, so the call spills and the region
	// answered for want of capacity.
	for _, tc := range []struct {
		name    string
		fault   error
		outcome policy.Outcome
	}{
		{"failover", status.Error(codes.Unavailable, "backend gone"), policy.Failure},
		{"overloaded", &upstreamtest.HTTPError{Status: 529, Body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`}, policy.Capacity},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pt := startRegion(t, "europe-west1", table.TierProvisioned)
			shared := startRegion(t, "us-central1", table.TierShared)
			pt.set(func(b *upstreamtest.Behavior) { b.Fault = func(int64) error { return tc.fault } })
			r := startRouter(t, claudePool(region(pt, 0), region(shared, 0)))
			c := r.anthropicClient()
			msg, err := c.Messages.New(context.Background(), ask("hi"))
			if err != nil {
				t.Fatal(err)
			}
			if text(*msg) != "us-central1 answers: hi" {
				t.Errorf("answer %q, want the shared region's", text(*msg))
			}
			if got := claudeAttempts(r, tc.outcome); got != 1 {
				t.Errorf("the PT's attempts ended %v: %v, want 1", tc.outcome, got)
			}
		})
	}
	for _, tc := range []struct {
		name string
		set  func(b *upstreamtest.Behavior)
		want string // in the SDK's error
		// what the PT's attempt ended with: an overloaded_error event is
		// the model's capacity full, a stream broken off a failure
		outcome policy.Outcome
	}{
		{"error event", func(b *upstreamtest.Behavior) { b.FailAfterFirstChunk = true }, "overloaded_error", policy.Capacity},
		{"broken off", func(b *upstreamtest.Behavior) { b.CutAfterFirstChunk = true }, "the region's stream broke off", policy.Failure},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pt := startRegion(t, "europe-west1", table.TierProvisioned)
			shared := startRegion(t, "us-central1", table.TierShared)
			pt.set(tc.set)
			r := startRouter(t, claudePool(region(pt, 0), region(shared, 0)))
			msg, err := streamMessage(r.anthropicClient(), "Stream it.")
			var apiErr *anthropic.Error
			if !errors.As(err, &apiErr) || !strings.Contains(apiErr.RawJSON(), tc.want) {
				t.Fatalf("stream ended with %v, want Anthropic's error naming %q", err, tc.want)
			}
			if text(msg) != "[europe-west1 chunk 0]" {
				t.Errorf("streamed %q before the error", text(msg))
			}
			if n := shared.calls.Load(); n != 0 {
				t.Errorf("a committed stream was retried: the shared region got %d calls", n)
			}
			if got := claudeAttempts(r, tc.outcome); got != 1 {
				t.Errorf("PT attempts ended %v counted %v, want 1", tc.outcome, got)
			}
		})
	}
}

// TestClaudeCountTokens: Anthropic's count_tokens on Vertex AI is rawPredict
// of the model count-tokens, the model it counts for named in the body. The
// router routes it by the body's model to that pool's region, keeps
// count-tokens in the path, counts it as a countTokens call, and refuses a
// body that names no model.
func TestClaudeCountTokens(t *testing.T) {
	pt := startRegion(t, "europe-west1", table.TierProvisioned)
	r := startRouter(t, claudePool(region(pt, 0)))
	c := r.anthropicClient()
	n, err := c.Messages.CountTokens(context.Background(), anthropic.MessageCountTokensParams{
		Model:    claude,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("count me"))},
	})
	if err != nil {
		t.Fatal(err)
	}
	if n.InputTokens != upstreamtest.AnthropicInputTokens {
		t.Errorf("counted %d tokens, want %d", n.InputTokens, upstreamtest.AnthropicInputTokens)
	}
	last := pt.Last()
	if want := "projects/" + project + "/locations/europe-west1/publishers/anthropic/models/count-tokens"; last.Model != want || !strings.Contains(string(last.Body), `"model":"`+claude+`"`) {
		t.Errorf("the region saw model %q with body %s, want %q with the body's model", last.Model, last.Body, want)
	}
	r.requestsCounted("countTokens answered 200", map[string]string{"pool": project + "/anthropic/" + claude, "method": "countTokens", "code": "200"}, 1)

	resp, body := r.post("/v1/projects/"+project+"/locations/europe-west1/publishers/anthropic/models/count-tokens:rawPredict", `{"messages":[]}`, nil)
	if code, msg, _ := googleErr(t, body); resp.StatusCode != 400 || code != 400 || !strings.Contains(msg, `no "model"`) {
		t.Errorf("a count without a model: %d %s", resp.StatusCode, body)
	}
}

// TestClaudeOverGRPC: the aiplatform client's RawPredict and
// StreamRawPredict through the router's gRPC surface, as Vertex AI's
// Java and Python clients call Claude: routed by the pool of the endpoint's
// model to the PT's region, the body's bytes unchanged, each event relayed,
// the tokens of Anthropic's usage counted; Anthropic's count_tokens is
// routed by its body's model and reaches the region as count-tokens; a call
// the PT's region fails is answered by the shared one.
func TestClaudeOverGRPC(t *testing.T) {
	pt := startRegion(t, "europe-west1", table.TierProvisioned)
	shared := startRegion(t, "us-central1", table.TierShared)
	r := startRouter(t, claudePool(region(pt, 0), region(shared, 0)))
	c := r.serveGRPC().prediction
	ctx := context.Background()
	endpoint := "projects/" + project + "/locations/us-east5/publishers/anthropic/models/" + claude
	body := []byte(`{"anthropic_version":"vertex-2023-10-16","max_tokens":32,"messages":[{"role":"user","content":"hi"}],"a_future_option":{"level":3}}`)

	resp, err := c.RawPredict(ctx, &aiplatformpb.RawPredictRequest{Endpoint: endpoint, HttpBody: &httpbody.HttpBody{ContentType: "application/json", Data: body}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(resp.GetData()), "europe-west1 answers: hi") {
		t.Errorf("answer %s", resp.GetData())
	}
	s, err := c.StreamRawPredict(ctx, &aiplatformpb.StreamRawPredictRequest{Endpoint: endpoint, HttpBody: &httpbody.HttpBody{ContentType: "application/json", Data: body}})
	if err != nil {
		t.Fatal(err)
	}
	var events strings.Builder
	for {
		m, err := s.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			break
		}
		events.Write(m.GetData())
	}
	if got := events.String(); !strings.Contains(got, "event: message_stop") || strings.Count(got, "event: content_block_delta") != upstreamtest.StreamChunks {
		t.Errorf("streamed %s", got)
	}
	calls := pt.Seen()
	if len(calls) != 2 {
		t.Fatalf("the PT's region saw %d calls, want 2", len(calls))
	}
	for _, call := range calls {
		var data []byte
		switch req := call.Request.(type) {
		case *aiplatformpb.RawPredictRequest:
			data = req.GetHttpBody().GetData()
		case *aiplatformpb.StreamRawPredictRequest:
			data = req.GetHttpBody().GetData()
		}
		if want := "projects/" + project + "/locations/europe-west1/publishers/anthropic/models/" + claude; call.Endpoint != want || !bytes.Equal(data, body) {
			t.Errorf("%s of %q with %s; want %q with the caller's bytes", call.Method, call.Endpoint, data, want)
		}
	}
	for dir, want := range map[string]float64{"input": 2 * upstreamtest.AnthropicInputTokens, "output": 2 * upstreamtest.AnthropicOutputTokens} {
		if got := counter(t, r.metrics, "regionwarden_router_tokens_total", map[string]string{"region": "europe-west1", "direction": dir}); got != want {
			t.Errorf("%s tokens counted %v, want %v", dir, got, want)
		}
	}

	// Anthropic's count_tokens: the endpoint names count-tokens, the body
	// the model counted for.
	countAt := "projects/" + project + "/locations/us-east5/publishers/anthropic/models/count-tokens"
	counted, err := c.RawPredict(ctx, &aiplatformpb.RawPredictRequest{Endpoint: countAt, HttpBody: &httpbody.HttpBody{
		ContentType: "application/json", Data: []byte(`{"model":"` + claude + `","messages":[{"role":"user","content":"hi"}]}`)}})
	if err != nil || !strings.Contains(string(counted.GetData()), `"input_tokens":10`) {
		t.Errorf("count_tokens: %s, %v", counted.GetData(), err)
	}
	if last := pt.Last(); last.Endpoint != "projects/"+project+"/locations/europe-west1/publishers/anthropic/models/count-tokens" {
		t.Errorf("count_tokens reached the region at %q, want its count-tokens", last.Endpoint)
	}
	r.requestsCounted("countTokens answered 200", map[string]string{"pool": project + "/anthropic/" + claude, "method": "countTokens", "code": "200"}, 1)
	if _, err := c.RawPredict(ctx, &aiplatformpb.RawPredictRequest{Endpoint: countAt, HttpBody: &httpbody.HttpBody{Data: []byte(`{"messages":[]}`)}}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("count_tokens without a model: %v, want INVALID_ARGUMENT", err)
	}

	pt.set(func(b *upstreamtest.Behavior) {
		b.Fault = func(int64) error { return status.Error(codes.Unavailable, "backend gone") }
	})
	resp, err = c.RawPredict(ctx, &aiplatformpb.RawPredictRequest{Endpoint: endpoint, HttpBody: &httpbody.HttpBody{ContentType: "application/json", Data: body}})
	if err != nil || !strings.Contains(string(resp.GetData()), "us-central1 answers: hi") {
		t.Errorf("with the PT failing: %s, %v; want the shared region's answer", resp.GetData(), err)
	}
}
