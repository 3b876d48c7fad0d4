package emulator

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"cloud.google.com/go/aiplatform/apiv1/aiplatformpb"
	"google.golang.org/grpc/codes"

	"github.com/regionwarden/regionwarden/internal/googleerror"
)

// The OpenAI-compatible Chat Completions surface of Vertex AI ("Call Gemini
// by using the OpenAI library"): per project and location,
//
//	POST /{v1,v1beta1}/projects/{p}/locations/{l}/endpoints/openapi/chat/completions
//
// with the model as "google/{model}" in the body. The emulator serves it from
// the same capacity, faults and headers as the publisher model surface. Its
// answer's usage carries the traffic type where Vertex puts it,
// usage.extra_properties.google.traffic_type, and counts reasoning tokens in
// completion_tokens_details.reasoning_tokens; a stream is server-sent events
// of chat.completion.chunk objects, the last with the usage, then
// "data: [DONE]". Errors are Google's error JSON in an array, as Google's
// OpenAI-compatible endpoints write them.

// ModelPrefix is how the OpenAI surface names a publisher model: "google/".
const ModelPrefix = "google/"

// chatRequest is what the emulator reads of a chat completion request.
type chatRequest struct {
	Model               string      `json:"model"`
	Stream              bool        `json:"stream"`
	Messages            []inMessage `json:"messages"`
	MaxTokens           int         `json:"max_tokens"`
	MaxCompletionTokens int         `json:"max_completion_tokens"`
}

// inMessage is a message of a chat completion or of Anthropic's Messages
// API, as the emulator reads it: its role and its content's text
// (contentText).
type inMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// contentsOf is the generateContent contents of messages: each one's text.
func contentsOf(messages []inMessage) []*aiplatformpb.Content {
	out := make([]*aiplatformpb.Content, 0, len(messages))
	for _, m := range messages {
		out = append(out, &aiplatformpb.Content{Role: m.Role, Parts: []*aiplatformpb.Part{{Data: &aiplatformpb.Part_Text{Text: contentText(m.Content)}}}})
	}
	return out
}

// text is the text of a message's content: a string, or the text parts of
// an array of parts.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// chatUsage is the usage of a chat completion.
type chatUsage struct {
	PromptTokens            int `json:"prompt_tokens"`
	CompletionTokens        int `json:"completion_tokens"`
	TotalTokens             int `json:"total_tokens"`
	CompletionTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
	ExtraProperties struct {
		Google struct {
			TrafficType string `json:"traffic_type"`
		} `json:"google"`
	} `json:"extra_properties"`
}

type chatMessage struct {
	Role    string `json:"role,omitempty"`
	Content string `json:"content"`
}

type chatChoice struct {
	Index        int          `json:"index"`
	Message      *chatMessage `json:"message,omitempty"`
	Delta        *chatMessage `json:"delta,omitempty"`
	FinishReason *string      `json:"finish_reason"`
}

type chatCompletion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   *chatUsage   `json:"usage,omitempty"`
}

// serveChat serves one chat completion on region r.
func serveChat(r *region, w http.ResponseWriter, req *http.Request) {
	if v := req.PathValue("version"); v != "v1" && v != "v1beta1" {
		writeChatError(w, &apiError{code: codes.NotFound, msg: fmt.Sprintf("API version %q is not served", v)})
		return
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, maxBodyBytes))
	if err != nil {
		writeChatError(w, &apiError{code: codes.InvalidArgument, msg: "reading the request body: " + err.Error()})
		return
	}
	var in chatRequest
	if err := json.Unmarshal(body, &in); err != nil {
		ae := &apiError{code: codes.InvalidArgument, msg: "Invalid JSON payload received. " + err.Error()}
		r.reject(ae)
		writeChatError(w, ae)
		return
	}
	model, ok := strings.CutPrefix(in.Model, ModelPrefix)
	if !ok {
		ae := &apiError{code: codes.InvalidArgument, msg: fmt.Sprintf("model %q must be %s{model}", in.Model, ModelPrefix)}
		r.reject(ae)
		writeChatError(w, ae)
		return
	}
	gen := &aiplatformpb.GenerateContentRequest{
		Model:            "projects/" + req.PathValue("project") + "/locations/" + req.PathValue("location") + "/publishers/google/models/" + model,
		GenerationConfig: &aiplatformpb.GenerationConfig{},
	}
	if n := max(in.MaxTokens, in.MaxCompletionTokens); n > 0 {
		gen.GenerationConfig.MaxOutputTokens = new(int32(min(n, 1<<30)))
	}
	gen.Contents = contentsOf(in.Messages)
	c, ae := r.newCall(gen, headersOf(req.Header))
	if ae != nil {
		r.reject(ae)
		writeChatError(w, ae)
		return
	}
	if in.Stream {
		chatStream(req.Context(), r, w, c, in.Model)
		return
	}
	resp, err := r.generate(req.Context(), c)
	if err != nil {
		writeChatServeError(w, err)
		return
	}
	stop := "stop"
	out := chatCompletion{
		ID: resp.GetResponseId(), Object: "chat.completion", Created: time.Now().Unix(), Model: in.Model,
		Choices: []chatChoice{{Message: &chatMessage{Role: "assistant", Content: responseText(resp)}, FinishReason: &stop}},
		Usage:   usageOf(resp.GetUsageMetadata()),
	}
	b, _ := json.Marshal(out)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// chatStream writes a streamed chat completion as server-sent events.
func chatStream(ctx context.Context, r *region, w http.ResponseWriter, c call, model string) {
	flusher, _ := w.(http.Flusher)
	started := false
	created := time.Now().Unix()
	send := func(m *aiplatformpb.GenerateContentResponse) error {
		if !started {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
		}
		chunk := chatCompletion{
			ID: m.GetResponseId(), Object: "chat.completion.chunk", Created: created, Model: model,
			Choices: []chatChoice{{Delta: &chatMessage{Content: responseText(m)}}},
		}
		if !started {
			chunk.Choices[0].Delta.Role = "assistant"
		}
		if len(m.GetCandidates()) > 0 && m.GetCandidates()[0].GetFinishReason() == aiplatformpb.Candidate_STOP {
			stop := "stop"
			chunk.Choices[0].FinishReason = &stop
			chunk.Usage = usageOf(m.GetUsageMetadata())
		}
		started = true
		b, err := json.Marshal(chunk)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "data: %s\n\n", b)
		if flusher != nil {
			flusher.Flush()
		}
		return err
	}
	err := r.stream(ctx, c, send)
	switch {
	case err != nil && !started:
		writeChatServeError(w, err)
	case started:
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	}
}

// responseText is the text of an answer's first candidate.
func responseText(m *aiplatformpb.GenerateContentResponse) string {
	var b strings.Builder
	if cs := m.GetCandidates(); len(cs) > 0 {
		for _, p := range cs[0].GetContent().GetParts() {
			b.WriteString(p.GetText())
		}
	}
	return b.String()
}

// usageOf is the chat usage of a usage metadata.
func usageOf(u *aiplatformpb.GenerateContentResponse_UsageMetadata) *chatUsage {
	out := &chatUsage{
		PromptTokens:     int(u.GetPromptTokenCount()),
		CompletionTokens: int(u.GetCandidatesTokenCount()),
		TotalTokens:      int(u.GetTotalTokenCount()),
	}
	out.CompletionTokensDetails.ReasoningTokens = int(u.GetThoughtsTokenCount())
	out.ExtraProperties.Google.TrafficType = u.GetTrafficType().String()
	return out
}

// writeChatServeError writes a serving error; a dropped connection writes
// nothing.
func writeChatServeError(w http.ResponseWriter, err error) {
	ae := serveError(err)
	if ae.refused {
		return
	}
	writeChatError(w, ae)
}

// writeChatError writes e as Google's error JSON in an array.
func writeChatError(w http.ResponseWriter, e *apiError) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(googleerror.HTTPStatus(e.code))
	_, _ = w.Write([]byte("["))
	_, _ = w.Write(googleerror.JSON(e.code, e.msg))
	_, _ = w.Write([]byte("]"))
}
