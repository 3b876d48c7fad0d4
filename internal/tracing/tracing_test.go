package tracing_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/regionwarden/regionwarden/internal/tracing"
	"github.com/regionwarden/regionwarden/internal/tracing/tracingtest"
)

// clearEnv unsets every OTEL_ variable a developer's shell may have, for the
// test's duration.
func clearEnv(t *testing.T) {
	for _, k := range []string{tracing.EnvEndpoint, tracing.EnvTracesEndpoint, tracing.EnvProtocol, tracing.EnvTracesProtocol,
		tracing.EnvSDKDisabled, tracing.EnvTracesExporter, tracing.EnvSampler, tracing.EnvSamplerArg, tracing.EnvServiceName,
		"OTEL_RESOURCE_ATTRIBUTES", "OTEL_EXPORTER_OTLP_INSECURE", "OTEL_EXPORTER_OTLP_HEADERS"} {
		t.Setenv(k, "")
	}
	otel.SetTracerProvider(noop.NewTracerProvider())
}

// TestOffWithoutEndpoint checks that nothing is traced when no OTLP endpoint
// is set, or when the SDK or the exporter is turned off.
func TestOffWithoutEndpoint(t *testing.T) {
	for _, tc := range []struct{ name, key, value string }{
		{"nothing set", "", ""},
		{"SDK disabled", tracing.EnvSDKDisabled, "true"},
		{"exporter none", tracing.EnvTracesExporter, "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			if tc.key != "" {
				_, url := tracingtest.StartHTTP(t)
				t.Setenv(tracing.EnvEndpoint, url)
				t.Setenv(tc.key, tc.value)
			}
			on, shutdown, err := tracing.Setup(context.Background(), "test")
			if err != nil || on {
				t.Fatalf("Setup = %v, %v; want off", on, err)
			}
			defer func() { _ = shutdown(context.Background()) }()
			_, span := otel.Tracer("t").Start(context.Background(), "op")
			defer span.End()
			if span.IsRecording() || span.SpanContext().IsValid() {
				t.Errorf("a span is recorded with tracing off: %+v", span.SpanContext())
			}
		})
	}
}

// TestBadVariablesNamed checks that a value the SDK cannot use is refused
// with the variable's name, instead of being replaced by a default.
func TestBadVariablesNamed(t *testing.T) {
	for _, tc := range []struct{ key, value, want string }{
		{tracing.EnvProtocol, "http/json", tracing.EnvProtocol},
		{tracing.EnvTracesProtocol, "udp", tracing.EnvTracesProtocol},
		{tracing.EnvSampler, "sometimes", tracing.EnvSampler},
		{tracing.EnvSamplerArg, "1.5", tracing.EnvSamplerArg},
	} {
		clearEnv(t)
		t.Setenv(tracing.EnvEndpoint, "http://127.0.0.1:4318")
		if tc.key == tracing.EnvSamplerArg {
			t.Setenv(tracing.EnvSampler, "traceidratio")
		}
		t.Setenv(tc.key, tc.value)
		_, _, err := tracing.Setup(context.Background(), "test")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s=%s: error %v, want one naming %s", tc.key, tc.value, err, tc.want)
		}
	}
}

// TestExportsOverBothProtocols checks that spans reach a real OTLP receiver
// over HTTP and gRPC, with the service name and sampler the environment sets,
// and that a caller's traceparent is continued.
func TestExportsOverBothProtocols(t *testing.T) {
	for _, proto := range []string{"http/protobuf", "grpc"} {
		t.Run(proto, func(t *testing.T) {
			clearEnv(t)
			rcv, url := tracingtest.StartHTTP(t)
			if proto == "grpc" {
				rcv, url = tracingtest.StartGRPC(t)
				t.Setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
			}
			t.Setenv(tracing.EnvEndpoint, url)
			t.Setenv(tracing.EnvProtocol, proto)
			t.Setenv(tracing.EnvServiceName, "regionwarden-test")
			t.Setenv(tracing.EnvSampler, "parentbased_traceidratio")
			t.Setenv(tracing.EnvSamplerArg, "0") // root spans are dropped; sampled parents are followed
			on, shutdown, err := tracing.Setup(context.Background(), "default-name")
			if err != nil || !on {
				t.Fatalf("Setup = %v, %v", on, err)
			}
			const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
			ctx := otel.GetTextMapPropagator().Extract(context.Background(), propagation.HeaderCarrier(http.Header{"Traceparent": {parent}}))
			_, child := otel.Tracer("t").Start(ctx, "continued")
			child.End()
			_, root := otel.Tracer("t").Start(context.Background(), "unsampled root")
			root.End()
			if err := shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			spans := rcv.WaitFor(t, "the continued span", func(s []tracingtest.Span) bool { return len(s) > 0 })
			if len(spans) != 1 || spans[0].GetName() != "continued" {
				t.Fatalf("received %d spans (%v), want only the continued one", len(spans), spans)
			}
			s := spans[0]
			if s.TraceID() != "0af7651916cd43dd8448eb211c80319c" || s.ParentID() != "b7ad6b7169203331" {
				t.Errorf("span trace %s parent %s, want the caller's", s.TraceID(), s.ParentID())
			}
			if got := s.Resource["service.name"]; got != "regionwarden-test" {
				t.Errorf("service.name = %q, want OTEL_SERVICE_NAME's", got)
			}
		})
	}
}

// TestCollectorDownNeverBlocks ends many more spans than the queue holds
// while the collector accepts connections and never answers: ending a span
// must not wait for it (were it to, the test would hang on the first full
// queue).
func TestCollectorDownNeverBlocks(t *testing.T) {
	clearEnv(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	srv := &http.Server{ReadHeaderTimeout: time.Minute, Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release })}
	go func() { _ = srv.Serve(l) }()
	defer func() { close(release); _ = srv.Close() }()
	t.Setenv(tracing.EnvEndpoint, "http://"+l.Addr().String())
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "1")
	on, shutdown, err := tracing.Setup(context.Background(), "test")
	if err != nil || !on {
		t.Fatalf("Setup = %v, %v", on, err)
	}
	tr := otel.Tracer("t")
	for range 20000 {
		_, s := tr.Start(context.Background(), "op")
		s.End()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_ = shutdown(ctx) // gives up on the hung export when ctx ends
}

// TestLogHandlerAddsTraceIDs checks that log records carry trace_id and
// span_id when their context has a span, and nothing when it has none.
func TestLogHandlerAddsTraceIDs(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(tracing.LogHandler(slog.NewJSONHandler(&buf, nil))).With("component", "test")
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0x0a, 0xf7, 0x65, 0x19, 0x16, 0xcd, 0x43, 0xdd, 0x84, 0x48, 0xeb, 0x21, 0x1c, 0x80, 0x31, 0x9c},
		SpanID:  trace.SpanID{0xb7, 0xad, 0x6b, 0x71, 0x69, 0x20, 0x33, 0x31},
	})
	log.InfoContext(trace.ContextWithSpanContext(context.Background(), sc), "with span")
	log.InfoContext(context.Background(), "without span")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("logged %q", buf.String())
	}
	var with, without map[string]any
	_ = json.Unmarshal([]byte(lines[0]), &with)
	_ = json.Unmarshal([]byte(lines[1]), &without)
	if with["trace_id"] != "0af7651916cd43dd8448eb211c80319c" || with["span_id"] != "b7ad6b7169203331" || with["component"] != "test" {
		t.Errorf("record with a span: %v", with)
	}
	if _, ok := without["trace_id"]; ok {
		t.Errorf("record without a span has a trace_id: %v", without)
	}
	if got := tracing.LogValues(trace.ContextWithSpanContext(context.Background(), sc)); len(got) != 4 || got[1] != "0af7651916cd43dd8448eb211c80319c" {
		t.Errorf("LogValues = %v", got)
	}
	if got := tracing.LogValues(context.Background()); got != nil {
		t.Errorf("LogValues without a span = %v", got)
	}
}
