package upstreamtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"cloud.google.com/go/aiplatform/apiv1/aiplatformpb"
	"google.golang.org/genproto/googleapis/api/httpbody"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Anthropic's token counts in the region's answers to rawPredict and
// streamRawPredict: the input's, and the output's of a whole answer.
const (
	AnthropicInputTokens  = 10
	AnthropicOutputTokens = 5
)

// anthropicRequest is what the region reads of an Anthropic Messages body:
// the text of its last message (a string, or text blocks).
type anthropicRequest struct {
	Messages []struct {
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

// prompt is the text of the request's last message: a string, or the
// text of its blocks.
func (a *anthropicRequest) prompt() string {
	if len(a.Messages) == 0 {
		return ""
	}
	c := a.Messages[len(a.Messages)-1].Content
	var text string
	if json.Unmarshal(c, &text) != nil {
		var blocks []struct{ Text string }
		_ = json.Unmarshal(c, &blocks)
		for _, bl := range blocks {
			text += bl.Text
		}
	}
	return text
}

// serveRaw answers a partner model's rawPredict (a Claude message) or
// streamRawPredict (its server-sent events), as Vertex relays Anthropic's
// Messages API: the text is "<region> answers: <prompt>" unary and the
// region's chunks streamed, every answer object with the behavior's extra
// members; a stream that fails after its first chunk ends with an
// overloaded_error event, one cut after it breaks off. A count (rawPredict
// of the model count-tokens, the model counted for in the body) answers
// AnthropicInputTokens.
func (r *Region) serveRaw(w http.ResponseWriter, b Behavior, method string, count bool, body []byte) {
	var in anthropicRequest
	if err := json.Unmarshal(body, &in); err != nil || len(in.Messages) == 0 {
		writeError(w, status.Error(codes.InvalidArgument, "Invalid JSON payload received: a message needs messages."))
		return
	}
	if count {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(withMembers(b, fmt.Sprintf(`{"input_tokens":%d}`, AnthropicInputTokens)))
		return
	}
	if method == MethodRaw {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(withMembers(b, fmt.Sprintf(
			`{"id":"msg_%s","type":"message","role":"assistant","content":[{"type":"text","text":%q}],"stop_reason":"end_turn","usage":{"input_tokens":%d,"output_tokens":%d}}`,
			r.Name, r.unaryText(in.prompt()), AnthropicInputTokens, AnthropicOutputTokens)))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(event, data string) bool {
		_, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, withMembers(b, data))
		return err == nil && rc.Flush() == nil
	}
	if !send("message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_%s","type":"message","role":"assistant","content":[],"usage":{"input_tokens":%d,"output_tokens":1}}}`, r.Name, AnthropicInputTokens)) ||
		!send("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`) {
		return
	}
	n := b.Chunks
	if n < 0 {
		n = StreamChunks
	}
	for i := 0; b.Endless || i < n; i++ {
		if !send("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":%q}}`, r.chunkText(i, b.Pad))) {
			return
		}
		if b.FailAfterFirstChunk {
			send("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
			return
		}
		if b.CutAfterFirstChunk {
			panic(http.ErrAbortHandler)
		}
	}
	_ = send("content_block_stop", `{"type":"content_block_stop","index":0}`) &&
		send("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":%d}}`, AnthropicOutputTokens)) &&
		send("message_stop", `{"type":"message_stop"}`)
}

// withMembers is the JSON object obj with the behavior's extra members.
func withMembers(b Behavior, obj string) []byte {
	if b.ExtraJSON == "" {
		return []byte(obj)
	}
	return []byte(obj[:len(obj)-1] + "," + b.ExtraJSON + "}")
}

// RawPredict answers a partner model's gRPC call as serveRaw answers its
// REST call: the Messages API answer in an HttpBody.
func (p *predictionServer) RawPredict(ctx context.Context, req *aiplatformpb.RawPredictRequest) (*httpbody.HttpBody, error) {
	b, err := p.r.record(ctx, grpcCall(ctx, MethodRaw, req.GetEndpoint(), req.GetEndpoint(), req))
	if err != nil {
		return nil, err
	}
	rec := httptest.NewRecorder()
	p.r.serveRaw(rec, b, MethodRaw, strings.HasSuffix(req.GetEndpoint(), "/count-tokens"), req.GetHttpBody().GetData())
	if rec.Code != http.StatusOK {
		return nil, status.Errorf(codes.InvalidArgument, "%s", rec.Body.Bytes())
	}
	return &httpbody.HttpBody{ContentType: rec.Header().Get("Content-Type"), Data: rec.Body.Bytes()}, nil
}

// StreamRawPredict answers a partner model's streamed gRPC call as serveRaw
// answers streamRawPredict: each event an HttpBody message.
func (p *predictionServer) StreamRawPredict(req *aiplatformpb.StreamRawPredictRequest, st aiplatformpb.PredictionService_StreamRawPredictServer) error {
	b, err := p.r.record(st.Context(), grpcCall(st.Context(), MethodStreamRaw, req.GetEndpoint(), req.GetEndpoint(), req))
	if err != nil {
		return err
	}
	w := &eventSender{st: st, h: http.Header{}}
	p.r.serveRaw(w, b, MethodStreamRaw, false, req.GetHttpBody().GetData())
	return w.err
}

// eventSender is the http.ResponseWriter of a streamed gRPC answer: each
// write is one HttpBody message.
type eventSender struct {
	st  aiplatformpb.PredictionService_StreamRawPredictServer
	h   http.Header
	err error
}

func (w *eventSender) Header() http.Header { return w.h }
func (w *eventSender) WriteHeader(int)     {}
func (w *eventSender) Flush()              {}

func (w *eventSender) Write(p []byte) (int, error) {
	if w.err == nil {
		w.err = w.st.Send(&httpbody.HttpBody{ContentType: "text/event-stream", Data: bytes.Clone(p)})
	}
	return len(p), w.err
}
