package server_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/regionwarden/regionwarden/internal/waittest"
	"github.com/regionwarden/regionwarden/router/table"
	"github.com/regionwarden/regionwarden/router/upstream/upstreamtest"
)

// futureRequest is a generateContent body with fields no aiplatform proto of
// this build knows: an option inside generationConfig and a top-level field,
// in an order, spacing and escaping a decoder would not keep.
const futureRequest = `{ "contents":[{"role":"user","parts":[{"text":"h\u00e9llo"}]}],
  "generationConfig":{"temperature":0.2, "someFutureOption":{"mode":"x","levels":[1,2.50,3e2]}},
  "aFieldFromNextYear":[{"k":null}] }`

// futureAnswer is what the region adds to every answer object: fields no
// aiplatform proto of this build knows.
const futureAnswer = `"someFutureAnswerField":{"nested":[true,{"x":"\u2603"}]},"usageMetadata2":0`

// TestUnknownFieldsPassThroughREST: a request carrying fields no proto knows
// reaches the region byte for byte, on both API versions; the region's answer
// carrying such fields reaches the caller byte for byte, unary and streamed
// (server-sent events and JSON array).
func TestUnknownFieldsPassThroughREST(t *testing.T) {
	pt := startRegion(t, "europe-west1", table.TierProvisioned)
	pt.set(func(b *upstreamtest.Behavior) { b.ExtraJSON = futureAnswer })
	r := startRouter(t, poolOf(generous(), region(pt, 0)))
	for _, version := range []string{"v1", "v1beta1"} {
		for _, call := range []struct{ method, query string }{
			{"generateContent", ""},
			{"streamGenerateContent", "?alt=sse"},
			{"streamGenerateContent", ""},
			{"countTokens", ""},
		} {
			t.Run(version+"/"+call.method+call.query, func(t *testing.T) {
				path := "/" + version + "/projects/" + project + "/locations/us-east4/publishers/google/models/" + model + ":" + call.method + call.query
				resp, got := r.post(path, futureRequest, http.Header{"Content-Type": {"application/json"}})
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("status %d: %s", resp.StatusCode, got)
				}
				seen := awaitAnswer(t, pt)
				if string(seen.Body) != futureRequest {
					t.Errorf("the region got\n%s\nwant the caller's bytes\n%s", seen.Body, futureRequest)
				}
				if want := "/" + version + "/projects/" + project + "/locations/europe-west1/publishers/google/models/" + model + ":" + call.method; seen.Path != want {
					t.Errorf("path %s, want %s", seen.Path, want)
				}
				if !bytes.Equal(got, seen.Answer) {
					t.Errorf("the caller got\n%s\nwant the region's bytes\n%s", got, seen.Answer)
				}
				if !bytes.Contains(got, []byte(futureAnswer)) {
					t.Errorf("answer lacks the unknown fields: %s", got)
				}
			})
		}
	}
}

// awaitAnswer returns the region's last call once its answer is recorded:
// the region records it when its handler returns, which may be a moment
// after the router has relayed the last byte.
func awaitAnswer(t *testing.T, f *fakeRegion) upstreamtest.Call {
	t.Helper()
	var c upstreamtest.Call
	waittest.For(t, 5*time.Second, "the region records its answer", func() bool {
		c = f.Last()
		return c.Answer != nil
	})
	return c
}

// TestCallerHeadersPassThrough: what the caller sends beside the body goes on,
// but for what stays with the router; what the region answers beside the
// body comes back, but for what would be wrong from the router's address.
func TestCallerHeadersPassThrough(t *testing.T) {
	pt, r := onePT(t)
	resp, _ := r.post(generatePath, `{"contents":[{"parts":[{"text":"hi"}]}]}`, http.Header{
		"Content-Type":                 {"application/json"},
		"X-Goog-User-Project":          {"billing"},
		"X-Goog-Api-Client":            {"genai-go/1"},
		"X-Vertex-Ai-Llm-Request-Type": {"shared"},
		"X-Regionwarden-Priority":      {"critical"},
		"Authorization":                {"Bearer " + callerTok},
	})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	h := pt.Last().Header
	for k, want := range map[string]string{"X-Goog-User-Project": "billing", "X-Goog-Api-Client": "genai-go/1", "Content-Type": "application/json"} {
		if got := h.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	for _, k := range []string{"Authorization", "X-Regionwarden-Priority", "X-Vertex-Ai-Llm-Request-Type"} {
		if v := h.Values(k); len(v) > 0 {
			t.Errorf("%s reached the region: %q", k, v)
		}
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("answer Content-Type %q", ct)
	}
}
