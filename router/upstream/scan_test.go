package upstream

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
)

func TestAnswerScanner(t *testing.T) {
	cases := []struct {
		name    string
		framing int
		answer  string
		tokens  int64
		traffic string
		err     codes.Code
	}{
		{"unary", FrameObject, answerJSON, 52, "PROVISIONED_THROUGHPUT", codes.OK},
		{"unknown fields around and inside", FrameObject,
			`{"aNewField":{"usageMetadata":{"totalTokenCount":999}},"usageMetadata":{"futureCount":{"a":[1,{"b":"}"}]},"totalTokenCount":"77","trafficType":"ON_DEMAND_FLEX"},"x":"usageMetadata"}`,
			77, "ON_DEMAND_FLEX", codes.OK},
		{"keys inside strings and escapes", FrameObject,
			`{"candidates":[{"content":{"parts":[{"text":"\"usageMetadata\":{\"totalTokenCount\":5} \\\" {"}]}}],"usageMetadata":{"totalTokenCount":3}}`,
			3, "", codes.OK},
		{"nested usage is not the answer's", FrameObject,
			`{"candidates":[{"usageMetadata":{"totalTokenCount":100,"trafficType":"ON_DEMAND"}}]}`, 0, "", codes.OK},
		{"server-sent events", FrameObject,
			"data: {\"candidates\":[],\"usageMetadata\":{\"totalTokenCount\":7,\"trafficType\":\"ON_DEMAND\"}}\r\n\r\n" +
				"data: {\"candidates\":[],\"usageMetadata\":{\"totalTokenCount\":12,\"trafficType\":\"ON_DEMAND\"}}\r\n\r\n",
			12, "ON_DEMAND", codes.OK},
		{"JSON array stream", FrameArray,
			"[{\"usageMetadata\":{\"totalTokenCount\":7}}\r\n,{\"usageMetadata\":{\"totalTokenCount\":12,\"trafficType\":\"PROVISIONED_THROUGHPUT\"}}]",
			12, "PROVISIONED_THROUGHPUT", codes.OK},
		{"error event", FrameObject,
			"data: {\"usageMetadata\":{\"totalTokenCount\":4}}\r\n\r\ndata: {\"error\":{\"code\":503,\"message\":\"gone\",\"status\":\"UNAVAILABLE\"}}\r\n\r\n",
			4, "", codes.Unavailable},
		{"error in an array, HTTP code only", FrameArray, `[{"a":1},{"error":{"code":429,"message":"quota"}}]`, 0, "", codes.ResourceExhausted},
		{"a future traffic type", FrameObject, `{"usageMetadata":{"trafficType":"ON_DEMAND_SPOT"}}`, 0, "ON_DEMAND_SPOT", codes.OK},
		{"no traffic type that is not a name", FrameObject, `{"usageMetadata":{"trafficType":"a b"}}`, 0, "", codes.OK},
		{"countTokens", FrameObject, `{"totalTokens":42,"totalBillableCharacters":11}`, 0, "", codes.OK},
		{"not JSON", FrameObject, `<html>]]]}}}{{"usageMetadata"</html>`, 0, "", codes.OK},
		// Claude on Vertex (rawPredict): an Anthropic message, its usage
		// without a total, the prompt cache's tokens part of the input.
		{"Anthropic message", FrameObject,
			`{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"\"usage\":{\"output_tokens\":900}"}],"usage":{"input_tokens":20,"cache_read_input_tokens":5,"output_tokens":12}}`,
			37, "", codes.OK},
		// streamRawPredict: the input's tokens come in message_start's
		// message, the output's in message_delta, then an error event.
		{"Anthropic stream", FrameObject,
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"content\":[],\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n" +
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n" +
				"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":15}}\n\n" +
				"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
			40, "", codes.ResourceExhausted},
		{"Anthropic error of a kind not known", FrameObject, `{"type":"error","error":{"type":"future_error","message":"?"}}`, 0, "", codes.Unknown},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Every split of the answer in two pieces reads the same.
			for cut := 0; cut <= len(tc.answer); cut++ {
				s := NewAnswerScanner(tc.framing)
				_, _ = s.Write([]byte(tc.answer[:cut]))
				_, _ = s.Write([]byte(tc.answer[cut:]))
				if s.Tokens != tc.tokens || s.TrafficType != tc.traffic || s.Err != tc.err {
					t.Fatalf("cut at %d: tokens %d, traffic %q, error %v; want %d, %q, %v",
						cut, s.Tokens, s.TrafficType, s.Err, tc.tokens, tc.traffic, tc.err)
				}
			}
		})
	}
}

func TestAnswerScannerSkipsHugeFields(t *testing.T) {
	s := NewAnswerScanner(FrameObject)
	_, _ = s.Write([]byte(`{"usageMetadata":{"pad":"` + strings.Repeat("x", 2*maxCapture) + `","totalTokenCount":5},"usageMetadata":{"totalTokenCount":6}}`))
	if s.Tokens != 6 {
		t.Errorf("tokens %d, want 6 from the field small enough to read", s.Tokens)
	}
}

func FuzzAnswerScanner(f *testing.F) {
	f.Add([]byte(answerJSON), 5)
	f.Add([]byte(`[{"usageMetadata":{"totalTokenCount":7}},{"error":{"status":"UNAVAILABLE"}}]`), 3)
	f.Fuzz(func(t *testing.T, b []byte, cut int) {
		for _, framing := range []int{FrameObject, FrameArray} {
			whole := NewAnswerScanner(framing)
			_, _ = whole.Write(b)
			if cut < 0 {
				cut = -cut
			}
			cut %= len(b) + 1
			split := NewAnswerScanner(framing)
			_, _ = split.Write(b[:cut])
			_, _ = split.Write(b[cut:])
			if whole.Tokens != split.Tokens || whole.TrafficType != split.TrafficType || whole.Err != split.Err {
				t.Fatalf("split at %d reads differently", cut)
			}
			if len(whole.TrafficType) > maxTrafficType {
				t.Fatalf("traffic type of %d bytes", len(whole.TrafficType))
			}
		}
	})
}

// TestAnswerScannerTokenSplit checks the input and output tokens a trace
// reports: promptTokenCount in, candidates and thoughts out, a stream's
// running totals read to their last.
func TestAnswerScannerTokenSplit(t *testing.T) {
	for _, tc := range []struct {
		name       string
		framing    int
		answer     string
		input, out int64
	}{
		{"unary", FrameObject, `{"usageMetadata":{"promptTokenCount":400,"candidatesTokenCount":90,"thoughtsTokenCount":10,"totalTokenCount":500}}`, 400, 100},
		{"no thoughts", FrameObject, `{"usageMetadata":{"promptTokenCount":12,"candidatesTokenCount":3}}`, 12, 3},
		{"stream totals", FrameObject,
			"data: {\"usageMetadata\":{\"promptTokenCount\":40,\"candidatesTokenCount\":5}}\r\n\r\n" +
				"data: {\"usageMetadata\":{\"promptTokenCount\":40,\"candidatesTokenCount\":25}}\r\n\r\n", 40, 25},
		{"prompt text is not usage", FrameObject, `{"candidates":[{"content":{"parts":[{"text":"promptTokenCount: 9"}]}}]}`, 0, 0},
	} {
		for cut := 0; cut <= len(tc.answer); cut++ {
			s := NewAnswerScanner(tc.framing)
			_, _ = s.Write([]byte(tc.answer[:cut]))
			_, _ = s.Write([]byte(tc.answer[cut:]))
			if s.InputTokens != tc.input || s.OutputTokens != tc.out {
				t.Fatalf("%s, cut at %d: input %d output %d, want %d %d", tc.name, cut, s.InputTokens, s.OutputTokens, tc.input, tc.out)
			}
		}
	}
}

// TestCachedContentReadsNothingElse: the cached content of a body of a
// megabyte of contents that mention it is read without copying any of the
// body (a hostile caller's megabytes cost a scan, not memory), and the
// cases Google would refuse name none.
func TestCachedContentReadsNothingElse(t *testing.T) {
	const cache = "projects/p/locations/us-central1/cachedContents/1"
	big := `{"contents":[{"parts":[{"text":"` + strings.Repeat(`cachedContent \" `, 1<<16) + `"}]}],"cachedContent":"` + cache + `"}`
	body := []byte(big)
	if got := CachedContent(body); got != cache {
		t.Fatalf("read %q, want %q", got, cache)
	}
	// The name itself and what decoding its JSON string takes: a few dozen
	// bytes, against the megabyte a decoder that keeps the members copies.
	res := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			CachedContent(body)
		}
	})
	if n := res.AllocedBytesPerOp(); n > 1024 {
		t.Errorf("reading a %d-byte body allocated %d bytes, want at most 1 KiB: nothing of the body copied", len(body), n)
	}
	for _, body := range []string{
		`{"cachedContent":"` + cache + `","cached_content":"` + cache + `"}`,
		`{"cachedContent":17}`,
		`["cachedContent"]`,
	} {
		if got := CachedContent([]byte(body)); got != "" {
			t.Errorf("%s: read %q, want none", body, got)
		}
	}
}

// TestChatCachedContent: a chat completion names a cached content only at
// extra_body.google, once at each level, as a string.
func TestChatCachedContent(t *testing.T) {
	const cache = "projects/p/locations/us-central1/cachedContents/1"
	for _, tc := range []struct{ body, want string }{
		{`{"model":"google/m","extra_body":{"google":{"cached_content":"` + cache + `"}}}`, cache},
		{`{"extra_body":{"google":{"thinking_config":{},"cachedContent":"` + cache + `"}},"messages":[]}`, cache},
		{`{"cached_content":"` + cache + `"}`, ""},
		{`{"extra_body":{"cached_content":"` + cache + `"}}`, ""},
		{`{"extra_body":{"google":{"cached_content":17}}}`, ""},
		{`{"extra_body":{"google":{"cached_content":"` + cache + `","cachedContent":"` + cache + `"}}}`, ""},
		{`{"extra_body":{"google":{"cached_content":"` + cache + `"}},"extra_body":{}}`, ""},
		{`{"extra_body":{"google":["cached_content"]}}`, ""},
		{`{"extra_body":{"google":{"cached_content":"` + cache, ""},
	} {
		if got := ChatCachedContent([]byte(tc.body)); got != tc.want {
			t.Errorf("%s: read %q, want %q", tc.body, got, tc.want)
		}
	}
}
