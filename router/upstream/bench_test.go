package upstream

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/regionwarden/regionwarden/router/table"
)

// BenchmarkClientLookup measures finding a known endpoint's connections, the
// only shared state a call touches.
func BenchmarkClientLookup(b *testing.B) {
	c := New(Options{Insecure: true})
	b.Cleanup(func() { _ = c.Close() })
	for _, ep := range []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3", "127.0.0.1:4"} {
		if _, err := c.get(ep); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			e, err := c.acquire("127.0.0.1:3")
			if err != nil {
				b.Fatal(err)
			}
			e.release()
		}
	})
}

// BenchmarkOutHeader measures building a REST call's header from a caller's
// header as the genai SDK sends it.
func BenchmarkOutHeader(b *testing.B) {
	in := http.Header{
		"Content-Type":      {"application/json"},
		"User-Agent":        {"google-genai-sdk/1.77.0 gl-go/go1.26"},
		"X-Goog-Api-Client": {"google-genai-sdk/1.77.0 gl-go/go1.26"},
		"Authorization":     {"Bearer caller"},
		"Accept-Encoding":   {"gzip"},
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = outHeader(in, table.RequestTypeShared, "", "Bearer router", time.Time{})
	}
}

// answerJSON is a unary answer as Vertex writes it, with usage at the end.
const answerJSON = `{"candidates":[{"content":{"role":"model","parts":[{"text":"Provisioned Throughput is reserved capacity, bought per model and region, measured in GSUs; calls over it spill to pay-as-you-go unless they ask for dedicated capacity."}]},"finishReason":"STOP","avgLogprobs":-0.12}],"usageMetadata":{"promptTokenCount":12,"candidatesTokenCount":40,"totalTokenCount":52,"trafficType":"PROVISIONED_THROUGHPUT","promptTokensDetails":[{"modality":"TEXT","tokenCount":12}]},"modelVersion":"gemini-2.5-flash","createTime":"2026-11-30T10:00:00.000000Z","responseId":"abc"}`

// BenchmarkAnswerScanner measures reading usage from an answer as it passes.
func BenchmarkAnswerScanner(b *testing.B) {
	s := NewAnswerScanner(FrameObject)
	p := []byte(answerJSON)
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	for b.Loop() {
		s.Reset(FrameObject)
		_, _ = s.Write(p)
	}
	if s.Tokens != 52 {
		b.Fatal(s.Tokens)
	}
}

// BenchmarkSendLoopback measures one REST call through the real transport to
// a fake region on loopback.
func BenchmarkSendLoopback(b *testing.B) {
	prov, shared := regions(b)
	c := newClients(b, Options{})
	pool := testPool(prov, shared, table.RequestTypeSpillover)
	t := Target{Pool: pool, Region: pool.Regions[0]}
	r := &Request{Version: "v1", Method: "generateContent", Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(generateBody)}
	b.ReportAllocs()
	for b.Loop() {
		resp, err := c.Send(b.Context(), t, r)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
}
