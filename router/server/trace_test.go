package server_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/regionwarden/regionwarden/internal/tracing/tracingtest"
	"github.com/regionwarden/regionwarden/router/server"
	"github.com/regionwarden/regionwarden/router/table"
	"github.com/regionwarden/regionwarden/router/upstream"
	"github.com/regionwarden/regionwarden/router/upstream/upstreamtest"
)

// The caller's trace context, as a W3C traceparent.
const (
	callerTrace     = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan      = "00f067aa0ba902b7"
	callerParent    = "00-" + callerTrace + "-" + callerSpan + "-01"
	secretPrompt    = "the quarterly numbers of project nightingale"
	tracedBodyShape = `{"contents":[{"role":"user","parts":[{"text":%q}]}]}`
)

// tracedRouter is a router whose spans go over OTLP/HTTP to an in-process
// collector, sampling every call, and whose attempts carry their trace
// context to the regions.
func tracedRouter(t *testing.T, pools ...table.Pool) (*httptest.Server, *tracingtest.Receiver, *sdktrace.TracerProvider) {
	t.Helper()
	hs, _, rcv, tp := tracedServer(t, pools...)
	return hs, rcv, tp
}

// tracedServer is tracedRouter with its server, for its gRPC surface.
func tracedServer(t *testing.T, pools ...table.Pool) (*httptest.Server, *server.Server, *tracingtest.Receiver, *sdktrace.TracerProvider) {
	t.Helper()
	rcv, url := tracingtest.StartHTTP(t)
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(url+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	w3c := propagation.TraceContext{}
	clients := upstream.New(upstream.Options{Insecure: true, Propagator: w3c})
	t.Cleanup(func() { _ = clients.Close() })
	srv, err := server.New(server.Options{Upstream: clients, Logger: quietLogger(), Seed: 1, TracerProvider: tp, Propagator: w3c})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Apply(&table.Table{Version: table.Version, Pools: pools}); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return hs, srv, rcv, tp
}

// TestRetriedCallTrace sends one call whose first attempt fails in the
// provisioned region and whose retry succeeds in a shared one, with the
// caller's traceparent: the collector receives one server span and two
// attempt spans in the caller's trace, with the GenAI conventions'
// attributes and the router's own, and the prompt and the answer nowhere.
func TestRetriedCallTrace(t *testing.T) {
	pt := startRegion(t, "europe-west1", table.TierProvisioned)
	shared := startRegion(t, "europe-west4", table.TierShared)
	pt.set(func(b *upstreamtest.Behavior) {
		b.Fault = func(int64) error { return status.Error(codes.Unavailable, "the region is down") }
	})
	hs, rcv, tp := tracedRouter(t, poolOf(generous(), region(pt, 0), region(shared, 0)))

	req, _ := http.NewRequest(http.MethodPost,
		hs.URL+"/v1/projects/"+project+"/locations/europe-west1/publishers/google/models/"+model+":generateContent",
		strings.NewReader(fmt.Sprintf(tracedBodyShape, secretPrompt)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Traceparent", callerParent)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var answer bytes.Buffer
	_, _ = answer.ReadFrom(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(answer.String(), secretPrompt) {
		t.Fatalf("answer %d %s; want 200 from the shared region, which echoes the prompt", resp.StatusCode, answer.String())
	}
	if err := tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := rcv.WaitFor(t, "three spans", func(s []tracingtest.Span) bool { return len(s) >= 3 })
	if len(spans) != 3 {
		t.Fatalf("received %d spans, want a server span and two attempt spans", len(spans))
	}

	var call tracingtest.Span
	var attempts []tracingtest.Span
	for _, s := range spans {
		if s.TraceID() != callerTrace {
			t.Errorf("span %q is in trace %s, not the caller's %s", s.GetName(), s.TraceID(), callerTrace)
		}
		switch s.GetKind() {
		case tracepb.Span_SPAN_KIND_SERVER:
			call = s
		case tracepb.Span_SPAN_KIND_CLIENT:
			attempts = append(attempts, s)
		}
	}
	if call.Span == nil || len(attempts) != 2 {
		t.Fatalf("spans %v: want one server span and two client spans", spans)
	}
	if call.ParentID() != callerSpan {
		t.Errorf("server span's parent %s, want the caller's span %s", call.ParentID(), callerSpan)
	}
	if call.GetName() != "generate_content "+model {
		t.Errorf("server span named %q", call.GetName())
	}
	expectAttrs(t, "server span", call, map[string]string{
		"gen_ai.operation.name": "generate_content", "gen_ai.provider.name": "gcp.vertex_ai", "gen_ai.request.model": model,
		"regionwarden.pool": project + "/google/" + model, "regionwarden.attempts": "2", "regionwarden.region": "europe-west4",
		"http.response.status_code": "200", "gen_ai.usage.input_tokens": "7", "gen_ai.usage.output_tokens": "5",
		"regionwarden.traffic_type": "ON_DEMAND",
	})
	if v, ok := call.Attr("error.type"); ok {
		t.Errorf("server span of a call that succeeded has error.type %q", v)
	}

	if a, _ := attempts[0].Attr("regionwarden.attempt"); a != "1" {
		attempts[0], attempts[1] = attempts[1], attempts[0]
	}
	first, second := attempts[0], attempts[1]
	for i, a := range attempts {
		if a.ParentID() != call.SpanID() {
			t.Errorf("attempt %d's parent is %s, want the server span %s", i+1, a.ParentID(), call.SpanID())
		}
	}
	expectAttrs(t, "first attempt", first, map[string]string{
		"gen_ai.operation.name": "generate_content", "gen_ai.provider.name": "gcp.vertex_ai", "gen_ai.request.model": model,
		"regionwarden.pool": project + "/google/" + model, "regionwarden.region": "europe-west1", "regionwarden.tier": "provisioned",
		"regionwarden.attempt": "1", "regionwarden.outcome": "failure", "error.type": "503",
		"regionwarden.retried": "true", "regionwarden.retry_reason": "failure",
	})
	expectAttrs(t, "second attempt", second, map[string]string{
		"regionwarden.region": "europe-west4", "regionwarden.tier": "shared", "regionwarden.attempt": "2",
		"regionwarden.outcome": "success", "gen_ai.usage.input_tokens": "7", "gen_ai.usage.output_tokens": "5",
		"regionwarden.traffic_type": "ON_DEMAND",
	})
	for _, k := range []string{"error.type", "regionwarden.retried"} {
		if v, ok := second.Attr(k); ok {
			t.Errorf("second attempt has %s = %q", k, v)
		}
	}

	// Each region saw the trace continued from its own attempt's span.
	for _, c := range []struct {
		r    *fakeRegion
		span tracingtest.Span
	}{{pt, first}, {shared, second}} {
		got := c.r.Last().Header.Get("Traceparent")
		if want := "00-" + callerTrace + "-" + c.span.SpanID() + "-01"; got != want {
			t.Errorf("%s got traceparent %q, want %q (its attempt's span)", c.r.name, got, want)
		}
	}

	// Neither the prompt nor the answer is in anything the collector got.
	for _, raw := range rcv.Raw() {
		for _, secret := range []string{secretPrompt, "answers:"} {
			if bytes.Contains(raw, []byte(secret)) {
				t.Errorf("the spans sent to the collector contain %q", secret)
			}
		}
	}
}

// TestTraceparentPassesWithTracingOff checks that a router without tracing
// (the global no-op provider and propagator) passes the caller's
// traceparent to the region unchanged, so the caller's trace still reaches
// Vertex AI.
func TestTraceparentPassesWithTracingOff(t *testing.T) {
	pt, r := onePT(t)
	resp, body := r.post("/v1/projects/"+project+"/locations/europe-west1/publishers/google/models/"+model+":generateContent",
		`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, http.Header{"Traceparent": {callerParent}})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("answer %d %s", resp.StatusCode, body)
	}
	if got := pt.Last().Header.Get("Traceparent"); got != callerParent {
		t.Errorf("region got traceparent %q, want the caller's %q", got, callerParent)
	}
}

func expectAttrs(t *testing.T, what string, s tracingtest.Span, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got, ok := s.Attr(k); !ok || got != v {
			t.Errorf("%s: %s = %q (present %v), want %q", what, k, got, ok, v)
		}
	}
}

// TestRetriedGRPCCallTrace is TestRetriedCallTrace on the gRPC surface: the
// caller's traceparent comes in the call's metadata, and each region gets
// its attempt's in the metadata of its call.
func TestRetriedGRPCCallTrace(t *testing.T) {
	pt := startRegion(t, "europe-west1", table.TierProvisioned)
	shared := startRegion(t, "europe-west4", table.TierShared)
	pt.set(func(b *upstreamtest.Behavior) {
		b.Fault = func(int64) error { return status.Error(codes.Unavailable, "the region is down") }
	})
	_, srv, rcv, tp := tracedServer(t, poolOf(generous(), region(pt, 0), region(shared, 0)))
	c := (&router{t: t, srv: srv}).serveGRPC()
	ctx := metadata.AppendToOutgoingContext(context.Background(), "traceparent", callerParent)
	if _, err := c.prediction.GenerateContent(ctx, grpcRequest(secretPrompt)); err != nil {
		t.Fatal(err)
	}
	if err := tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := rcv.WaitFor(t, "three spans", func(s []tracingtest.Span) bool { return len(s) >= 3 })
	var call tracingtest.Span
	attempts := map[string]tracingtest.Span{}
	for _, s := range spans {
		if s.TraceID() != callerTrace {
			t.Errorf("span %q is in trace %s, not the caller's", s.GetName(), s.TraceID())
		}
		if s.GetKind() == tracepb.Span_SPAN_KIND_SERVER {
			call = s
		} else {
			r, _ := s.Attr("regionwarden.region")
			attempts[r] = s
		}
	}
	if call.Span == nil || len(attempts) != 2 || call.ParentID() != callerSpan {
		t.Fatalf("spans %v: want a server span under the caller's and two attempts", spans)
	}
	expectAttrs(t, "server span", call, map[string]string{
		"gen_ai.provider.name": "gcp.vertex_ai", "gen_ai.request.model": model, "rpc.response.status_code": "OK",
		"regionwarden.attempts": "2", "gen_ai.usage.input_tokens": "7", "gen_ai.usage.output_tokens": "5",
	})
	expectAttrs(t, "first attempt", attempts["europe-west1"], map[string]string{
		"regionwarden.attempt": "1", "regionwarden.outcome": "failure", "error.type": "Unavailable", "regionwarden.retried": "true",
	})
	for name, r := range map[string]*fakeRegion{"europe-west1": pt, "europe-west4": shared} {
		got := r.Last().Metadata.Get("traceparent")
		if want := "00-" + callerTrace + "-" + attempts[name].SpanID() + "-01"; len(got) != 1 || got[0] != want {
			t.Errorf("%s got traceparent %v, want %q", name, got, want)
		}
	}
	for _, raw := range rcv.Raw() {
		if bytes.Contains(raw, []byte(secretPrompt)) {
			t.Error("the spans sent to the collector contain the prompt")
		}
	}
}
