package upstream

import (
	"strings"
	"testing"
)

// TestBodyModel reads a chat completion's model without decoding the body,
// and refuses a body whose model is missing, not a string, or given twice.
func TestBodyModel(t *testing.T) {
	for _, tc := range []struct {
		body, want, err string
	}{
		{`{"messages":[{"role":"user","content":"{\"model\":\"x/y\"}"}],"model":"google/gemini-3.6-flash","stream":true}`, "google/gemini-3.6-flash", ""},
		{`{"model":"google\/gemini-3.6-flash"}`, "google/gemini-3.6-flash", ""},
		{`{"messages":[{"model":"google/nested"}]}`, "", "no \"model\""},
		{`{"model":"google/a","model":"google/b"}`, "", "more than one"},
		{`{"model":7}`, "", "not a string"},
		{`[{"model":"google/a"}]`, "", "no \"model\""},
		{``, "", "no \"model\""},
	} {
		got, err := BodyModel([]byte(tc.body))
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%s: %q, %v; want %q", tc.body, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: %q, %v; want an error saying %q", tc.body, got, err, tc.err)
		}
	}
}

// TestChatUsage reads the usage of chat completions as Vertex writes it:
// reasoning tokens count as output, the traffic type is in
// extra_properties.google, and a stream's usage is in its last chunk.
func TestChatUsage(t *testing.T) {
	unary := `{"choices":[{"index":0,"message":{"role":"assistant","content":"usage: {\"prompt_tokens\": 1}"},"finish_reason":"stop"}],` +
		`"model":"google/gemini-3.6-flash","object":"chat.completion",` +
		`"usage":{"completion_tokens":572,"completion_tokens_details":{"reasoning_tokens":951},"extra_properties":{"google":{"traffic_type":"ON_DEMAND_PRIORITY"}},"prompt_tokens":9,"total_tokens":1532}}`
	s := NewAnswerScanner(FrameObject)
	_, _ = s.Write([]byte(unary))
	if s.Tokens != 1532 || s.InputTokens != 9 || s.OutputTokens != 572+951 || s.TrafficType != "ON_DEMAND_PRIORITY" {
		t.Errorf("unary: %+v", s)
	}
	stream := "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"Hel\"}}]}\n\n" +
		"data: {\"choices\":[{\"delta\":{\"content\":\"lo\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":2,\"total_tokens\":6,\"extra_properties\":{\"google\":{\"traffic_type\":\"ON_DEMAND_FLEX\"}}}}\n\n" +
		"data: [DONE]\n\n"
	s.Reset(FrameObject)
	for i := range len(stream) { // byte by byte: any split
		_, _ = s.Write([]byte{stream[i]})
	}
	if s.Tokens != 6 || s.InputTokens != 4 || s.OutputTokens != 2 || s.TrafficType != "ON_DEMAND_FLEX" || !s.Between() {
		t.Errorf("stream: %+v, between %v", s, s.Between())
	}
}
