package emulator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"cloud.google.com/go/aiplatform/apiv1/aiplatformpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/regionwarden/regionwarden/internal/googleerror"
)

// maxBodyBytes bounds a REST request body.
const maxBodyBytes = 8 << 20

var (
	unmarshalJSON = protojson.UnmarshalOptions{DiscardUnknown: true}
	marshalJSON   = protojson.MarshalOptions{}
)

// restHandler serves Vertex's REST surface for one region:
// POST /{v1,v1beta1}/projects/{p}/locations/{l}/publishers/{pub}/models/{m}:{method}
// with method generateContent, streamGenerateContent (SSE with ?alt=sse, else
// a JSON array) or countTokens. Bodies are protojson; errors are Google's
// error JSON. It serves the OpenAI-compatible chat completions too
// (openai.go), a partner model's rawPredict and streamRawPredict as
// Anthropic's Messages API (anthropic.go), the location's context
// caches (caches.go) and Live API sessions (live.go).
func restHandler(r *region) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /{version}/projects/{project}/locations/{location}/publishers/{publisher}/models/{modelAndMethod}", func(w http.ResponseWriter, req *http.Request) {
		serveREST(r, w, req)
	})
	mux.HandleFunc("POST /{version}/projects/{project}/locations/{location}/endpoints/openapi/chat/completions", func(w http.ResponseWriter, req *http.Request) {
		serveChat(r, w, req)
	})
	for _, p := range []string{"/{version}/projects/{project}/locations/{location}/cachedContents", "/{version}/projects/{project}/locations/{location}/cachedContents/{id}"} {
		mux.HandleFunc(p, func(w http.ResponseWriter, req *http.Request) { serveCaches(r, w, req) })
	}
	mux.HandleFunc("GET /ws/{service}/BidiGenerateContent", func(w http.ResponseWriter, req *http.Request) {
		serveLive(r, w, req)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, &apiError{code: codes.NotFound, msg: "The requested URL was not found on this server."})
	})
	return mux
}

func serveREST(r *region, w http.ResponseWriter, req *http.Request) {
	version := req.PathValue("version")
	if version != "v1" && version != "v1beta1" {
		writeError(w, &apiError{code: codes.NotFound, msg: fmt.Sprintf("API version %q is not served", version)})
		return
	}
	model, method, ok := strings.Cut(req.PathValue("modelAndMethod"), ":")
	if !ok {
		writeError(w, &apiError{code: codes.NotFound, msg: "The requested URL was not found on this server."})
		return
	}
	name := "projects/" + req.PathValue("project") + "/locations/" + req.PathValue("location") +
		"/publishers/" + req.PathValue("publisher") + "/models/" + model
	body, err := io.ReadAll(io.LimitReader(req.Body, maxBodyBytes))
	if err != nil {
		writeError(w, &apiError{code: codes.InvalidArgument, msg: "reading the request body: " + err.Error()})
		return
	}
	switch method {
	case "generateContent", "streamGenerateContent":
		var in aiplatformpb.GenerateContentRequest
		if err := unmarshalJSON.Unmarshal(body, &in); err != nil {
			ae := &apiError{code: codes.InvalidArgument, msg: "Invalid JSON payload received. " + err.Error()}
			r.reject(ae)
			writeError(w, ae)
			return
		}
		in.Model = name
		c, ae := r.newCall(&in, headersOf(req.Header))
		if ae != nil {
			r.reject(ae)
			writeError(w, ae)
			return
		}
		if method == "generateContent" {
			restGenerate(req.Context(), r, w, c)
			return
		}
		restStream(r, w, req, c)
	case "rawPredict", "streamRawPredict":
		serveRaw(r, w, req, name, method == "streamRawPredict", body)
	case "countTokens":
		var in aiplatformpb.CountTokensRequest
		if err := unmarshalJSON.Unmarshal(body, &in); err != nil {
			writeError(w, &apiError{code: codes.InvalidArgument, msg: "Invalid JSON payload received. " + err.Error()})
			return
		}
		in.Model = name
		resp, ae := r.countTokens(&in)
		if ae != nil {
			writeError(w, ae)
			return
		}
		writeMessage(w, resp)
	default:
		writeError(w, &apiError{code: codes.NotFound, msg: fmt.Sprintf("method %q is not served", method)})
	}
}

// headersOf reads a REST call's capacity headers.
func headersOf(h http.Header) capacityHeaders {
	return capacityHeaders{requestType: h.Get(HeaderRequestType), sharedRequestType: h.Get(HeaderSharedRequestType)}
}

func restGenerate(ctx context.Context, r *region, w http.ResponseWriter, c call) {
	resp, err := r.generate(ctx, c)
	if err != nil {
		writeServeError(w, err)
		return
	}
	writeMessage(w, resp)
}

// restStream writes the chunks as server-sent events with ?alt=sse, else as
// one JSON array, as Vertex does. Errors before the first chunk are Google's
// error JSON with the error's status; a fault's error after it (one that
// breaks streams) is Google's error object as the stream's last element.
func restStream(r *region, w http.ResponseWriter, req *http.Request, c call) {
	sse := req.URL.Query().Get("alt") == "sse"
	flusher, _ := w.(http.Flusher)
	started := false
	// emit writes one element of the stream: an event, or the array's next
	// element.
	emit := func(b []byte) error {
		if !started {
			if sse {
				w.Header().Set("Content-Type", "text/event-stream")
			} else {
				w.Header().Set("Content-Type", "application/json; charset=UTF-8")
			}
			w.WriteHeader(http.StatusOK)
		}
		var err error
		switch {
		case sse:
			_, err = fmt.Fprintf(w, "data: %s\r\n\r\n", b)
		case !started:
			_, err = fmt.Fprintf(w, "[%s", b)
		default:
			_, err = fmt.Fprintf(w, ",\r\n%s", b)
		}
		started = true
		if flusher != nil {
			flusher.Flush()
		}
		return err
	}
	send := func(m *aiplatformpb.GenerateContentResponse) error {
		b, err := marshalJSON.Marshal(m)
		if err != nil {
			return err
		}
		return emit(b)
	}
	err := r.stream(req.Context(), c, send)
	if ae := (*apiError)(nil); err != nil && started && errors.As(err, &ae) {
		_ = emit(googleerror.JSON(ae.code, ae.msg))
	}
	switch {
	case err != nil && !started:
		writeServeError(w, err)
	case !sse && started:
		_, _ = io.WriteString(w, "]")
	}
}

// writeServeError writes a serving error; a dropped connection writes nothing.
func writeServeError(w http.ResponseWriter, err error) {
	ae := serveError(err)
	if ae.refused {
		return
	}
	writeError(w, ae)
}

// serveError is a serving error as an *apiError: the caller giving up is
// CANCELLED or DEADLINE_EXCEEDED.
func serveError(err error) *apiError {
	var ae *apiError
	if !errors.As(err, &ae) {
		ae = &apiError{code: codes.Canceled, msg: err.Error()}
		if errors.Is(err, context.DeadlineExceeded) {
			ae.code = codes.DeadlineExceeded
		}
	}
	return ae
}

// writeError writes e as Google's REST error JSON with the HTTP status Google
// maps its code to.
func writeError(w http.ResponseWriter, e *apiError) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(googleerror.HTTPStatus(e.code))
	_, _ = w.Write(googleerror.JSON(e.code, e.msg))
}

func writeMessage(w http.ResponseWriter, m proto.Message) {
	b, err := marshalJSON.Marshal(m)
	if err != nil {
		writeError(w, &apiError{code: codes.Internal, msg: err.Error()})
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	_, _ = w.Write(b)
}
