// Package upstreamtest is the fake Vertex AI region of the router's tests
// (router/upstream, router/server, cmd/router): one in-process region on a
// loopback address that serves, as Google's regional endpoints do, both the
// Vertex REST surface (HTTP/1.1 and h2c) and the gRPC PredictionService and
// LlmUtilityService. It records what it saw of every call, byte for byte, and
// answers as its Behavior says: text naming itself, a fault, a stream that
// fails after its first chunk, a call that blocks until the caller goes.
//
// It speaks Google's error model (error JSON, HTTP status and status name per
// code) as internal/googleerror writes it from Google's documentation, as the
// emulator does, rather than borrowing router/upstream's mapping, so a
// mistake in the router's mapping cannot hide behind the fake.
package upstreamtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/aiplatform/apiv1/aiplatformpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/regionwarden/regionwarden/internal/googleerror"
	"github.com/regionwarden/regionwarden/router/table"
)

// Surfaces a call arrives on.
const (
	REST = "rest"
	GRPC = "grpc"
)

// Methods, by their gRPC names on both surfaces.
const (
	MethodGenerate = "GenerateContent"
	MethodStream   = "StreamGenerateContent"
	MethodCount    = "CountTokens"
	MethodCompute  = "ComputeTokens"
	MethodPredict  = "Predict"
	MethodEmbed    = "EmbedContent"
	// MethodRaw and MethodStreamRaw are a partner model's calls (REST),
	// answered as Anthropic's Messages API (serveRaw).
	MethodRaw       = "RawPredict"
	MethodStreamRaw = "StreamRawPredict"
	// MethodChat is a chat completion of the OpenAI-compatible API (REST).
	MethodChat = "ChatCompletions"
	// MethodCaches is a call of the cachedContents collection or one of
	// its cached contents (REST); Call.Header's method says which.
	MethodCaches = "CachedContents"
	// MethodLocation is any other call of a location's resources that the
	// region answers (batch prediction jobs; REST);
	// Call.Header's method says which (serveLocation).
	MethodLocation = "Location"
)

// StreamChunks is how many chunks a streamed answer has unless Behavior.Chunks says.
const StreamChunks = 3

// Behavior is how the region answers. The zero value answers every call.
type Behavior struct {
	// Fault, when set, decides the answer to call n (1-based, counted over
	// both surfaces) from its gRPC status error; nil answers normally.
	Fault func(n int64) error
	// FailAfterFirstChunk ends streams with UNAVAILABLE after one chunk: over
	// REST an error event in the stream, as Vertex sends one.
	FailAfterFirstChunk bool
	// CutAfterFirstChunk breaks the connection off after a REST stream's
	// first chunk, as a region lost midway does: no error, no end.
	CutAfterFirstChunk bool
	// Block makes calls wait for their context to end; each then sends its
	// context's error on Ended.
	Block bool
	// Hold, when set, makes calls wait until it is closed (or their context
	// ends), then answer.
	Hold <-chan struct{}
	// Chunks is how many chunks a streamed answer has; negative means
	// StreamChunks. Start sets it to StreamChunks.
	Chunks int
	// Endless makes streams send chunks until the caller goes.
	Endless bool
	// Pad adds this many bytes of text to every streamed chunk.
	Pad int
	// ExtraJSON is raw JSON members ("\"a\":1,\"b\":{}") added to every REST
	// answer object, as fields no proto of this build knows.
	ExtraJSON string
	// ExtraProto is protobuf wire bytes appended to every gRPC answer, as
	// fields no proto of this build knows.
	ExtraProto []byte
	// Discard reads REST bodies without keeping or decoding them, and
	// answers at once: for tests that send bodies too large to keep.
	Discard bool
	// Refuse answers the calls whose Authorization it names with the code
	// it gives, as Google answers credentials it refuses: Unauthenticated
	// (401) for a token expired, revoked or not Google's, PermissionDenied
	// (403) for an identity without aiplatform.endpoints.predict; any other
	// code as a failure of Google's servers on what those calls send
	// (Internal: a document they cannot process), wherever they go.
	Refuse map[string]codes.Code
	// LiveResumption makes a Live session set up send, after its
	// setupComplete, a sessionResumptionUpdate with a handle naming the
	// region ("<name>-handle"), as Google's servers do for a setup that
	// asks for session resumption.
	LiveResumption bool
	// LiveTurnFault, when set, decides the answer to turn n (1-based) of a
	// Live session: an error closes the session as Google's servers do
	// (a turn past a full quota, say); nil answers it.
	LiveTurnFault func(turn int) error
	// Quick answers REST generateContent calls as cheaply as a region can:
	// the body read and dropped, one answer encoded once, nothing recorded
	// but the count. For benchmarks, where the region's own cost and a
	// record growing with every call would blur what is measured.
	Quick bool
}

// Call is what the region saw of one call.
type Call struct {
	Surface string
	Method  string
	// Path is the REST request's path; "" over gRPC.
	Path string
	// Model is the model resource name: from the path over REST, from the
	// request's model field over gRPC.
	Model string
	// Endpoint is a gRPC CountTokens request's endpoint field.
	Endpoint string
	// RequestType holds the X-Vertex-AI-LLM-Request-Type values, and
	// SharedRequestType the X-Vertex-AI-LLM-Shared-Request-Type values; nil
	// when absent.
	RequestType       []string
	SharedRequestType []string
	// Auth holds the Authorization values; nil when absent.
	Auth []string
	// Params holds the x-goog-request-params metadata values (gRPC).
	Params []string
	// Header is the REST request's header; Metadata the gRPC call's.
	Header   http.Header
	Metadata metadata.MD
	// Body is the REST body as received (nil with Discard); BodyLen its length.
	Body    []byte
	BodyLen int64
	// Request is the gRPC request as received, unknown fields included.
	Request proto.Message
	// Answer is the REST answer's body as the region wrote it, once the
	// call has ended (not kept for Endless streams).
	Answer []byte
	// Messages are a Live session's messages from the caller after its
	// setup (Body), as they came.
	Messages [][]byte
}

// Region is one fake region. Make it with Start.
type Region struct {
	Name string
	Tier table.Tier
	// Addr is the host:port that serves both surfaces.
	Addr string

	// Started receives the method of every call that blocks or is held, as
	// it starts waiting.
	Started chan string
	// Ended receives the context error of every blocked call as it ends.
	Ended chan error

	calls atomic.Int64
	mu    sync.Mutex
	b     Behavior
	seen  []Call

	quickOnce   sync.Once
	quickAnswer []byte

	caches    map[string]map[string]any // by ID: the cached contents created here
	lastCache int
	jobs      []map[string]any // the batch prediction jobs created here, by ID - 1
}

// Start serves a region named name of tier tier on a free loopback port
// until the test ends.
func Start(t testing.TB, name string, tier table.Tier) *Region {
	t.Helper()
	return StartAt(t, name, tier, "127.0.0.1:0")
}

// StartAt is Start on addr: a region that comes back where one was.
func StartAt(t testing.TB, name string, tier table.Tier, addr string) *Region {
	t.Helper()
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	r := &Region{Name: name, Tier: tier, Addr: lis.Addr().String(),
		Started: make(chan string, 64), Ended: make(chan error, 64), b: Behavior{Chunks: StreamChunks}}
	g := grpc.NewServer()
	aiplatformpb.RegisterPredictionServiceServer(g, &predictionServer{r: r})
	aiplatformpb.RegisterLlmUtilityServiceServer(g, &utilityServer{r: r})
	aiplatformpb.RegisterGenAiCacheServiceServer(g, &cacheServer{r: r})
	rest := r.restHandler()
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	hs := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if req.ProtoMajor == 2 && strings.HasPrefix(req.Header.Get("Content-Type"), "application/grpc") {
				g.ServeHTTP(w, req)
				return
			}
			rest.ServeHTTP(w, req)
		}),
		Protocols:         &protocols,
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = hs.Serve(lis) }()
	t.Cleanup(func() {
		_ = hs.Close()
		g.Stop()
	})
	return r
}

// Set changes the region's behavior.
func (r *Region) Set(fn func(b *Behavior)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fn(&r.b)
}

// Calls is how many calls the region received.
func (r *Region) Calls() int64 { return r.calls.Load() }

// Counter is the region's call counter, for tests that read it often.
func (r *Region) Counter() *atomic.Int64 { return &r.calls }

// Seen returns what the region saw so far, in arrival order.
func (r *Region) Seen() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Call(nil), r.seen...)
}

// Last returns the last call the region saw; the zero Call before any.
func (r *Region) Last() Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.seen) == 0 {
		return Call{}
	}
	return r.seen[len(r.seen)-1]
}

// TableRegion is the region as a routing table lists it, with an RPS hint
// (0: none). A shared region is ejectable.
func (r *Region) TableRegion(rps float64) table.Region {
	return table.Region{Name: r.Name, Endpoint: r.Addr, Tier: r.Tier, Ejectable: r.Tier == table.TierShared,
		Capacity: table.Capacity{RequestsPerSecond: rps}}
}

// ModelName is the resource name a call to this region must carry for
// project, publisher and model.
func (r *Region) ModelName(project, publisher, model string) string {
	return "projects/" + project + "/locations/" + r.Name + "/publishers/" + publisher + "/models/" + model
}

// record notes a call and returns the behavior to answer it with and the
// fault for it, if any. It waits first when the behavior blocks or holds;
// then the returned error is the context's.
func (r *Region) record(ctx context.Context, c Call) (Behavior, error) {
	b, _, err := r.recordAt(ctx, c)
	return b, err
}

// recordAt is record, also returning where the call is in Seen.
func (r *Region) recordAt(ctx context.Context, c Call) (Behavior, int, error) {
	n := r.calls.Add(1)
	r.mu.Lock()
	r.seen = append(r.seen, c)
	i := len(r.seen) - 1
	b := r.b
	r.mu.Unlock()
	err := r.wait(ctx, b, c.Method, n)
	if err == nil {
		err = refused(b.Refuse, c.Auth)
	}
	return b, i, err
}

// refused is the error of a call whose Authorization refuse names, in
// Google's words; nil for one it does not.
func refused(refuse map[string]codes.Code, auth []string) error {
	for _, a := range auth {
		switch refuse[a] {
		case codes.Unauthenticated:
			return status.Error(codes.Unauthenticated, "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.")
		case codes.PermissionDenied:
			return status.Error(codes.PermissionDenied, "Permission 'aiplatform.endpoints.predict' denied on resource (or it may not exist).")
		case codes.OK:
		default:
			// A call whose content Google's servers fail on, wherever
			// it goes (a document they cannot process).
			return status.Error(refuse[a], "Internal error encountered.")
		}
	}
	return nil
}

// wait blocks or holds call n as b says, and returns its fault, if any.
func (r *Region) wait(ctx context.Context, b Behavior, method string, n int64) error {
	switch {
	case b.Block:
		r.Started <- method
		<-ctx.Done()
		r.Ended <- ctx.Err()
		return status.FromContextError(ctx.Err()).Err()
	case b.Hold != nil:
		r.Started <- method
		select {
		case <-b.Hold:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
	if b.Fault != nil {
		return b.Fault(n)
	}
	return nil
}

// answerRecorder keeps the bytes of a REST answer as they are written.
type answerRecorder struct {
	http.ResponseWriter
	buf  bytes.Buffer
	keep bool
}

func (a *answerRecorder) Write(p []byte) (int, error) {
	if a.keep {
		a.buf.Write(p)
	}
	return a.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection.
func (a *answerRecorder) Unwrap() http.ResponseWriter { return a.ResponseWriter }

// trafficType is what the region reports served a call: its tier.
func (r *Region) trafficType() aiplatformpb.GenerateContentResponse_UsageMetadata_TrafficType {
	if r.Tier == table.TierProvisioned {
		return aiplatformpb.GenerateContentResponse_UsageMetadata_PROVISIONED_THROUGHPUT
	}
	return aiplatformpb.GenerateContentResponse_UsageMetadata_ON_DEMAND
}

// answer is a reply: text, and usage on the last chunk.
func (r *Region) answer(text string, last bool) *aiplatformpb.GenerateContentResponse {
	a := &aiplatformpb.GenerateContentResponse{
		Candidates: []*aiplatformpb.Candidate{{
			Content: &aiplatformpb.Content{Role: "model", Parts: []*aiplatformpb.Part{{Data: &aiplatformpb.Part_Text{Text: text}}}},
		}},
		ModelVersion: "fake-" + r.Name,
	}
	if last {
		a.Candidates[0].FinishReason = aiplatformpb.Candidate_STOP
		a.UsageMetadata = &aiplatformpb.GenerateContentResponse_UsageMetadata{
			PromptTokenCount: 7, CandidatesTokenCount: 5, TotalTokenCount: 12, TrafficType: r.trafficType(),
		}
	}
	return a
}

// unaryText is the text of a unary answer to prompt.
func (r *Region) unaryText(prompt string) string { return r.Name + " answers: " + prompt }

// chunkText is the text of streamed chunk i, padded with pad bytes.
func (r *Region) chunkText(i, pad int) string {
	return fmt.Sprintf("[%s chunk %d]", r.Name, i) + strings.Repeat("x", pad)
}

// Prompt is the text of a request's contents, concatenated.
func Prompt(contents []*aiplatformpb.Content) string {
	var b strings.Builder
	for _, c := range contents {
		for _, p := range c.GetParts() {
			b.WriteString(p.GetText())
		}
	}
	return b.String()
}

// RecvAll reads a StreamGenerateContent stream to its end: the messages,
// and the error that ended it (nil for the stream's end).
func RecvAll(s aiplatformpb.PredictionService_StreamGenerateContentClient) ([]*aiplatformpb.GenerateContentResponse, error) {
	var out []*aiplatformpb.GenerateContentResponse
	for {
		m, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, m)
	}
}

// ErrorJSON is Google's REST error body for err's status.
func ErrorJSON(err error) []byte {
	st := status.Convert(err)
	return googleerror.JSON(st.Code(), st.Message())
}

// HTTPError is a fault (Behavior.Fault) that a REST call is answered with
// as it is: its status and body, such as Anthropic's 529 overloaded_error
// that Vertex AI relays for Claude.
type HTTPError struct {
	Status int
	Body   string
}

func (e *HTTPError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.Status, e.Body) }

// writeError answers err as Google's REST APIs do, an *HTTPError as it is.
func writeError(w http.ResponseWriter, err error) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	if he, ok := errors.AsType[*HTTPError](err); ok {
		w.WriteHeader(he.Status)
		_, _ = io.WriteString(w, he.Body)
		return
	}
	w.WriteHeader(googleerror.HTTPStatus(status.Code(err)))
	_, _ = w.Write(ErrorJSON(err))
}

// restMethods are the gRPC names of the REST methods of a publisher model
// the region serves.
var restMethods = map[string]string{
	"generateContent": MethodGenerate, "streamGenerateContent": MethodStream,
	"countTokens": MethodCount, "computeTokens": MethodCompute,
	"predict": MethodPredict, "embedContent": MethodEmbed,
	"rawPredict": MethodRaw, "streamRawPredict": MethodStreamRaw,
}

// restHandler serves the Vertex REST surface for publisher models, and
// unary chat completions of the OpenAI-compatible API.
func (r *Region) restHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /{version}/projects/{project}/locations/{location}/publishers/{publisher}/models/{modelMethod}", r.serveREST)
	mux.HandleFunc("POST /{version}/projects/{project}/locations/{location}/endpoints/openapi/chat/completions", r.serveChat)
	mux.HandleFunc("/{version}/projects/{project}/locations/{location}/cachedContents", r.serveCaches)
	mux.HandleFunc("/{version}/projects/{project}/locations/{location}/cachedContents/{id}", r.serveCaches)
	mux.HandleFunc("/{version}/projects/{project}/locations/{location}/batchPredictionJobs", r.serveLocation)
	mux.HandleFunc("/{version}/projects/{project}/locations/{location}/batchPredictionJobs/{id}", r.serveLocation)
	mux.HandleFunc("GET /ws/{service}/BidiGenerateContent", r.serveLive)
	mux.HandleFunc("GET /{version}/publishers/{publisher}/models/{model}", func(w http.ResponseWriter, req *http.Request) {
		if _, ok := r.recordResource(w, req, MethodLocation); ok {
			writeValue(w, map[string]any{
				"name":        "publishers/" + req.PathValue("publisher") + "/models/" + req.PathValue("model"),
				"versionId":   "001",
				"launchStage": "GA",
			})
		}
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, req *http.Request) {
		writeError(w, status.Errorf(codes.NotFound, "The requested URL %s was not found on this server.", req.URL.Path))
	})
	return mux
}

func (r *Region) serveREST(w http.ResponseWriter, req *http.Request) {
	model, method, _ := strings.Cut(req.PathValue("modelMethod"), ":")
	c := Call{
		Surface: REST, Path: req.URL.Path,
		Model: "projects/" + req.PathValue("project") + "/locations/" + req.PathValue("location") +
			"/publishers/" + req.PathValue("publisher") + "/models/" + model,
		RequestType:       req.Header.Values("X-Vertex-AI-LLM-Request-Type"),
		SharedRequestType: req.Header.Values("X-Vertex-AI-LLM-Shared-Request-Type"),
		Auth:              req.Header.Values("Authorization"),
		Header:            req.Header.Clone(),
	}
	if c.Method = restMethods[method]; c.Method == "" {
		writeError(w, status.Errorf(codes.NotFound, "method %q is not served", method))
		return
	}
	r.mu.Lock()
	discard, quick := r.b.Discard, r.b.Quick
	r.mu.Unlock()
	if quick && c.Method == MethodGenerate {
		r.quick(w, req)
		return
	}
	var err error
	if discard {
		c.BodyLen, err = io.Copy(io.Discard, req.Body)
	} else {
		c.Body, err = io.ReadAll(req.Body)
		c.BodyLen = int64(len(c.Body))
	}
	if err != nil {
		return
	}
	b, at, err := r.recordAt(req.Context(), c)
	rec := &answerRecorder{ResponseWriter: w, keep: !b.Endless}
	defer func() {
		r.mu.Lock()
		r.seen[at].Answer = rec.buf.Bytes()
		r.mu.Unlock()
	}()
	w = rec
	if err != nil {
		writeError(w, err)
		return
	}
	switch c.Method {
	case MethodPredict:
		// An embedding model's answer: one embedding (predicted).
		r.writeJSON(w, b, r.predicted())
		return
	case MethodEmbed:
		r.writeJSON(w, b, r.embedded())
		return
	case MethodRaw, MethodStreamRaw:
		r.serveRaw(w, b, c.Method, strings.HasSuffix(c.Model, "/count-tokens"), c.Body)
		return
	}
	var in aiplatformpb.GenerateContentRequest
	if !discard {
		if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(c.Body, &in); err != nil {
			writeError(w, status.Error(codes.InvalidArgument, "Invalid JSON payload received. "+err.Error()))
			return
		}
	}
	switch c.Method {
	case MethodGenerate:
		r.writeJSON(w, b, r.answer(r.unaryText(Prompt(in.GetContents())), true))
	case MethodCount:
		r.writeJSON(w, b, &aiplatformpb.CountTokensResponse{TotalTokens: 42, TotalBillableCharacters: int32(len(r.Name))})
	case MethodCompute:
		r.writeJSON(w, b, r.computed())
	case MethodStream:
		r.restStream(w, req, b)
	}
}

// serveChat answers a unary chat completion with the region's answer to
// its last message ("<region> answers: <message>"), after the behavior's
// waits and faults, as serveREST answers generateContent; the call's Model
// is the body's ("google/{model}").
func (r *Region) serveChat(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return
	}
	var in struct {
		Model    string `json:"model"`
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
	}
	jerr := json.Unmarshal(body, &in)
	c := Call{
		Surface: REST, Method: MethodChat, Path: req.URL.Path, Model: in.Model,
		Auth: req.Header.Values("Authorization"), Header: req.Header.Clone(),
		Body: body, BodyLen: int64(len(body)),
	}
	if _, err := r.record(req.Context(), c); err != nil {
		writeError(w, err)
		return
	}
	if jerr != nil || len(in.Messages) == 0 {
		writeError(w, status.Error(codes.InvalidArgument, "Invalid JSON payload received: a chat completion needs messages."))
		return
	}
	writeValue(w, map[string]any{
		"id": "chat-" + r.Name, "object": "chat.completion", "model": in.Model,
		"choices": []any{map[string]any{
			"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": r.unaryText(in.Messages[len(in.Messages)-1].Content)},
		}},
		"usage": map[string]any{"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
	})
}

// writeValue answers v as JSON.
func writeValue(w http.ResponseWriter, v any) {
	answer, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(answer)
}

// recordResource reads and records a call of a location's resources as
// method, its HTTP method in Call.Header's "X-Http-Method", and returns its
// body; false when the call is answered (the behavior's fault) or gone.
func (r *Region) recordResource(w http.ResponseWriter, req *http.Request, method string) ([]byte, bool) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, false
	}
	h := req.Header.Clone()
	h.Set("X-Http-Method", req.Method)
	c := Call{
		Surface: REST, Method: method, Path: req.URL.Path,
		Auth: req.Header.Values("Authorization"), Header: h, Body: body, BodyLen: int64(len(body)),
	}
	if _, err := r.record(req.Context(), c); err != nil {
		writeError(w, err)
		return nil, false
	}
	return body, true
}

// serveCaches keeps cached contents as a location does: create (POST on
// the collection, the caller's members kept and a name given), list (GET on
// it), get, update (PATCH: the members sent replace those kept) and delete.
// The call is recorded with its method in Call.Header ("X-Http-Method").
func (r *Region) serveCaches(w http.ResponseWriter, req *http.Request) {
	body, ok := r.recordResource(w, req, MethodCaches)
	if !ok {
		return
	}
	var in map[string]any
	if len(body) > 0 && json.Unmarshal(body, &in) != nil {
		writeError(w, status.Error(codes.InvalidArgument, "Invalid JSON payload received."))
		return
	}
	id := req.PathValue("id")
	name := "projects/" + req.PathValue("project") + "/locations/" + r.Name + "/cachedContents/" + id
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.caches == nil {
		r.caches = map[string]map[string]any{}
	}
	var out any
	switch {
	case id == "" && req.Method == http.MethodPost:
		r.lastCache++
		id = fmt.Sprint(r.lastCache)
		if in == nil {
			in = map[string]any{}
		}
		in["name"] = name + id // name ends in "cachedContents/" for the collection
		r.caches[id] = in
		out = in
	case id == "" && req.Method == http.MethodGet:
		list := []any{}
		for i := 1; i <= r.lastCache; i++ {
			if cc, ok := r.caches[fmt.Sprint(i)]; ok {
				list = append(list, cc)
			}
		}
		out = map[string]any{"cachedContents": list}
	case r.caches[id] == nil:
		writeError(w, status.Errorf(codes.NotFound, "CachedContent not found (or has expired): %s", name))
		return
	case req.Method == http.MethodGet:
		out = r.caches[id]
	case req.Method == http.MethodPatch:
		for k, v := range in {
			r.caches[id][k] = v
		}
		out = r.caches[id]
	case req.Method == http.MethodDelete:
		delete(r.caches, id)
		out = map[string]any{}
	default:
		writeError(w, status.Errorf(codes.NotFound, "The requested URL %s was not found on this server.", req.URL.Path))
		return
	}
	writeValue(w, out)
}

// quick answers a generateContent call with the answer encoded once.
func (r *Region) quick(w http.ResponseWriter, req *http.Request) {
	if _, err := io.Copy(io.Discard, req.Body); err != nil {
		return
	}
	r.calls.Add(1)
	r.quickOnce.Do(func() { r.quickAnswer = marshal(Behavior{}, r.answer(r.unaryText("a quick question"), true)) })
	h := w.Header()
	h["Content-Type"] = jsonContentType
	_, _ = w.Write(r.quickAnswer)
}

var jsonContentType = []string{"application/json; charset=UTF-8"}

// marshal encodes an answer with the behavior's extra members.
func marshal(b Behavior, m proto.Message) []byte {
	out, err := protojson.Marshal(m)
	if err != nil {
		panic(err)
	}
	if b.ExtraJSON == "" {
		return out
	}
	out = bytes.TrimRight(out, " ")
	out = out[:len(out)-1] // the closing brace
	if len(bytes.TrimSpace(out)) > 1 {
		out = append(out, ',')
	}
	return append(append(out, b.ExtraJSON...), '}')
}

func (r *Region) writeJSON(w http.ResponseWriter, b Behavior, m proto.Message) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	_, _ = w.Write(marshal(b, m))
}

// restStream writes chunks as server-sent events with ?alt=sse, else as one
// JSON array, as Vertex does.
func (r *Region) restStream(w http.ResponseWriter, req *http.Request, b Behavior) {
	sse := req.URL.Query().Get("alt") == "sse"
	if sse {
		w.Header().Set("Content-Type", "text/event-stream")
	} else {
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	}
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	first := true
	send := func(chunk []byte) error {
		var err error
		switch {
		case sse:
			_, err = fmt.Fprintf(w, "data: %s\r\n\r\n", chunk)
		case first:
			_, err = fmt.Fprintf(w, "[%s", chunk)
		default:
			_, err = fmt.Fprintf(w, ",\r\n%s", chunk)
		}
		first = false
		if err == nil {
			err = rc.Flush()
		}
		return err
	}
	n := b.Chunks
	if n < 0 {
		n = StreamChunks
	}
	for i := 0; b.Endless || i < n; i++ {
		if req.Context().Err() != nil {
			return
		}
		last := !b.Endless && i == n-1
		if err := send(marshal(b, r.answer(r.chunkText(i, b.Pad), last))); err != nil {
			return
		}
		if b.FailAfterFirstChunk {
			_ = send(ErrorJSON(status.Error(codes.Unavailable, "region lost the stream")))
			break
		}
		if b.CutAfterFirstChunk {
			panic(http.ErrAbortHandler)
		}
	}
	if !sse {
		if first {
			_, _ = io.WriteString(w, "[")
		}
		_, _ = io.WriteString(w, "]")
	}
}

type predictionServer struct {
	aiplatformpb.UnimplementedPredictionServiceServer
	r *Region
}

type utilityServer struct {
	aiplatformpb.UnimplementedLlmUtilityServiceServer
	r *Region
}

// grpcCall is what the region notes of a gRPC call.
func grpcCall(ctx context.Context, method, model, endpoint string, req proto.Message) Call {
	md, _ := metadata.FromIncomingContext(ctx)
	return Call{
		Surface: GRPC, Method: method, Model: model, Endpoint: endpoint,
		RequestType: md.Get("x-vertex-ai-llm-request-type"), SharedRequestType: md.Get("x-vertex-ai-llm-shared-request-type"),
		Auth:   md.Get("authorization"),
		Params: md.Get("x-goog-request-params"), Metadata: md.Copy(), Request: proto.Clone(req),
	}
}

// withExtra appends the behavior's unknown bytes to m.
func withExtra[M proto.Message](b Behavior, m M) M {
	if len(b.ExtraProto) > 0 {
		m.ProtoReflect().SetUnknown(append(m.ProtoReflect().GetUnknown(), b.ExtraProto...))
	}
	return m
}

func (p *predictionServer) GenerateContent(ctx context.Context, req *aiplatformpb.GenerateContentRequest) (*aiplatformpb.GenerateContentResponse, error) {
	b, err := p.r.record(ctx, grpcCall(ctx, MethodGenerate, req.GetModel(), "", req))
	if err != nil {
		return nil, err
	}
	return withExtra(b, p.r.answer(p.r.unaryText(Prompt(req.GetContents())), true)), nil
}

func (p *predictionServer) StreamGenerateContent(req *aiplatformpb.GenerateContentRequest, st aiplatformpb.PredictionService_StreamGenerateContentServer) error {
	b, err := p.r.record(st.Context(), grpcCall(st.Context(), MethodStream, req.GetModel(), "", req))
	if err != nil {
		return err
	}
	n := b.Chunks
	if n < 0 {
		n = StreamChunks
	}
	for i := 0; b.Endless || i < n; i++ {
		last := !b.Endless && i == n-1
		if err := st.Send(withExtra(b, p.r.answer(p.r.chunkText(i, b.Pad), last))); err != nil {
			return err
		}
		if b.FailAfterFirstChunk {
			return status.Error(codes.Unavailable, "region lost the stream")
		}
	}
	return nil
}

func (u *utilityServer) CountTokens(ctx context.Context, req *aiplatformpb.CountTokensRequest) (*aiplatformpb.CountTokensResponse, error) {
	b, err := u.r.record(ctx, grpcCall(ctx, MethodCount, req.GetModel(), req.GetEndpoint(), req))
	if err != nil {
		return nil, err
	}
	return withExtra(b, &aiplatformpb.CountTokensResponse{TotalTokens: 42, TotalBillableCharacters: int32(len(u.r.Name))}), nil
}

// cacheServer keeps cached contents over gRPC as a location does (its own
// store, apart from the REST surface's): create gives a name in the region,
// update replaces the fields its mask names (all when it names none), and a
// cache that is not there is NOT_FOUND. Each call is recorded with Method
// MethodCaches.
type cacheServer struct {
	aiplatformpb.UnimplementedGenAiCacheServiceServer
	r *Region

	mu     sync.Mutex
	caches map[string]*aiplatformpb.CachedContent // by name
	order  []string                               // the names, oldest first
}

// record notes the call, and returns the region's fault for it.
func (s *cacheServer) record(ctx context.Context, req proto.Message) error {
	_, err := s.r.record(ctx, grpcCall(ctx, MethodCaches, "", "", req))
	return err
}

// get is the cache named name, a copy; NOT_FOUND when it is not there.
func (s *cacheServer) get(name string) (*aiplatformpb.CachedContent, error) {
	cc, ok := s.caches[name]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "CachedContent not found (or has expired): %s", name)
	}
	return proto.Clone(cc).(*aiplatformpb.CachedContent), nil
}

func (s *cacheServer) CreateCachedContent(ctx context.Context, req *aiplatformpb.CreateCachedContentRequest) (*aiplatformpb.CachedContent, error) {
	if err := s.record(ctx, req); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.caches == nil {
		s.caches = map[string]*aiplatformpb.CachedContent{}
	}
	project, _, _ := strings.Cut(strings.TrimPrefix(req.GetParent(), "projects/"), "/")
	cc := proto.Clone(req.GetCachedContent()).(*aiplatformpb.CachedContent)
	cc.Name = fmt.Sprintf("projects/%s/locations/%s/cachedContents/%d", project, s.r.Name, len(s.order)+1)
	s.caches[cc.Name] = cc
	s.order = append(s.order, cc.Name)
	return s.get(cc.Name)
}

func (s *cacheServer) GetCachedContent(ctx context.Context, req *aiplatformpb.GetCachedContentRequest) (*aiplatformpb.CachedContent, error) {
	if err := s.record(ctx, req); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.get(req.GetName())
}

func (s *cacheServer) UpdateCachedContent(ctx context.Context, req *aiplatformpb.UpdateCachedContentRequest) (*aiplatformpb.CachedContent, error) {
	if err := s.record(ctx, req); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	name := req.GetCachedContent().GetName()
	if _, err := s.get(name); err != nil {
		return nil, err
	}
	proto.Merge(s.caches[name], req.GetCachedContent())
	return s.get(name)
}

func (s *cacheServer) DeleteCachedContent(ctx context.Context, req *aiplatformpb.DeleteCachedContentRequest) (*emptypb.Empty, error) {
	if err := s.record(ctx, req); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.get(req.GetName()); err != nil {
		return nil, err
	}
	delete(s.caches, req.GetName())
	return &emptypb.Empty{}, nil
}

func (s *cacheServer) ListCachedContents(ctx context.Context, req *aiplatformpb.ListCachedContentsRequest) (*aiplatformpb.ListCachedContentsResponse, error) {
	if err := s.record(ctx, req); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &aiplatformpb.ListCachedContentsResponse{}
	for _, name := range s.order {
		if cc, err := s.get(name); err == nil {
			out.CachedContents = append(out.CachedContents, cc)
		}
	}
	return out, nil
}

// computed is the region's ComputeTokens answer: one token, its name.
func (r *Region) computed() *aiplatformpb.ComputeTokensResponse {
	return &aiplatformpb.ComputeTokensResponse{TokensInfo: []*aiplatformpb.TokensInfo{{
		Tokens: [][]byte{[]byte(r.Name)}, TokenIds: []int64{42}, Role: "user",
	}}}
}

func (u *utilityServer) ComputeTokens(ctx context.Context, req *aiplatformpb.ComputeTokensRequest) (*aiplatformpb.ComputeTokensResponse, error) {
	b, err := u.r.record(ctx, grpcCall(ctx, MethodCompute, req.GetModel(), req.GetEndpoint(), req))
	if err != nil {
		return nil, err
	}
	return withExtra(b, u.r.computed()), nil
}

// embedding is the region's embedding: as many values as its name has
// letters, so that a caller can tell which region answered.
func (r *Region) embedding() []float32 { return make([]float32, len(r.Name)) }

// predicted is the region's Predict answer, that of a text embedding model.
func (r *Region) predicted() *aiplatformpb.PredictResponse {
	values := make([]any, len(r.embedding()))
	for i := range values {
		values[i] = 0.0
	}
	p, _ := structpb.NewValue(map[string]any{"embeddings": map[string]any{
		"values": values, "statistics": map[string]any{"token_count": 2, "truncated": false},
	}})
	return &aiplatformpb.PredictResponse{Predictions: []*structpb.Value{p}, DeployedModelId: r.Name}
}

// embedded is the region's EmbedContent answer.
func (r *Region) embedded() *aiplatformpb.EmbedContentResponse {
	return &aiplatformpb.EmbedContentResponse{Embedding: &aiplatformpb.EmbedContentResponse_Embedding{Values: r.embedding()}}
}

func (p *predictionServer) Predict(ctx context.Context, req *aiplatformpb.PredictRequest) (*aiplatformpb.PredictResponse, error) {
	b, err := p.r.record(ctx, grpcCall(ctx, MethodPredict, "", req.GetEndpoint(), req))
	if err != nil {
		return nil, err
	}
	return withExtra(b, p.r.predicted()), nil
}

func (p *predictionServer) EmbedContent(ctx context.Context, req *aiplatformpb.EmbedContentRequest) (*aiplatformpb.EmbedContentResponse, error) {
	b, err := p.r.record(ctx, grpcCall(ctx, MethodEmbed, req.GetModel(), "", req))
	if err != nil {
		return nil, err
	}
	return withExtra(b, p.r.embedded()), nil
}

// serveLocation answers the location's calls that are not a model's
// methods, as Vertex AI does, recording each (MethodLocation, its HTTP
// method in Call.Header's "X-Http-Method"): a batch prediction job is
// created (POST on the collection: the caller's members kept, a name and
// the state JOB_STATE_PENDING given) and read (GET).
func (r *Region) serveLocation(w http.ResponseWriter, req *http.Request) {
	body, ok := r.recordResource(w, req, MethodLocation)
	if !ok {
		return
	}
	jobs := "projects/" + req.PathValue("project") + "/locations/" + r.Name + "/batchPredictionJobs/"
	r.mu.Lock()
	defer r.mu.Unlock()
	var out map[string]any
	switch id := req.PathValue("id"); {
	case id == "" && req.Method == http.MethodPost:
		if json.Unmarshal(body, &out) != nil || out == nil {
			writeError(w, status.Error(codes.InvalidArgument, "Invalid JSON payload received."))
			return
		}
		out["name"], out["state"] = jobs+fmt.Sprint(len(r.jobs)+1), "JOB_STATE_PENDING"
		r.jobs = append(r.jobs, out)
	case req.Method == http.MethodGet && id != "":
		n := 0
		if _, err := fmt.Sscan(id, &n); err != nil || n < 1 || n > len(r.jobs) {
			writeError(w, status.Errorf(codes.NotFound, "The BatchPredictionJob does not exist: %s%s", jobs, id))
			return
		}
		out = r.jobs[n-1]
	default:
		writeError(w, status.Errorf(codes.NotFound, "The requested URL %s was not found on this server.", req.URL.Path))
		return
	}
	writeValue(w, out)
}
