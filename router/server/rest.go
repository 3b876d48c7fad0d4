package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/regionwarden/regionwarden/router/policy"
	"github.com/regionwarden/regionwarden/router/table"
	"github.com/regionwarden/regionwarden/router/upstream"
)

// Methods of the publisher model surface, as the path spells them.
const (
	methodGenerate = "generateContent"
	methodStream   = "streamGenerateContent"
	methodCount    = "countTokens"
	methodCompute  = "computeTokens"
	// methodPredict and methodEmbed are the embedding calls (genai's
	// EmbedContent: predict for text-embedding models, embedContent for
	// Gemini embeddings).
	methodPredict = "predict"
	methodEmbed   = "embedContent"
	// methodChat is the OpenAI-compatible chat completions (chat.go).
	methodChat = "chatCompletions"
	// methodRaw and methodStreamRaw are the calls of Model Garden's partner
	// models (Anthropic's Claude among them): the body is the publisher's
	// own API (Anthropic's Messages), the answer too, streamed as the
	// publisher's server-sent events by streamRawPredict.
	methodRaw       = "rawPredict"
	methodStreamRaw = "streamRawPredict"
)

// route is what the path of a REST call names:
// /{version}/projects/{project}/locations/{location}/publishers/{publisher}/models/{model}:{method}.
type route struct {
	version, project, location, publisher, model, method string
}

// parseRoute reads a REST path; false when it is not a publisher model's.
func parseRoute(path string) (route, bool) {
	var rt route
	var seg [10]string
	rest := path
	for i := range seg {
		if i == len(seg)-1 {
			seg[i] = rest
			break
		}
		var ok bool
		if seg[i], rest, ok = strings.Cut(rest, "/"); !ok {
			return rt, false
		}
	}
	if seg[0] != "" || seg[2] != "projects" || seg[4] != "locations" || seg[6] != "publishers" || seg[8] != "models" {
		return rt, false
	}
	model, method, _ := strings.Cut(seg[9], ":")
	rt = route{version: seg[1], project: seg[3], location: seg[5], publisher: seg[7], model: model, method: method}
	return rt, rt.version != "" && rt.project != "" && rt.location != "" && rt.publisher != "" && rt.model != "" && !strings.Contains(seg[9], "/")
}

// exchange is one REST request on its way through the server.
type exchange struct {
	call
	w      http.ResponseWriter
	r      *http.Request
	rc     http.ResponseController
	start  time.Time
	method string // the metric label: the method, or "unknown"
	status int    // the HTTP status written, 0 before
	held   int64  // body bytes held in the budget
	abort  bool   // the answer broke off: cut the connection
	req    upstream.Request
	scan   upstream.AnswerScanner
}

// exchanges reuses exchanges across requests: one holds a few hundred bytes
// (its answer scanner among them), and nothing keeps it past its request.
var exchanges = sync.Pool{New: func() any { return new(exchange) }}

// reset clears x for reuse, keeping the scanner's buffer.
func (x *exchange) reset() {
	scan := x.scan
	*x = exchange{}
	x.scan = scan
}

// serveREST serves the Vertex REST surface: POST
// /{version}/projects/{p}/locations/{l}/publishers/{pub}/models/{m}:{method}.
//
// In order: the path and the priority are read, the pool found, the call
// admitted by the policy (its first attempt picked, which takes the pool's
// and the region's in-flight places) and its body's bytes taken from the
// router's budget, all before the body is read; then the body is read within
// the body read deadline, and attempts are made until one answers (but
// Anthropic's count_tokens, whose pool is its body's model, reads the body
// first, as a chat completion does). The call (serveREST) and each attempt
// (attempt) are where a trace's spans begin.
func (s *Server) serveREST(w http.ResponseWriter, r *http.Request) {
	x := exchanges.Get().(*exchange)
	x.s, x.w, x.r, x.rc, x.start, x.method = s, w, r, *http.NewResponseController(w), time.Now(), "unknown"
	x.ctx = r.Context()
	defer func() {
		abort := x.abort
		x.reset()
		exchanges.Put(x)
		if abort {
			panic(http.ErrAbortHandler)
		}
	}()
	defer x.finish()

	if cr, ok := parseCachesRoute(r.URL.Path); ok {
		x.serveCaches(cr)
		return
	}
	if version, ok := liveRoute(r.URL.Path); ok {
		x.serveLive(version)
		return
	}
	rt, ok := parseRoute(r.URL.Path)
	if !ok && r.Method == http.MethodPost {
		if cr, ok := parseChatRoute(r.URL.Path); ok {
			x.serveChat(cr)
			return
		}
	}
	if !ok || r.Method != http.MethodPost {
		if !x.serveLocation() && !x.servePublisherModel() {
			x.fail(http.StatusNotFound, codes.NotFound, fmt.Sprintf("The requested URL %s was not found on this server.", r.URL.Path), 0)
		}
		return
	}
	if !x.servedVersion(rt.version) {
		return
	}
	x.req = upstream.Request{Version: rt.version, Method: rt.method, RawQuery: r.URL.RawQuery, Header: r.Header}
	bodyRead := false
	switch rt.method {
	case methodRaw:
		x.method = rt.method
		if rt.model == upstream.AnthropicCountTokens {
			// The pool is the body's model's: the body is read first, as
			// a chat completion's is (chat.go). The call is a count.
			if bodyRead = true; !x.readBody() {
				return
			}
			name, err := upstream.BodyModel(x.req.Body)
			if err != nil {
				x.fail(http.StatusBadRequest, codes.InvalidArgument, err.Error(), 0)
				return
			}
			x.method, x.req.PathModel, rt.model = methodCount, rt.model, name
		}
	case methodGenerate, methodStream, methodCount, methodCompute, methodPredict, methodEmbed, methodStreamRaw:
		x.method = rt.method
	default:
		// A method the router does not route (Veo's predictLongRunning and
		// fetchPredictOperation, say) goes to the location it names.
		if !x.serveLocation() {
			x.fail(http.StatusNotFound, codes.NotFound, fmt.Sprintf("The requested URL %s was not found on this server.", r.URL.Path), 0)
		}
		return
	}
	var err error
	x.prio, err = parsePriority(r.Header.Get(HeaderPriority))
	traced := x.startSpan(r.Context(), propagation.HeaderCarrier(r.Header), x.method, rt.model)
	if err != nil {
		x.fail(http.StatusBadRequest, codes.InvalidArgument, err.Error(), 0)
		return
	}
	timeout, callers, err := s.callTimeout(r.Header)
	if err != nil {
		x.fail(http.StatusBadRequest, codes.InvalidArgument, err.Error(), 0)
		return
	}
	key := table.Key{Project: rt.project, Publisher: rt.publisher, Model: rt.model}
	if x.pool = s.lookup(key); x.pool == nil {
		x.fail(http.StatusNotFound, codes.NotFound, fmt.Sprintf(
			"no routing pool for project %q, publisher %q, model %q (location %q is not used to find a pool)",
			key.Project, key.Publisher, key.Model, rt.location), 0)
		return
	}
	if r.ContentLength > s.maxBody {
		x.fail(http.StatusRequestEntityTooLarge, codes.InvalidArgument, fmt.Sprintf("request body larger than %d bytes", s.maxBody), 0)
		return
	}
	x.run(traced, timeout, callers, bodyRead)
}

// servedVersion reports whether the router serves API version v (v1 and
// v1beta1, as Google's endpoints do), and answers 404 when it does not.
func (x *exchange) servedVersion(v string) bool {
	if v == "v1" || v == "v1beta1" {
		return true
	}
	x.fail(http.StatusNotFound, codes.NotFound, fmt.Sprintf("API version %q is not served; use v1 or v1beta1", v), 0)
	return false
}

// callTimeout bounds a REST call, every attempt and wait included: the
// router's request timeout, or the caller's X-Server-Timeout when that is
// shorter. Google's servers read that header as the time the caller gives the
// request; the router, standing in for them, does the same, so that it stops
// trying, waiting for headroom and retrying when the caller stops waiting,
// and tells each region what is left (upstream.HeaderServerTimeout). callers
// says the caller's deadline is the one that binds. A value that is not a
// positive number of seconds is the caller's error.
func (s *Server) callTimeout(h http.Header) (timeout time.Duration, callers bool, err error) {
	v := h.Get(upstream.HeaderServerTimeout)
	if v == "" {
		return s.timeout, false, nil
	}
	d, err := upstream.ParseServerTimeout(v)
	if err != nil {
		return 0, false, err
	}
	if d <= s.timeout {
		return d, true, nil
	}
	return s.timeout, false, nil
}

// parsePriority reads the HeaderPriority value.
func parsePriority(v string) (policy.Priority, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", "default":
		return policy.PriorityDefault, nil
	case "critical":
		return policy.PriorityCritical, nil
	case "sheddable":
		return policy.PrioritySheddable, nil
	}
	return 0, fmt.Errorf("header %s: unknown priority %q (critical, default or sheddable)", HeaderPriority, v)
}

// run authorizes the call; then, bounded by timeout from now (the caller's
// own deadline when callers says so) and counted in
// its pool's in-flight gauge, it admits the call, reads its body unless it
// was read already (bodyRead: the OpenAI-compatible surface reads it to find
// the pool), and makes attempts until one answers, one is committed, one
// fails in a way no retry mends, or the policy refuses another; then it
// writes the error if no answer was written.
func (x *exchange) run(traced context.Context, timeout time.Duration, callers, bodyRead bool) {
	if err := x.authorize(traced, x.r.Header.Get("Authorization")); err != nil {
		x.fail(err.Status, err.Code, err.Message, 0)
		return
	}
	ctx, cancel := x.bound(traced, timeout, callers)
	defer cancel()
	x.pool.inFlight.Inc()
	defer x.pool.inFlight.Dec()
	if err := x.admit(ctx); err != nil {
		code, msg, retryAfter := x.refusal(err)
		x.fail(upstream.HTTPStatus(code), code, msg, retryAfter)
		return
	}
	if !bodyRead && !x.readBody() {
		x.settle(policy.Report{Outcome: gaveUp})
		return
	}
	if err := x.pinTo(x.cachedContent(), true); err != nil {
		x.refusePin(err)
		return
	}
	if retryAfter, err := x.attempts(ctx, x.attempt); err != nil {
		x.failUpstream(err, retryAfter)
	}
}

// bound is ctx bounded by timeout (callTimeout): the context the call's
// attempts and waits run under.
func (c *call) bound(ctx context.Context, timeout time.Duration, callers bool) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	if callers {
		// The deadline is the caller's (X-Server-Timeout), read as a gRPC
		// caller's own deadline is (call.report): an attempt it cuts off
		// fails the region only if the region kept it longer than it takes
		// to answer. The router's own request timeout, when it binds, is
		// always the region's failure.
		c.ctx = ctx
	}
	return ctx, cancel
}

// attempt makes one attempt on x.target under ctx. On success it has relayed
// the answer. It returns what the policy should learn, whether bytes reached
// the caller (after which the answer is committed and nothing can be
// retried), and the attempt's error.
func (x *exchange) attempt(ctx context.Context) (policy.Report, bool, error) {
	resp, err := x.s.up.Send(ctx, x.target, &x.req)
	if err != nil {
		return x.report(err), false, err
	}
	return x.relay(resp)
}

// failUpstream answers with an attempt's error: the region's own answer
// byte for byte when it gave one, else Google's error JSON for the error. A
// 429 always carries a Retry-After: the policy's, else the region's, else one
// second.
func (x *exchange) failUpstream(err error, retryAfter time.Duration) {
	var rerr *upstream.Error
	if errors.As(err, &rerr) {
		h := x.w.Header()
		upstream.AnswerHeader(h, rerr.Header)
		if rerr.HTTPStatus == http.StatusTooManyRequests && (retryAfter > 0 || h.Get("Retry-After") == "") {
			setRetryAfter(h, max(retryAfter, time.Second))
		}
		x.status = rerr.HTTPStatus
		x.extendWrite()
		x.w.WriteHeader(rerr.HTTPStatus)
		_, _ = x.w.Write(rerr.Body)
		return
	}
	code := upstream.Code(err)
	if code == codes.ResourceExhausted {
		retryAfter = max(retryAfter, time.Second)
	} else {
		retryAfter = 0
	}
	x.fail(upstream.HTTPStatus(code), code, status.Convert(err).Message(), retryAfter)
}

// fail writes an error answer.
func (x *exchange) fail(httpCode int, code codes.Code, msg string, retryAfter time.Duration) {
	x.status = httpCode
	x.extendWrite()
	writeError(x.w, httpCode, code, msg, retryAfter)
}

// extendWrite gives the caller the write timeout, from now, to take what is
// written next. Every write of an exchange is preceded by one, and the last
// deadline stays on the connection when the handler returns, so that the
// server's own final write (a stream's last chunk) is bounded too; the next
// request on the connection sets its own before it writes.
func (x *exchange) extendWrite() {
	_ = x.rc.SetWriteDeadline(time.Now().Add(x.s.writeTimeout))
}

// finish ends the exchange: it gives back the body's budget and the pool,
// logs and counts the request. Prompts, answers and headers are never
// logged.
func (x *exchange) finish() {
	x.s.bodies.give(x.held)
	d := time.Since(x.start)
	if x.status == 0 {
		x.status = http.StatusOK
	}
	pool := ""
	if x.pool != nil {
		pool = x.pool.label
		x.pool.series.request(x.method, x.status, d)
		x.pool.release()
	} else {
		x.s.metrics.Request("", x.method, x.status, d)
	}
	x.endSpan(x.status, 0)
	level := slog.LevelDebug
	if x.status >= 500 {
		level = slog.LevelWarn
	}
	ctx := x.r.Context()
	if x.traced != nil {
		ctx = x.traced // its log line carries the call's trace_id
	}
	if x.s.log.Enabled(ctx, level) {
		x.s.log.LogAttrs(ctx, level, "request",
			slog.String("method", x.r.Method), slog.String("path", x.r.URL.Path),
			slog.String("pool", pool), slog.String("region", x.target.Region.Name),
			slog.String("callerNamespace", x.who.Namespace), slog.String("caller", fmt.Sprintf("%016x", x.key)),
			slog.Int("status", x.status), slog.Duration("latency", d))
	}
}
