package emulator

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"cloud.google.com/go/aiplatform/apiv1/aiplatformpb"
	"google.golang.org/grpc/codes"
)

// Claude on Vertex AI: a partner model's calls, as Anthropic's SDK makes
// them on Vertex,
//
//	POST /{v1,v1beta1}/projects/{p}/locations/{l}/publishers/{pub}/models/{m}:rawPredict
//	POST .../models/{m}:streamRawPredict
//	POST .../models/count-tokens:rawPredict   (the model counted in the body)
//
// with Anthropic's Messages API as the body and the answer: a message, or
// its server-sent events (message_start, content_block_start,
// content_block_delta per chunk, content_block_stop, message_delta with the
// output's tokens, message_stop). The emulator serves them from the same
// capacity, faults and headers as generateContent. Vertex's own refusals
// (quota, PT full, outages) are Google's error JSON; a stream that fails
// once begun ends with Anthropic's error event.

// countTokensModel is the model of Anthropic's count_tokens on Vertex.
const countTokensModel = "count-tokens"

// messagesRequest is what the emulator reads of a Messages API body.
type messagesRequest struct {
	Model     string          `json:"model"` // count_tokens only
	MaxTokens int             `json:"max_tokens"`
	System    json.RawMessage `json:"system"`
	Messages  []inMessage     `json:"messages"`
}

// anthropicMessage is a Messages API answer.
type anthropicMessage struct {
	ID         string             `json:"id"`
	Type       string             `json:"type"`
	Role       string             `json:"role"`
	Model      string             `json:"model"`
	Content    []anthropicContent `json:"content"`
	StopReason *string            `json:"stop_reason"`
	Usage      anthropicUsage     `json:"usage"`
}

type anthropicContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type anthropicUsage struct {
	InputTokens  int `json:"input_tokens,omitempty"`
	OutputTokens int `json:"output_tokens"`
}

// serveRaw serves one rawPredict (stream false) or streamRawPredict of the
// model named (a resource name) on region r.
func serveRaw(r *region, w http.ResponseWriter, req *http.Request, name string, stream bool, body []byte) {
	var in messagesRequest
	if err := json.Unmarshal(body, &in); err != nil {
		ae := &apiError{code: codes.InvalidArgument, msg: "Invalid JSON payload received. " + err.Error()}
		r.reject(ae)
		writeError(w, ae)
		return
	}
	if strings.HasSuffix(name, "/models/"+countTokensModel) && !stream {
		rawCountTokens(r, w, strings.TrimSuffix(name, countTokensModel)+in.Model, &in)
		return
	}
	gen := generateRequest(name, &in)
	if in.MaxTokens > 0 {
		gen.GenerationConfig.MaxOutputTokens = new(int32(min(in.MaxTokens, 1<<30)))
	}
	c, ae := r.newCall(gen, headersOf(req.Header))
	if ae != nil {
		r.reject(ae)
		writeError(w, ae)
		return
	}
	model := name[strings.LastIndex(name, "/")+1:]
	if stream {
		rawStream(r, w, req, c, model)
		return
	}
	resp, err := r.generate(req.Context(), c)
	if err != nil {
		writeServeError(w, err)
		return
	}
	u := resp.GetUsageMetadata()
	end := "end_turn"
	b, _ := json.Marshal(anthropicMessage{
		ID: resp.GetResponseId(), Type: "message", Role: "assistant", Model: model,
		Content:    []anthropicContent{{Type: "text", Text: responseText(resp)}},
		StopReason: &end,
		Usage:      anthropicUsage{InputTokens: int(u.GetPromptTokenCount()), OutputTokens: int(u.GetCandidatesTokenCount() + u.GetThoughtsTokenCount())},
	})
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// generateRequest is the generateContent request of a Messages body: its
// messages' text (and the system prompt's) as contents of the model named.
func generateRequest(name string, in *messagesRequest) *aiplatformpb.GenerateContentRequest {
	gen := &aiplatformpb.GenerateContentRequest{Model: name, GenerationConfig: &aiplatformpb.GenerationConfig{}, Contents: contentsOf(in.Messages)}
	if len(in.System) > 0 {
		gen.SystemInstruction = &aiplatformpb.Content{Parts: []*aiplatformpb.Part{{Data: &aiplatformpb.Part_Text{Text: contentText(in.System)}}}}
	}
	return gen
}

// rawCountTokens answers Anthropic's count_tokens of the model named: free
// of capacity and faults, as countTokens is.
func rawCountTokens(r *region, w http.ResponseWriter, name string, in *messagesRequest) {
	gen := generateRequest(name, in)
	resp, ae := r.countTokens(&aiplatformpb.CountTokensRequest{Model: name, Contents: gen.Contents, SystemInstruction: gen.SystemInstruction})
	if ae != nil {
		writeError(w, ae)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = fmt.Fprintf(w, `{"input_tokens":%d}`, resp.GetTotalTokens())
}

// rawStream writes a streamed message as Anthropic's server-sent events.
// Errors before the first chunk are Google's error JSON with the error's
// status; a later one ends the stream with Anthropic's error event.
func rawStream(r *region, w http.ResponseWriter, req *http.Request, c call, model string) {
	flusher, _ := w.(http.Flusher)
	started := false
	var output int32
	event := func(name string, data any) error {
		b, err := json.Marshal(data)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
		if flusher != nil {
			flusher.Flush()
		}
		return err
	}
	send := func(m *aiplatformpb.GenerateContentResponse) error {
		if !started {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			started = true
			start := anthropicMessage{ID: m.GetResponseId(), Type: "message", Role: "assistant", Model: model, Content: []anthropicContent{},
				Usage: anthropicUsage{InputTokens: int(m.GetUsageMetadata().GetPromptTokenCount())}}
			if err := event("message_start", map[string]any{"type": "message_start", "message": start}); err != nil {
				return err
			}
			if err := event("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": anthropicContent{Type: "text"}}); err != nil {
				return err
			}
		}
		if u := m.GetUsageMetadata(); u != nil {
			output = max(output, u.GetCandidatesTokenCount()+u.GetThoughtsTokenCount())
		}
		return event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]string{"type": "text_delta", "text": responseText(m)}})
	}
	err := r.stream(req.Context(), c, send)
	switch {
	case err != nil && !started:
		writeServeError(w, err)
	case err != nil:
		if ae := serveError(err); !ae.refused {
			_ = event("error", map[string]any{"type": "error", "error": map[string]string{"type": "api_error", "message": ae.msg}})
		}
	default:
		_ = event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
		_ = event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]string{"stop_reason": "end_turn"}, "usage": anthropicUsage{OutputTokens: int(output)}})
		_ = event("message_stop", map[string]any{"type": "message_stop"})
	}
}
