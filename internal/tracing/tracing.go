package tracing

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
)

// The environment variables this package reads itself; the SDK and the OTLP
// exporters read the rest.
const (
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	EnvSDKDisabled    = "OTEL_SDK_DISABLED"
	EnvTracesExporter = "OTEL_TRACES_EXPORTER"
	EnvSampler        = "OTEL_TRACES_SAMPLER"
	EnvSamplerArg     = "OTEL_TRACES_SAMPLER_ARG"
	EnvServiceName    = "OTEL_SERVICE_NAME"
)

// Setup installs the global tracer provider and propagator from the
// environment, for a process whose service.name defaults to service. It
// returns whether tracing is on and a shutdown that flushes the spans still
// queued, bounded by its context. A variable with a value it cannot use is an
// error that names it.
func Setup(ctx context.Context, service string) (on bool, shutdown func(context.Context) error, err error) {
	getenv := os.Getenv
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	noop := func(context.Context) error { return nil }
	if !enabled(getenv) {
		return false, noop, nil
	}
	if err := checkSampler(getenv); err != nil {
		return false, noop, err
	}
	exp, err := newExporter(ctx, getenv)
	if err != nil {
		return false, noop, err
	}
	// The service name defaults to the binary's; OTEL_SERVICE_NAME and
	// OTEL_RESOURCE_ATTRIBUTES, read by WithFromEnv, override it.
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(service)),
		resource.WithFromEnv(), resource.WithTelemetrySDK(), resource.WithHost(), resource.WithProcessPID())
	if err != nil && res == nil {
		return false, noop, fmt.Errorf("tracing: resource: %w", err)
	}
	// The sampler comes from OTEL_TRACES_SAMPLER (parentbased_always_on when
	// unset): the SDK reads it when no sampler is given here.
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetErrorHandler(&rateLimitedHandler{every: time.Minute})
	return true, tp.Shutdown, nil
}

// enabled tells whether the environment asks for traces.
func enabled(getenv func(string) string) bool {
	if strings.EqualFold(getenv(EnvSDKDisabled), "true") {
		return false
	}
	if strings.EqualFold(strings.TrimSpace(getenv(EnvTracesExporter)), "none") {
		return false
	}
	return getenv(EnvEndpoint) != "" || getenv(EnvTracesEndpoint) != ""
}

// newExporter makes the OTLP exporter of the protocol the environment names.
// Each reads its endpoint, headers, timeout, compression and TLS settings from
// the environment itself.
func newExporter(ctx context.Context, getenv func(string) string) (*otlptrace.Exporter, error) {
	name, proto := EnvTracesProtocol, getenv(EnvTracesProtocol)
	if proto == "" {
		name, proto = EnvProtocol, getenv(EnvProtocol)
	}
	switch proto {
	case "grpc":
		return otlptracegrpc.New(ctx)
	case "", "http/protobuf":
		return otlptracehttp.New(ctx)
	default:
		return nil, fmt.Errorf("tracing: %s=%q: the OTLP protocol must be grpc or http/protobuf", name, proto)
	}
}

// checkSampler refuses a sampler the SDK does not know, which it would
// otherwise only log and replace with its default.
func checkSampler(getenv func(string) string) error {
	s := strings.ToLower(strings.TrimSpace(getenv(EnvSampler)))
	switch s {
	case "", "always_on", "always_off", "parentbased_always_on", "parentbased_always_off":
		return nil
	case "traceidratio", "parentbased_traceidratio":
		arg := strings.TrimSpace(getenv(EnvSamplerArg))
		if arg == "" {
			return nil // the SDK samples everything
		}
		if r, err := strconv.ParseFloat(arg, 64); err != nil || r < 0 || r > 1 {
			return fmt.Errorf("tracing: %s=%q: a ratio between 0 and 1 is needed by %s=%s", EnvSamplerArg, arg, EnvSampler, s)
		}
		return nil
	default:
		return fmt.Errorf("tracing: %s=%q: want always_on, always_off, traceidratio or their parentbased_ forms", EnvSampler, getenv(EnvSampler))
	}
}

// rateLimitedHandler logs the SDK's errors (an export that failed because the
// collector is down, a span dropped from a full queue) at most once per
// interval, with how many were not logged, so a collector outage costs one
// log line a minute.
type rateLimitedHandler struct {
	every   time.Duration
	next    atomic.Int64 // unix nanoseconds of the next line allowed
	dropped atomic.Int64
}

func (h *rateLimitedHandler) Handle(err error) {
	now := time.Now().UnixNano()
	next := h.next.Load()
	if now < next || !h.next.CompareAndSwap(next, now+int64(h.every)) {
		h.dropped.Add(1)
		return
	}
	slog.Warn("tracing: spans could not be exported", "error", err.Error(), "errors_not_logged", h.dropped.Swap(0))
}
