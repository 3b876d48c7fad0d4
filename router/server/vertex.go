package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"cloud.google.com/go/aiplatform/apiv1/aiplatformpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/regionwarden/regionwarden/router/policy"
	"github.com/regionwarden/regionwarden/router/table"
	"github.com/regionwarden/regionwarden/router/upstream"
)

// Methods of the publisher model surface, as the path spells them.
const (
	methodGenerate = "generateContent"
	methodStream   = "streamGenerateContent"
	methodCount    = "countTokens"
)

var (
	// Fields this build's v1 protos do not know (a newer SDK's, or
	// v1beta1-only ones) are dropped, as the v1 gRPC API would not carry them.
	unmarshalJSON = protojson.UnmarshalOptions{DiscardUnknown: true}
	marshalJSON   = protojson.MarshalOptions{}
)

// exchange is one request on its way through the server.
type exchange struct {
	s      *Server
	w      http.ResponseWriter
	r      *http.Request
	start  time.Time
	method string
	prio   policy.Priority
	pool   *poolEntry // nil until found
	region string     // the region of the last attempt, "" before one
	status int        // the HTTP status written, 0 before
}

// serveModel serves POST /{version}/projects/{p}/locations/{l}/publishers/{pub}/models/{m}:{method}.
func (s *Server) serveModel(w http.ResponseWriter, r *http.Request) {
	x := &exchange{s: s, w: w, r: r, start: time.Now()}
	defer x.finish()

	version := r.PathValue("version")
	if version != "v1" && version != "v1beta1" {
		x.fail(http.StatusNotFound, codes.NotFound, fmt.Sprintf("API version %q is not served; use v1 or v1beta1", version), 0)
		return
	}
	model, method, _ := strings.Cut(r.PathValue("modelMethod"), ":")
	switch method {
	case methodGenerate, methodStream, methodCount:
		x.method = method
	default:
		x.method = "unknown"
		x.fail(http.StatusNotFound, codes.NotFound, fmt.Sprintf("method %q is not served; the router serves generateContent, streamGenerateContent and countTokens", method), 0)
		return
	}
	key := table.Key{Project: r.PathValue("project"), Publisher: r.PathValue("publisher"), Model: model}
	x.pool = s.lookup(key)
	if x.pool == nil {
		x.fail(http.StatusNotFound, codes.NotFound, fmt.Sprintf(
			"no routing pool for project %q, publisher %q, model %q (location %q is not used to find a pool)",
			key.Project, key.Publisher, key.Model, r.PathValue("location")), 0)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			x.fail(http.StatusRequestEntityTooLarge, codes.InvalidArgument, fmt.Sprintf("request body larger than %d bytes", tooBig.Limit), 0)
			return
		}
		x.fail(http.StatusBadRequest, codes.InvalidArgument, "reading the request body: "+err.Error(), 0)
		return
	}
	if x.prio, err = parsePriority(r.Header.Get(HeaderPriority)); err != nil {
		x.fail(http.StatusBadRequest, codes.InvalidArgument, err.Error(), 0)
		return
	}

	ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
	defer cancel()
	x.pool.inFlight.Inc()
	defer x.pool.inFlight.Dec()

	switch method {
	case methodGenerate, methodStream:
		var in aiplatformpb.GenerateContentRequest
		if err := unmarshalJSON.Unmarshal(body, &in); err != nil {
			x.fail(http.StatusBadRequest, codes.InvalidArgument, "Invalid JSON payload received. "+err.Error(), 0)
			return
		}
		if method == methodGenerate {
			x.run(ctx, x.generate(&in))
		} else {
			x.run(ctx, x.stream(&in, r.URL.Query().Get("alt") == "sse"))
		}
	case methodCount:
		var in aiplatformpb.CountTokensRequest
		if err := unmarshalJSON.Unmarshal(body, &in); err != nil {
			x.fail(http.StatusBadRequest, codes.InvalidArgument, "Invalid JSON payload received. "+err.Error(), 0)
			return
		}
		x.run(ctx, x.countTokens(&in))
	}
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

// attemptFunc makes one attempt on region under ctx. On success it has
// written the answer. It returns what the policy should learn, whether bytes
// reached the caller (after which the answer is committed and nothing can be
// retried), and the attempt's error.
type attemptFunc func(ctx context.Context, region table.Region) (rep policy.Report, committed bool, err error)

// run makes attempts until one answers, one is committed, one fails in a way
// no retry mends, or the policy refuses another; then it writes the error if
// no answer was written.
func (x *exchange) run(ctx context.Context, try attemptFunc) {
	s, p := x.s, x.pool
	call := p.router.Start(s.request(ctx, x.prio))
	var last error
	for {
		a, err := call.Pick()
		if err != nil {
			x.refused(err, last)
			return
		}
		region := regionOf(a)
		x.region = region.Name
		began := time.Now()
		rep, committed, err := try(ctx, region)
		a.Finish(rep)
		s.metrics.Attempt(p.label, region.Name, string(region.Tier), rep.Outcome, time.Since(began))
		if err == nil || committed {
			return
		}
		last = err
		if rep.Outcome != policy.Capacity && rep.Outcome != policy.Failure {
			x.failUpstream(err, 0)
			return
		}
	}
}

// regionOf is the table region an attempt names: what upstream needs of it
// (name, endpoint and tier) as the policy picked it, even when a newer table
// has updated the policy since the request began.
func regionOf(a policy.Attempt) table.Region {
	return table.Region{Name: a.Region, Endpoint: a.Endpoint, Tier: a.Tier}
}

// refused answers a call the policy refused to attempt (again). Before any
// attempt, over-capacity and shed refusals answer 429 with Retry-After. After
// an attempt, the caller gets that attempt's error.
func (x *exchange) refused(err, last error) {
	s, p := x.s, x.pool
	retryAfter, capacity := policy.RetryAfter(err)
	if last == nil {
		switch {
		case capacity:
			reason := "over_capacity"
			if errors.Is(err, policy.ErrShed) {
				reason = "shed"
			}
			s.metrics.Shed(p.label, x.prio, reason)
			x.fail(http.StatusTooManyRequests, codes.ResourceExhausted, err.Error(), retryAfter)
		case errors.Is(err, policy.ErrDeadlineExceeded):
			x.fail(http.StatusGatewayTimeout, codes.DeadlineExceeded, "request deadline exceeded before any region was tried", 0)
		default:
			x.fail(http.StatusServiceUnavailable, codes.Unavailable, err.Error(), 0)
		}
		return
	}
	var reason string
	switch {
	case errors.Is(err, policy.ErrBudgetExhausted):
		reason = "budget"
	case errors.Is(err, policy.ErrAttemptsExhausted):
		reason = "attempts"
	case errors.Is(err, policy.ErrDeadlineExceeded):
		reason = "deadline"
	case capacity:
		reason = "capacity"
	default:
		reason = "other"
	}
	s.metrics.RetryRefused(p.label, reason)
	x.failUpstream(last, retryAfter)
}

// report is what the policy learns from an attempt that ended with err.
// Whether the caller gave up is read on the request's own context: the
// router's request timeout running out is the region being slow.
func (x *exchange) report(err error) policy.Report { return upstream.Report(x.r.Context(), err) }

// failUpstream answers with an attempt's error. A 429 always carries a
// Retry-After, one second when the policy gave none.
func (x *exchange) failUpstream(err error, retryAfter time.Duration) {
	code := upstream.Code(err)
	if code == codes.ResourceExhausted && retryAfter <= 0 {
		retryAfter = time.Second
	}
	if code != codes.ResourceExhausted {
		retryAfter = 0
	}
	x.fail(upstream.HTTPStatus(code), code, status.Convert(err).Message(), retryAfter)
}

// fail writes an error answer.
func (x *exchange) fail(httpCode int, code codes.Code, msg string, retryAfter time.Duration) {
	x.status = httpCode
	writeError(x.w, httpCode, code, msg, retryAfter)
}

// writeMessage writes a unary answer.
func (x *exchange) writeMessage(m proto.Message) {
	b, err := marshalJSON.Marshal(m)
	if err != nil {
		x.fail(http.StatusInternalServerError, codes.Internal, "encoding the answer: "+err.Error(), 0)
		return
	}
	x.w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	x.status = http.StatusOK
	_, _ = x.w.Write(b)
}

// finish logs and counts the request. Prompts, answers and headers are never
// logged.
func (x *exchange) finish() {
	d := time.Since(x.start)
	pool := ""
	if x.pool != nil {
		pool = x.pool.label
	}
	if x.status == 0 {
		x.status = http.StatusOK
	}
	x.s.metrics.Request(pool, x.method, x.status, d)
	level := slog.LevelDebug
	if x.status >= 500 {
		level = slog.LevelWarn
	}
	x.s.log.LogAttrs(x.r.Context(), level, "request",
		slog.String("method", x.r.Method), slog.String("path", x.r.URL.Path),
		slog.String("pool", pool), slog.String("region", x.region),
		slog.Int("status", x.status), slog.Duration("latency", d))
}

// usage returns the tokens an answer reports and the traffic type that served it.
func usage(m *aiplatformpb.GenerateContentResponse) (int64, aiplatformpb.GenerateContentResponse_UsageMetadata_TrafficType) {
	u := m.GetUsageMetadata()
	return int64(u.GetTotalTokenCount()), u.GetTrafficType()
}

// generate is the attempt of a generateContent call.
func (x *exchange) generate(in *aiplatformpb.GenerateContentRequest) attemptFunc {
	return func(ctx context.Context, region table.Region) (policy.Report, bool, error) {
		resp, err := x.s.up.GenerateContent(ctx, in, &x.pool.table, region)
		if err != nil {
			return x.report(err), false, err
		}
		tokens, traffic := usage(resp)
		x.s.metrics.TrafficType(x.pool.label, region.Name, traffic.String())
		x.writeMessage(resp)
		return policy.Report{Outcome: policy.Success, Tokens: tokens}, true, nil
	}
}

// countTokens is the attempt of a countTokens call.
func (x *exchange) countTokens(in *aiplatformpb.CountTokensRequest) attemptFunc {
	return func(ctx context.Context, region table.Region) (policy.Report, bool, error) {
		resp, err := x.s.up.CountTokens(ctx, in, &x.pool.table, region)
		if err != nil {
			return x.report(err), false, err
		}
		x.writeMessage(resp)
		return policy.Report{Outcome: policy.Success}, true, nil
	}
}
