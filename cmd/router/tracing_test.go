package main

import (
	"context"
	"os"
	"strings"
	"testing"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/regionwarden/regionwarden/internal/tracing"
	"github.com/regionwarden/regionwarden/internal/tracing/tracingtest"
)

// TestTracingFromEnvironment runs the router with only the OTEL_* variables
// set, as a Deployment would: its calls reach the collector over OTLP/gRPC
// under the service name the variables give, the region gets the trace in
// its traceparent, and the call's log line carries the trace ID.
func TestTracingFromEnvironment(t *testing.T) {
	rcv, url := tracingtest.StartGRPC(t)
	t.Setenv(tracing.EnvEndpoint, url)
	t.Setenv(tracing.EnvProtocol, "grpc")
	t.Setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
	t.Setenv(tracing.EnvServiceName, "router-under-test")
	t.Setenv(tracing.EnvSampler, "always_on")
	r := startRegion(t, "us-central1")
	path := t.TempDir() + "/routing.json"
	if err := os.WriteFile(path, renderTable(t, r), 0o600); err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(t.TempDir() + "/router.log")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = logFile.Close() }()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	addrs := make(chan string, 1)
	go func() {
		done <- run(ctx, []string{"--listen", "127.0.0.1:0", "--upstream-insecure", "--allow-endpoint-host", "127.0.0.1",
			"--log-level", "debug", "--table-file", path}, logFile, func(a addresses) { addrs <- a.api })
	}()
	s := &started{api: <-addrs}
	c := s.client(t)
	eventually(t, "an answer once the table is loaded", func() bool { _, err := answer(c); return err == nil })
	cancel() // shutting down flushes the spans
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// The genai SDK traces its own call (otelhttp, on the same global
	// provider in this process) and sends its traceparent: the router's
	// server span continues it.
	spans := rcv.Spans()
	var call, sdk *tracingtest.Span
	for i := range spans {
		if spans[i].Resource["service.name"] != "router-under-test" {
			t.Errorf("span %q has service.name %q", spans[i].GetName(), spans[i].Resource["service.name"])
		}
		switch {
		case strings.HasPrefix(spans[i].GetName(), "generate_content") && spans[i].GetKind() == tracepb.Span_SPAN_KIND_SERVER:
			call = &spans[i]
		case spans[i].GetName() == "HTTP POST":
			sdk = &spans[i]
		}
	}
	if call == nil || sdk == nil {
		t.Fatalf("no call span and SDK span among %d spans", len(spans))
	}
	if call.TraceID() != sdk.TraceID() || call.ParentID() != sdk.SpanID() {
		t.Errorf("the call span (trace %s, parent %s) does not continue the SDK's (trace %s, span %s)",
			call.TraceID(), call.ParentID(), sdk.TraceID(), sdk.SpanID())
	}
	if tp := r.Last().Header.Get("Traceparent"); !strings.Contains(tp, call.TraceID()) {
		t.Errorf("region got traceparent %q, want trace %s", tp, call.TraceID())
	}
	log, err := os.ReadFile(logFile.Name())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), `"trace_id":"`+call.TraceID()+`"`) {
		t.Errorf("no log line carries trace_id=%s:\n%s", call.TraceID(), log)
	}
}
