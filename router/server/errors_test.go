package server_test

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/genai"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/regionwarden/regionwarden/router/policy"
	"github.com/regionwarden/regionwarden/router/server"
	"github.com/regionwarden/regionwarden/router/table"
	"github.com/regionwarden/regionwarden/router/upstream/upstreamtest"
)

const generatePath = "/v1beta1/projects/" + project + "/locations/europe-west1/publishers/google/models/" + model + ":generateContent"

// TestErrorAnswers checks the answers to requests the router refuses itself:
// status, Google's error JSON, and a message that says what was wrong.
func TestErrorAnswers(t *testing.T) {
	pt, r := onePT(t)
	valid := `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`
	tests := []struct {
		name       string
		path, body string
		header     http.Header
		code       int
		status     string
		message    []string // substrings of the message
	}{
		{"unknown model", strings.Replace(generatePath, model, "gemini-0.1", 1), valid, nil, 404, "NOT_FOUND",
			[]string{`project "` + project + `"`, `publisher "google"`, `model "gemini-0.1"`}},
		{"unknown project", strings.Replace(generatePath, project, "other-project", 1), valid, nil, 404, "NOT_FOUND", []string{`project "other-project"`}},
		{"unknown API version", strings.Replace(generatePath, "v1beta1", "v2", 1), valid, nil, 404, "NOT_FOUND", []string{`"v2"`}},
		{"unknown path", "/v1/models", valid, nil, 404, "NOT_FOUND", []string{"/v1/models"}},
		{"body too large", generatePath, `{"contents":[{"parts":[{"text":"` + strings.Repeat("x", 2<<20) + `"}]}]}`, nil, 413, "INVALID_ARGUMENT", []string{"larger than 1048576 bytes"}},
		{"unknown priority", generatePath, valid, http.Header{"X-Regionwarden-Priority": {"urgent"}}, 400, "INVALID_ARGUMENT", []string{`"urgent"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := r.post(tt.path, tt.body, tt.header)
			if resp.StatusCode != tt.code {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.code, body)
			}
			code, msg, st := googleErr(t, body)
			if code != tt.code || st != tt.status {
				t.Errorf("error %d %s, want %d %s", code, st, tt.code, tt.status)
			}
			for _, want := range tt.message {
				if !strings.Contains(msg, want) {
					t.Errorf("message %q does not say %q", msg, want)
				}
			}
		})
	}
	if n := pt.calls.Load(); n != 0 {
		t.Errorf("refused requests reached the region %d times", n)
	}
}

// TestRegionJudgesTheBody: the router does not decode bodies; a body the API
// refuses reaches the region, whose answer the caller gets byte for byte, and
// a caller's fault is neither retried nor held against the region.
func TestRegionJudgesTheBody(t *testing.T) {
	pt := startRegion(t, "europe-west1", table.TierProvisioned)
	other := startRegion(t, "us-central1", table.TierShared)
	r := startRouter(t, poolOf(generous(), region(pt, 0), region(other, 0)))
	for _, body := range []string{`{"contents": [`, `{"contents": "hi"}`} {
		resp, got := r.post(generatePath, body, nil)
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("%s: status %d: %s", body, resp.StatusCode, got)
		}
		if _, msg, st := googleErr(t, got); st != "INVALID_ARGUMENT" || !strings.Contains(msg, "Invalid JSON payload") {
			t.Errorf("%s: error %s %q", body, st, msg)
		}
		if want := pt.Last().Body; string(want) != body {
			t.Errorf("region saw %q, want %q", want, body)
		}
	}
	if n := other.calls.Load(); n != 0 {
		t.Errorf("a caller's fault was retried: %d calls", n)
	}
	if got := r.attempts("europe-west1", "provisioned", policy.CallerFault); got != 2 {
		t.Errorf("attempts caller_fault = %v, want 2", got)
	}
}

// TestUnknownModelThroughSDK: the SDK reads the router's 404 as an APIError.
func TestUnknownModelThroughSDK(t *testing.T) {
	_, r := onePT(t)
	_, err := r.client("").Models.GenerateContent(t.Context(), "gemini-0.1", genai.Text("hi"), nil)
	var apiErr genai.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != 404 || !strings.Contains(apiErr.Message, `model "gemini-0.1"`) {
		t.Fatalf("error %v, want a 404 APIError naming the model", err)
	}
}

// TestOverCapacityAnswers429WithRetryAfter: when no region has headroom and
// the call has no time to wait for it, the router sheds with 429 and
// Retry-After rather than push the call on.
func TestOverCapacityAnswers429WithRetryAfter(t *testing.T) {
	s := startRegion(t, "us-central1", table.TierShared)
	// One request per second; the clock stands still, and a call's 1 s
	// deadline leaves no time to wait for the next second's room.
	r := startRouterWith(t, func(o *server.Options) { o.RequestTimeout = time.Second }, poolOf(generous(), region(s, 1)))
	valid := `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`
	var ok, refused int
	for range 5 {
		resp, body := r.post(generatePath, valid, nil)
		switch resp.StatusCode {
		case http.StatusOK:
			ok++
		case http.StatusTooManyRequests:
			refused++
			if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || ra < 1 {
				t.Errorf("Retry-After %q, want whole seconds >= 1", resp.Header.Get("Retry-After"))
			}
			if _, _, st := googleErr(t, body); st != "RESOURCE_EXHAUSTED" {
				t.Errorf("status %s", st)
			}
		default:
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
	}
	if ok == 0 || refused == 0 || int64(ok) != s.calls.Load() {
		t.Errorf("%d answered, %d refused, region saw %d calls: want both answers and refusals, and no refused call sent on", ok, refused, s.calls.Load())
	}
	if got := counter(t, r.metrics, "regionwarden_router_shed_total", map[string]string{"reason": "over_capacity"}); got != float64(refused) {
		t.Errorf("shed_total over_capacity = %v, want %d", got, refused)
	}
}

// TestOverCapacityWaitsForHeadroom: a call that finds the quota full waits
// until it has room, when that leaves it time before its deadline, and is
// answered: five calls at a quota of one a second all succeed, the region
// sees one a second, and none is shed.
func TestOverCapacityWaitsForHeadroom(t *testing.T) {
	s := startRegion(t, "us-central1", table.TierShared)
	r := startRouter(t, poolOf(generous(), region(s, 1))) // 20 s deadlines; waiting moves the clock
	start := r.clock.Now()
	for i := range 5 {
		if resp, body := r.post(generatePath, `{"contents":[{"parts":[{"text":"hi"}]}]}`, nil); resp.StatusCode != http.StatusOK {
			t.Fatalf("call %d: %d %s", i+1, resp.StatusCode, body)
		}
		if got, atLeast := r.clock.Now().Sub(start), time.Duration(i)*time.Second; got < atLeast {
			t.Fatalf("call %d answered %v after the first, want at least %v at one a second", i+1, got, atLeast)
		}
	}
	if n := s.calls.Load(); n != 5 {
		t.Errorf("region saw %d calls, want 5", n)
	}
	if got := counter(t, r.metrics, "regionwarden_router_shed_total", map[string]string{"reason": "over_capacity"}); got != 0 {
		t.Errorf("shed_total over_capacity = %v, want 0", got)
	}
	if got := counter(t, r.metrics, "regionwarden_router_pool_headroom_waits_total", nil); got != 4 {
		t.Errorf("pool_headroom_waits_total = %v, want 4: each call after the first waited once", got)
	}
}

// TestUpstreamErrors: a caller fault is passed on and not retried; when every
// attempt fails the caller gets the last region's error.
func TestUpstreamErrors(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		code       int
		status     string
		otherCalls int64 // calls the second region gets
	}{
		{"caller fault is not retried", status.Error(codes.InvalidArgument, "Request contains an invalid argument."), 400, "INVALID_ARGUMENT", 0},
		{"failure is retried, then reported", status.Error(codes.Unavailable, "region down"), 503, "UNAVAILABLE", 1},
		{"429 is retried, then reported", status.Error(codes.ResourceExhausted, "quota"), 429, "RESOURCE_EXHAUSTED", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pt := startRegion(t, "europe-west1", table.TierProvisioned)
			other := startRegion(t, "us-central1", table.TierShared)
			for _, f := range []*fakeRegion{pt, other} {
				f.set(func(b *upstreamtest.Behavior) { b.Fault = func(int64) error { return tt.err } })
			}
			pol := generous()
			pol.Retry.MaxAttempts = 2
			r := startRouter(t, poolOf(pol, region(pt, 0), region(other, 0)))
			resp, body := r.post(generatePath, `{"contents":[{"parts":[{"text":"hi"}]}]}`, nil)
			code, msg, st := googleErr(t, body)
			if resp.StatusCode != tt.code || code != tt.code || st != tt.status || msg != status.Convert(tt.err).Message() {
				t.Errorf("answer %d %d %s %q, want %d %s %q", resp.StatusCode, code, st, msg, tt.code, tt.status, status.Convert(tt.err).Message())
			}
			if tt.code == 429 && resp.Header.Get("Retry-After") == "" {
				t.Error("429 without Retry-After")
			}
			if got := other.calls.Load(); got != tt.otherCalls {
				t.Errorf("second region got %d calls, want %d", got, tt.otherCalls)
			}
		})
	}
}
