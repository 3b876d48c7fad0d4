// Package tracingtest is an OTLP trace receiver for tests: a real collector
// endpoint, over HTTP (protobuf, gzip or not) and gRPC, built on the
// collector's own protobufs, that keeps every span it is sent.
package tracingtest

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Span is one received span with its resource's attributes.
type Span struct {
	*tracepb.Span
	Resource map[string]string
}

// TraceID is the span's trace ID in hex, as traceparent writes it.
func (s Span) TraceID() string { return hex.EncodeToString(s.GetTraceId()) }

// SpanID is the span's ID in hex.
func (s Span) SpanID() string { return hex.EncodeToString(s.GetSpanId()) }

// ParentID is the parent span's ID in hex, empty for a root span.
func (s Span) ParentID() string { return hex.EncodeToString(s.GetParentSpanId()) }

// Attr returns a span attribute as a string (ints and bools formatted), and
// whether it is there.
func (s Span) Attr(key string) (string, bool) { return attr(s.GetAttributes(), key) }

// Receiver collects the spans exported to it.
type Receiver struct {
	collectorpb.UnimplementedTraceServiceServer

	mu      sync.Mutex
	discard bool // count spans, keep nothing
	count   int
	spans   []Span
	// raw holds every request body as received (after gzip), so a test can
	// search the bytes on the wire.
	raw [][]byte
}

// StartHTTP serves OTLP/HTTP on a loopback port until the test ends and
// returns its base URL, for OTEL_EXPORTER_OTLP_ENDPOINT.
func StartHTTP(t testing.TB) (*Receiver, string) {
	t.Helper()
	r := &Receiver{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", r.serveHTTP)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return r, "http://" + l.Addr().String()
}

// StartGRPC serves OTLP/gRPC on a loopback port until the test ends and
// returns its URL, for OTEL_EXPORTER_OTLP_ENDPOINT (with
// OTEL_EXPORTER_OTLP_INSECURE=true).
func StartGRPC(t testing.TB) (*Receiver, string) {
	t.Helper()
	r := &Receiver{}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	collectorpb.RegisterTraceServiceServer(g, r)
	go func() { _ = g.Serve(l) }()
	t.Cleanup(g.Stop)
	return r, "http://" + l.Addr().String()
}

func (r *Receiver) serveHTTP(w http.ResponseWriter, req *http.Request) {
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	data, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var in collectorpb.ExportTraceServiceRequest
	if err := proto.Unmarshal(data, &in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.add(&in, data)
	out, _ := proto.Marshal(&collectorpb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// Export implements the gRPC trace service.
func (r *Receiver) Export(_ context.Context, in *collectorpb.ExportTraceServiceRequest) (*collectorpb.ExportTraceServiceResponse, error) {
	data, err := proto.Marshal(in)
	if err != nil {
		return nil, err
	}
	r.add(in, data)
	return &collectorpb.ExportTraceServiceResponse{}, nil
}

func (r *Receiver) add(in *collectorpb.ExportTraceServiceRequest, data []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.discard {
		for _, rs := range in.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				r.count += len(ss.GetSpans())
			}
		}
		return
	}
	r.raw = append(r.raw, data)
	for _, rs := range in.GetResourceSpans() {
		res := map[string]string{}
		for _, kv := range rs.GetResource().GetAttributes() {
			res[kv.GetKey()], _ = attr([]*commonpb.KeyValue{kv}, kv.GetKey())
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, Span{Span: s, Resource: res})
			}
		}
	}
}

// Discard makes the receiver count the spans it receives from now on and
// keep none, for benchmarks that send many.
func (r *Receiver) Discard() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.discard = true
}

// Count is how many spans were received while discarding.
func (r *Receiver) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count
}

// Spans returns the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Raw returns every request body received so far.
func (r *Receiver) Raw() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.raw...)
}

// WaitFor waits until ok holds for the spans received, failing the test after
// a minute (only a broken exporter takes that long).
func (r *Receiver) WaitFor(t testing.TB, what string, ok func([]Span) bool) []Span {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		s := r.Spans()
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("the collector never received %s; it has %d spans", what, len(s))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func attr(kvs []*commonpb.KeyValue, key string) (string, bool) {
	for _, kv := range kvs {
		if kv.GetKey() != key {
			continue
		}
		v := kv.GetValue()
		switch x := v.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			return x.StringValue, true
		case *commonpb.AnyValue_IntValue:
			return strconv.FormatInt(x.IntValue, 10), true
		case *commonpb.AnyValue_BoolValue:
			if x.BoolValue {
				return "true", true
			}
			return "false", true
		default:
			return v.String(), true
		}
	}
	return "", false
}
