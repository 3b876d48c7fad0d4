package server

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"

	"github.com/regionwarden/regionwarden/router/policy"
	"github.com/regionwarden/regionwarden/router/upstream"
)

// tracerName is the instrumentation scope of the router's spans.
const tracerName = "github.com/regionwarden/regionwarden/router/server"

// The router's own span attributes, beside the OpenTelemetry GenAI semantic
// conventions' (gen_ai.*, error.type); docs/observability.md lists them.
//
// On the call's server span: the pool, the region that answered, how many
// attempts it took, the answer's traffic type and the call's priority.
const (
	attrPool        = attribute.Key("regionwarden.pool")
	attrRegion      = attribute.Key("regionwarden.region")
	attrAttempts    = attribute.Key("regionwarden.attempts")
	attrTrafficType = attribute.Key("regionwarden.traffic_type")
	attrPriority    = attribute.Key("regionwarden.priority")
)

// On each attempt's client span, beside the pool, region and traffic type:
// the region's tier, the attempt's number and the policy's outcome.
const (
	attrTier    = attribute.Key("regionwarden.tier")
	attrAttempt = attribute.Key("regionwarden.attempt")
	attrOutcome = attribute.Key("regionwarden.outcome")
)

// Where the policy stepped in: an attempt that another followed, and why; a
// retry it refused, and why; a call shed before any attempt, and why.
const (
	attrRetried      = attribute.Key("regionwarden.retried")
	attrRetryReason  = attribute.Key("regionwarden.retry_reason")
	attrRetryRefused = attribute.Key("regionwarden.retry_refused")
	attrShed         = attribute.Key("regionwarden.shed")
	attrShedReason   = attribute.Key("regionwarden.shed_reason")
)

// The gen_ai.operation.name of each method.
const (
	operationCount    = "count_tokens"
	operationCompute  = "compute_tokens"
	operationEmbed    = "embeddings"
	operationGenerate = "generate_content"
	operationChat     = "chat"
)

// operation is the gen_ai.operation.name of a method.
func operation(method string) string {
	switch method {
	case methodCount:
		return operationCount
	case methodCompute:
		return operationCompute
	case methodPredict, methodEmbed:
		return operationEmbed
	case methodChat, methodRaw, methodStreamRaw:
		// A partner model's raw call is its publisher's chat API
		// (Anthropic's Messages).
		return operationChat
	}
	return operationGenerate
}

// Every span of a call says what it is in the GenAI semantic conventions'
// terms: the operation, the provider (Vertex AI) and the model asked for.
// Prompts and answers are never recorded: the spans carry names, counts and
// outcomes only.
func genAIAttrs(method, model string) []attribute.KeyValue {
	return []attribute.KeyValue{
		semconv.GenAIOperationNameKey.String(operation(method)),
		semconv.GenAIProviderNameGCPVertexAI,
		semconv.GenAIRequestModel(model),
	}
}

// spanName is a span's name as the GenAI conventions ask:
// "{gen_ai.operation.name} {gen_ai.request.model}".
func spanName(method, model string) string { return operation(method) + " " + model }

// startSpan starts the call's server span for method on model, continuing
// the trace that carrier holds (the caller's W3C traceparent, from its HTTP
// headers or gRPC metadata), and returns the context that carries it. With
// a tracer that records nothing the span is a no-op and costs no attributes;
// with tracing off (no tracer) there is no span at all.
func (c *call) startSpan(ctx context.Context, carrier propagation.TextMapCarrier, method, model string) context.Context {
	c.vertexMethod, c.model = method, model
	if c.s.tracer == nil {
		return ctx
	}
	ctx = c.s.propagator.Extract(ctx, carrier)
	ctx, c.span = c.s.tracer.Start(ctx, spanName(method, model), trace.WithSpanKind(trace.SpanKindServer))
	c.traced = ctx
	if c.span.IsRecording() {
		c.span.SetAttributes(genAIAttrs(method, model)...)
		c.span.SetAttributes(attrPriority.String(c.prio.String()))
	}
	return ctx
}

// startAttempt starts the span of the attempt under way, a client span under
// the call's, and returns the context that carries it: upstream writes it
// into the attempt's traceparent, so Vertex AI's spans continue the trace.
func (c *call) startAttempt(ctx context.Context) context.Context {
	c.n++
	if c.span == nil {
		return ctx
	}
	ctx, c.aspan = c.s.tracer.Start(ctx, spanName(c.vertexMethod, c.model), trace.WithSpanKind(trace.SpanKindClient))
	if c.aspan.IsRecording() {
		r := &c.target.Region
		c.aspan.SetAttributes(genAIAttrs(c.vertexMethod, c.model)...)
		c.aspan.SetAttributes(attrPool.String(c.pool.label), attrRegion.String(r.Name), attrTier.String(string(r.Tier)),
			attrAttempt.Int(c.n), semconv.ServerAddress(r.Endpoint))
	}
	return ctx
}

// answered records the usage of the answer the attempt under way got: the
// tokens (prompt in; candidates and thoughts out) and the traffic type, for
// the trace, the policy (settle) and the token counters.
func (c *call) answered(input, output int64, traffic string) {
	c.input, c.output, c.traffic = input, output, traffic
	c.pool.series.tokens(&c.target, traffic, input, output)
}

// traceSettled records on the attempt's span what the policy learned of it:
// its outcome and, when it answered, the tokens and traffic type.
func (c *call) traceSettled(rep policy.Report) {
	if c.aspan == nil || !c.aspan.IsRecording() {
		return
	}
	c.aspan.SetAttributes(attrOutcome.String(rep.Outcome.String()))
	c.traceUsage(c.aspan)
}

// traceUsage records the answer's usage on span, when there was an answer.
func (c *call) traceUsage(span trace.Span) {
	if c.traffic == "" && c.input == 0 && c.output == 0 {
		return
	}
	span.SetAttributes(semconv.GenAIUsageInputTokens(int(c.input)), semconv.GenAIUsageOutputTokens(int(c.output)))
	if c.traffic != "" {
		span.SetAttributes(attrTrafficType.String(c.traffic))
	}
}

// endAttempt ends the attempt's span. err is how it failed (nil when it
// answered); retryReason, when not empty, says that another attempt follows
// and why (the outcome that sent the call elsewhere: capacity or failure).
func (c *call) endAttempt(err error, retryReason string) {
	span := c.aspan
	if span == nil {
		return
	}
	c.aspan = nil
	if span.IsRecording() {
		if err != nil {
			span.SetAttributes(semconv.ErrorTypeKey.String(errorType(err)))
			span.SetStatus(otelcodes.Error, errorType(err))
		}
		if retryReason != "" {
			span.SetAttributes(attrRetried.Bool(true), attrRetryReason.String(retryReason))
		}
	}
	span.End()
}

// traceRefused records on the call's span why the policy refused it: shed
// before any attempt, or a retry refused after one.
func (c *call) traceRefused(shedReason, retryReason string) {
	if c.span == nil || !c.span.IsRecording() {
		return
	}
	if shedReason != "" {
		c.span.SetAttributes(attrShed.Bool(true), attrShedReason.String(shedReason))
	}
	if retryReason != "" {
		c.span.SetAttributes(attrRetryRefused.String(retryReason))
	}
}

// endSpan ends the call's span with its answer: the HTTP status (REST) or
// the gRPC code, the region that answered and the answer's usage.
func (c *call) endSpan(httpStatus int, code codes.Code) {
	span := c.span
	if span == nil {
		return
	}
	c.span = nil
	if span.IsRecording() {
		span.SetAttributes(attrAttempts.Int(c.n))
		if httpStatus != 0 {
			span.SetAttributes(semconv.HTTPResponseStatusCode(httpStatus))
		} else {
			span.SetAttributes(semconv.RPCResponseStatusCode(code.String()))
		}
		if c.pool != nil {
			span.SetAttributes(attrPool.String(c.pool.label))
		}
		if c.n > 0 {
			span.SetAttributes(attrRegion.String(c.target.Region.Name))
		}
		c.traceUsage(span)
		failed := httpStatus >= http.StatusBadRequest || (httpStatus == 0 && code != codes.OK)
		if failed {
			et := strconv.Itoa(httpStatus)
			if httpStatus == 0 {
				et = code.String()
			}
			span.SetAttributes(semconv.ErrorTypeKey.String(et))
		}
		if httpStatus >= http.StatusInternalServerError || httpStatus == http.StatusTooManyRequests ||
			(httpStatus == 0 && code != codes.OK && code != codes.InvalidArgument && code != codes.NotFound) {
			span.SetStatus(otelcodes.Error, statusText(httpStatus, code))
		}
	}
	span.End()
}

// statusText names an answer's status for a span's status description.
func statusText(httpStatus int, code codes.Code) string {
	if httpStatus != 0 {
		return http.StatusText(httpStatus)
	}
	return code.String()
}

// errorType is an attempt's error.type: the HTTP status the region answered,
// or the gRPC code of an error without one (Unavailable, DeadlineExceeded,
// Canceled).
func errorType(err error) string {
	var rerr *upstream.Error
	if errors.As(err, &rerr) {
		return strconv.Itoa(rerr.HTTPStatus)
	}
	return upstream.Code(err).String()
}
