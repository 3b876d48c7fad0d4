package emulator_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/regionwarden/regionwarden/internal/emulator"
)

// openAIClient is the official OpenAI Go SDK pointed at a location's
// OpenAI-compatible endpoint, as "Call Gemini by using the OpenAI library"
// sets it up: base URL .../projects/{p}/locations/{l}/endpoints/openapi.
func openAIClient(baseURL string, opts ...option.RequestOption) openai.Client {
	return openai.NewClient(append([]option.RequestOption{
		option.WithBaseURL(baseURL), option.WithAPIKey("token"), option.WithMaxRetries(0),
	}, opts...)...)
}

// openAITraffic is the traffic type a chat completion's usage carries in
// extra_properties.google.traffic_type, "" when it carries none.
func openAITraffic(u openai.CompletionUsage) string {
	f, ok := u.JSON.ExtraFields["extra_properties"]
	if !ok {
		return ""
	}
	raw := f.Raw()
	for _, t := range []string{"ON_DEMAND_PRIORITY", "ON_DEMAND_FLEX", "ON_DEMAND", "PROVISIONED_THROUGHPUT"} {
		if strings.Contains(raw, `"`+t+`"`) {
			return t
		}
	}
	return ""
}

// TestOpenAISurface: the OpenAI SDK's chat completions, unary and streamed,
// against the emulated global location: answers with the traffic type, the
// tier header honored, and a 429 as an API error.
func TestOpenAISurface(t *testing.T) {
	sc := mustParse(t, tierScenario)
	e, clock := start(t, sc, 1)
	clock.Set(time.Minute)
	base := "http://" + regionAddr(t, e, "global").REST + "/v1/projects/demo-project/locations/global/endpoints/openapi/"
	c := openAIClient(base)
	params := openai.ChatCompletionNewParams{
		Model:    emulator.ModelPrefix + sc.Model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello.")},
	}

	resp, err := c.Chat.Completions.New(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Choices) != 1 || !strings.Contains(resp.Choices[0].Message.Content, "Emulated answer") {
		t.Errorf("choices = %+v", resp.Choices)
	}
	if resp.Usage.PromptTokens == 0 || resp.Usage.TotalTokens <= resp.Usage.PromptTokens {
		t.Errorf("usage = %+v", resp.Usage)
	}
	if got := openAITraffic(resp.Usage); got != "PROVISIONED_THROUGHPUT" {
		t.Errorf("traffic type %q, want PROVISIONED_THROUGHPUT", got)
	}

	// Streamed, asking for Priority PayGo alone.
	stream := c.Chat.Completions.NewStreaming(t.Context(), params,
		option.WithHeader("X-Vertex-AI-LLM-Request-Type", "shared"), option.WithHeader("X-Vertex-AI-LLM-Shared-Request-Type", "priority"))
	var text strings.Builder
	var usage openai.CompletionUsage
	chunks := 0
	for stream.Next() {
		ch := stream.Current()
		chunks++
		for _, choice := range ch.Choices {
			text.WriteString(choice.Delta.Content)
		}
		if ch.Usage.TotalTokens > 0 {
			usage = ch.Usage
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if chunks < 2 || !strings.Contains(text.String(), "Emulated answer") {
		t.Errorf("%d chunks, text %q", chunks, text.String())
	}
	if got := openAITraffic(usage); got != "ON_DEMAND_PRIORITY" {
		t.Errorf("streamed traffic type %q, want ON_DEMAND_PRIORITY", got)
	}

	// Over the PT asked alone: Google's 429 reaches the SDK as an API error.
	var apiErr *openai.Error
	for range 5 {
		_, err = c.Chat.Completions.New(t.Context(), params, option.WithHeader("X-Vertex-AI-LLM-Request-Type", "dedicated"))
		if err != nil {
			break
		}
	}
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("err = %v, want a 429 API error", err)
	}
	if body := string(apiErr.DumpResponse(true)); !strings.Contains(body, "Exceeded the Provisioned Throughput") {
		t.Errorf("429 answer %q, want the PT-full message", body)
	}
}
