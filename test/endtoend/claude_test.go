package endtoend

import (
	"context"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/vertex"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

	"github.com/regionwarden/regionwarden/router/metrics"
	"github.com/regionwarden/regionwarden/router/policy"
	"github.com/regionwarden/regionwarden/router/table"
)

// claude is Claude on Vertex AI, as Anthropic's SDK names it.
const claude = "claude-sonnet-4-5@20250929"

// claudeScenario: Provisioned Throughput for Claude in us-east5, two calls a
// second (over one second), and pay-as-you-go in europe-west1, two calls a
// second; the emulator's clock stands still.
const claudeScenario = `
name: claude-today
project: demo-project
publisher: anthropic
model: claude-sonnet-4-5@20250929
duration: 10m
load: {requestsPerSecond: 1}
regions:
- name: us-east5
  tier: provisioned
  provisioned: {gsus: 1, tokensPerSecond: 1000000, requestsPerSecond: 2, window: 1s}
  latency: {distribution: fixed, p50: 10ms}
- name: europe-west1
  tier: shared
  capacity: {requestsPerSecond: 2}
  latency: {distribution: fixed, p50: 10ms}
`

// claudePool is the scenario's pool as the operator renders it.
func claudePool(addr map[string]string) table.Pool {
	return dedicatedPool(addr, "anthropic", claude, "us-east5", "europe-west1")
}

// TestClaudeOnVertexToday drives Claude on Vertex AI through the router with
// Anthropic's SDK (its vertex option, on us-east5) in front of emulated
// locations: calls take the PT first, and once it is full (Google's 429 for
// a PT called dedicated) they spill to pay-as-you-go in another region,
// unary and streamed, without a failed call; count_tokens is answered too.
// What served each call is the emulator's own count.
func TestClaudeOnVertexToday(t *testing.T) {
	e := startScenario(t, claudeScenario, claudePool)
	creds := &google.Credentials{ProjectID: project, TokenSource: oauth2.StaticTokenSource(&oauth2.Token{AccessToken: "caller"})}
	c := anthropic.NewClient(
		vertex.WithCredentials(context.Background(), "us-east5", project, creds),
		aoption.WithBaseURL(e.http.URL+"/"), aoption.WithMaxRetries(0),
	)
	ask := anthropic.MessageNewParams{
		Model: claude, MaxTokens: 32,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Which capacity serves me?"))},
	}
	for i := range 3 {
		msg, err := c.Messages.New(t.Context(), ask)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if len(msg.Content) == 0 || !strings.Contains(msg.Content[0].Text, "Emulated answer") || msg.Usage.InputTokens == 0 || msg.Usage.OutputTokens == 0 {
			t.Errorf("call %d: %+v", i, msg)
		}
	}
	var streamed anthropic.Message
	s := c.Messages.NewStreaming(t.Context(), ask)
	for s.Next() {
		if err := streamed.Accumulate(s.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if len(streamed.Content) == 0 || !strings.Contains(streamed.Content[0].Text, "Emulated answer") || streamed.Usage.OutputTokens == 0 {
		t.Errorf("streamed %+v", streamed)
	}
	if got := e.served("us-east5")["PROVISIONED_THROUGHPUT"]; got != 2 {
		t.Errorf("the PT served %d calls, want its 2 a second", got)
	}
	if got := e.served("europe-west1")["ON_DEMAND"]; got != 2 {
		t.Errorf("pay-as-you-go served %d calls, want the 2 the full PT refused", got)
	}
	full, _ := e.metrics.AttemptSeries(metrics.PoolLabel(project, "anthropic", claude), "us-east5", string(table.TierProvisioned), policy.ProvisionedFull)
	if got := testutil.ToFloat64(full); got < 1 {
		t.Errorf("the router learned of no full PT (%v provisioned_full attempts)", got)
	}

	n, err := c.Messages.CountTokens(t.Context(), anthropic.MessageCountTokensParams{Model: claude, Messages: ask.Messages})
	if err != nil {
		t.Fatal(err)
	}
	if n.InputTokens == 0 {
		t.Errorf("count_tokens %+v", n)
	}
}
