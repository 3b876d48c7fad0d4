package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genai"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/regionwarden/regionwarden/internal/waittest"
	"github.com/regionwarden/regionwarden/router/policy"
	"github.com/regionwarden/regionwarden/router/table"
	"github.com/regionwarden/regionwarden/router/upstream"
	"github.com/regionwarden/regionwarden/router/upstream/upstreamtest"
)

// TestGenaiSDKThroughRouter calls the router with the official genai SDK, on
// both API versions, and checks that answers arrive intact, that the region
// saw its own model name and request type, and that the caller's token never
// reached it.
func TestGenaiSDKThroughRouter(t *testing.T) {
	pt, shared, r := ptAndShared(t)
	want := "projects/" + project + "/locations/europe-west1/publishers/google/models/" + model

	for _, version := range []string{"", "v1"} { // "": the SDK's default, v1beta1
		t.Run("version="+version, func(t *testing.T) {
			c := r.client(version)
			text, err := r.generate(c, "Which regions hold capacity?")
			if err != nil {
				t.Fatal(err)
			}
			if text != "europe-west1 answers: Which regions hold capacity?" {
				t.Errorf("text %q", text)
			}

			var got strings.Builder
			var last *genai.GenerateContentResponse
			for resp, err := range c.Models.GenerateContentStream(context.Background(), model, genai.Text("Stream it."), nil) {
				if err != nil {
					t.Fatal(err)
				}
				got.WriteString(resp.Text())
				last = resp
			}
			if got.String() != "[europe-west1 chunk 0][europe-west1 chunk 1][europe-west1 chunk 2]" {
				t.Errorf("streamed %q", got.String())
			}
			if last == nil || last.UsageMetadata == nil || last.UsageMetadata.TotalTokenCount != 12 ||
				last.UsageMetadata.TrafficType != genai.TrafficTypeProvisionedThroughput {
				t.Errorf("last chunk's usage %+v", last)
			}

			ct, err := c.Models.CountTokens(context.Background(), model, genai.Text("count me"), nil)
			if err != nil {
				t.Fatal(err)
			}
			if ct.TotalTokens != 42 {
				t.Errorf("countTokens %+v", ct)
			}
			comp, err := c.Models.ComputeTokens(context.Background(), model, genai.Text("count me"), nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(comp.TokensInfo) != 1 || string(comp.TokensInfo[0].Tokens[0]) != "europe-west1" {
				t.Errorf("computeTokens %+v", comp)
			}
		})
	}

	calls := pt.saw()
	if len(calls) != 8 {
		t.Fatalf("provisioned region saw %d calls, want 8: %+v", len(calls), calls)
	}
	for _, c := range calls {
		if c.model != want {
			t.Errorf("%s: model %q, want %q", c.method, c.model, want)
		}
		if c.requestType != "" {
			t.Errorf("%s: request type %q, want none (provisioned with spillover)", c.method, c.requestType)
		}
		for _, a := range c.auth {
			if strings.Contains(a, callerTok) {
				t.Errorf("%s: the caller's token reached the region: %q", c.method, a)
			}
		}
	}
	if n := shared.calls.Load(); n != 0 {
		t.Errorf("shared region saw %d calls while the provisioned one answered", n)
	}
	if got := counter(t, r.metrics, "regionwarden_router_traffic_type_total", map[string]string{"region": "europe-west1", "traffic_type": "PROVISIONED_THROUGHPUT"}); got != 4 {
		t.Errorf("traffic_type_total PROVISIONED_THROUGHPUT = %v, want 4 (2 unary, 2 streams)", got)
	}
}

// TestSharedRegionIsCalledShared checks the request type a shared region
// gets, and that the location in the path does not choose the region.
func TestSharedRegionIsCalledShared(t *testing.T) {
	shared := startRegion(t, "us-central1", table.TierShared)
	r := startRouter(t, poolOf(generous(), region(shared, 0)))
	text, err := r.generate(r.client("v1"), "hi")
	if err != nil {
		t.Fatal(err)
	}
	if text != "us-central1 answers: hi" {
		t.Errorf("text %q", text)
	}
	s := shared.saw()
	if len(s) != 1 || s[0].requestType != table.RequestTypeShared ||
		s[0].model != "projects/"+project+"/locations/us-central1/publishers/google/models/"+model {
		t.Errorf("region saw %+v", s)
	}
}

// TestStreamAsJSONArray reads a stream without ?alt=sse: one JSON array.
func TestStreamAsJSONArray(t *testing.T) {
	pt, r := onePT(t)
	resp, body := r.post("/v1/projects/"+project+"/locations/us-east4/publishers/google/models/"+model+":streamGenerateContent",
		`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, http.Header{"Authorization": {"Bearer " + callerTok}})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	var chunks []map[string]any
	if err := json.Unmarshal(body, &chunks); err != nil {
		t.Fatalf("not a JSON array: %v: %s", err, body)
	}
	if len(chunks) != streamChunks {
		t.Errorf("%d chunks, want %d: %s", len(chunks), streamChunks, body)
	}
	for _, c := range pt.saw() {
		if len(c.auth) > 0 {
			t.Errorf("authorization metadata reached the region: %q", c.auth)
		}
	}
}

// TestServerTimeoutTellsEachAttemptWhatIsLeft calls the router with the genai
// SDK and a timeout, which the SDK sends as X-Server-Timeout: the region of
// the first attempt is told the whole timeout, and the region of the retry,
// after a first attempt that took 1.2 s to fail, what is left of it, in
// whole seconds rounded up, as Google reads them.
func TestServerTimeoutTellsEachAttemptWhatIsLeft(t *testing.T) {
	pt, shared, r := ptAndShared(t)
	pt.set(func(b *upstreamtest.Behavior) {
		b.Fault = func(n int64) error {
			time.Sleep(1200 * time.Millisecond)
			return status.Error(codes.Unavailable, "backend went away")
		}
	})
	c := r.client("v1")
	timeout := 4 * time.Second
	resp, err := c.Models.GenerateContent(context.Background(), model, genai.Text("in time?"),
		&genai.GenerateContentConfig{HTTPOptions: &genai.HTTPOptions{Timeout: &timeout}})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Text(); got != "us-central1 answers: in time?" {
		t.Fatalf("answer %q, want the shared region's", got)
	}
	first, retry := pt.Seen(), shared.Seen()
	if len(first) != 1 || len(retry) != 1 {
		t.Fatalf("calls: provisioned %d, shared %d; want one each", len(first), len(retry))
	}
	// 4 s, less what the router took: just under 4, rounded up.
	if got := first[0].Header.Values(upstream.HeaderServerTimeout); len(got) != 1 || got[0] != "4" {
		t.Errorf("first attempt told %q, want [4]", got)
	}
	// About 2.8 s left after the 1.2 s attempt.
	if got := retry[0].Header.Values(upstream.HeaderServerTimeout); len(got) != 1 || got[0] != "3" {
		t.Errorf("retry told %q, want [3]", got)
	}
}

// TestCallersDeadlineIsNotTheRegionsFailure: an attempt a caller's own
// X-Server-Timeout cuts off sooner than the region answers (its slowest
// recent answer took 1 s) is the caller giving up, as for a gRPC caller:
// otherwise a caller, or a hostile tenant, sending impossibly short
// deadlines would fail every region it calls and eject or demote it for
// every other caller. An attempt the region held longer than that (it hangs)
// is the region's failure, whoever's deadline ended it.
func TestCallersDeadlineIsNotTheRegionsFailure(t *testing.T) {
	pt := startRegion(t, "europe-west1", table.TierProvisioned)
	hold := make(chan struct{})
	pt.set(func(b *upstreamtest.Behavior) { b.Hold = hold })
	r := startRouter(t, poolOf(generous(), region(pt, 0)))
	body := `{"contents":[{"parts":[{"text":"hi"}]}]}`
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = r.post(generatePath, body, nil)
	}()
	<-pt.Started
	r.clock.Advance(time.Second) // the region answers in 1 s
	close(hold)
	<-done

	pt.set(func(b *upstreamtest.Behavior) { b.Hold, b.Block = nil, true })
	for range 3 {
		resp, b := r.post(generatePath, body, http.Header{"X-Server-Timeout": {"0.1"}})
		if resp.StatusCode != http.StatusGatewayTimeout {
			t.Fatalf("status %d, want 504: %s", resp.StatusCode, b)
		}
	}
	if f, c := r.attempts("europe-west1", "provisioned", policy.Failure), r.attempts("europe-west1", "provisioned", policy.Cancelled); f != 0 || c < 3 { //nolint:misspell // the policy package's name
		t.Errorf("attempts cut off by the callers' deadlines sooner than the region answers: %v failed, %v cancelled; want none failed", f, c)
	}
	if snap := r.snapshotOf("europe-west1"); snap.FailureRate != 0 {
		t.Errorf("the region's failure rate is %v after callers' short deadlines ran out", snap.FailureRate)
	}

	// The region hangs: the attempt lasts 2 s on the router's clock before
	// the caller's deadline ends it.
	for len(pt.Started) > 0 {
		<-pt.Started
	}
	go func() {
		<-pt.Started
		r.clock.Advance(2 * time.Second)
	}()
	if resp, b := r.post(generatePath, body, http.Header{"X-Server-Timeout": {"0.5"}}); resp.StatusCode != http.StatusGatewayTimeout {
		t.Fatalf("status %d, want 504: %s", resp.StatusCode, b)
	}
	if f := r.attempts("europe-west1", "provisioned", policy.Failure); f != 1 {
		t.Errorf("an attempt the region held 2 s against its 1-s answers: %v failed, want 1", f)
	}
}

// TestRetryTooLateIsNotSent: once a region has answered minRequests calls,
// none sooner than in a second, the retry of a call given 2 s whose first
// attempt failed after 1.7 s is not sent there (it could not end in time):
// the caller gets the region's failure at once, and the region one call.
// A caller that gives half a second, less than the region has answered any
// call in, is still served: a first attempt is never left out (quick.go).
func TestRetryTooLateIsNotSent(t *testing.T) {
	pt := startRegion(t, "europe-west1", table.TierProvisioned)
	pol := generous()
	pol.Ejection.MinRequests = 5
	r := startRouter(t, poolOf(pol, region(pt, 0)))
	body := `{"contents":[{"parts":[{"text":"hi"}]}]}`
	hold := make(chan struct{})
	pt.set(func(b *upstreamtest.Behavior) { b.Hold = hold })
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() {
			if resp, b := r.post(generatePath, body, nil); resp.StatusCode != http.StatusOK {
				t.Errorf("status %d, want 200: %s", resp.StatusCode, b)
			}
		})
	}
	for range 5 {
		<-pt.Started
	}
	r.clock.Advance(time.Second) // each answers in 1 s
	close(hold)
	wg.Wait()

	hold = make(chan struct{})
	pt.set(func(b *upstreamtest.Behavior) {
		b.Hold = hold
		b.Fault = func(int64) error { return status.Error(codes.Unavailable, "region busy") }
	})
	go func() {
		<-pt.Started
		r.clock.Advance(1700 * time.Millisecond)
		close(hold)
	}()
	calls := pt.Calls()
	resp, b := r.post(generatePath, body, http.Header{"X-Server-Timeout": {"2"}})
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("status %d after a failure with 0.3 s left, want the region's 503: %s", resp.StatusCode, b)
	}
	if _, msg, _ := googleErr(t, b); !strings.Contains(msg, "region busy") {
		t.Errorf("answer %q, want the region's own failure", msg)
	}
	if n := pt.Calls() - calls; n != 1 {
		t.Errorf("the region was sent %d calls, want 1: a retry it could not answer in time went too", n)
	}
	if n := counter(t, r.metrics, "regionwarden_router_retries_refused_total", map[string]string{"pool": project + "/google/" + model, "reason": "too_late"}); n != 1 {
		t.Errorf("retries refused as too late: %v, want 1", n)
	}

	pt.set(func(b *upstreamtest.Behavior) { b.Hold, b.Fault = nil, nil })
	if resp, b := r.post(generatePath, body, http.Header{"X-Server-Timeout": {"0.5"}}); resp.StatusCode != http.StatusOK {
		t.Errorf("status %d with 0.5 s given, want 200: %s", resp.StatusCode, b)
	}
}

// TestServerTimeoutEndsTheCall sends X-Server-Timeout: 1 to a region that
// never answers: the router gives up when the caller's second is over, not
// at its own request timeout (20 s in these tests), and says the deadline
// passed.
func TestServerTimeoutEndsTheCall(t *testing.T) {
	pt, shared, r := ptAndShared(t)
	pt.set(func(b *upstreamtest.Behavior) { b.Block = true })
	shared.set(func(b *upstreamtest.Behavior) { b.Block = true })
	start := time.Now()
	resp, body := r.post("/v1/projects/"+project+"/locations/europe-west1/publishers/google/models/"+model+":generateContent",
		`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, http.Header{"X-Server-Timeout": {"1"}})
	took := time.Since(start)
	if resp.StatusCode != http.StatusGatewayTimeout {
		t.Fatalf("status %d, want 504: %s", resp.StatusCode, body)
	}
	if _, _, st := googleErr(t, body); st != "DEADLINE_EXCEEDED" {
		t.Errorf("status %q, want DEADLINE_EXCEEDED: %s", st, body)
	}
	if took > 10*time.Second {
		t.Errorf("answered after %v: the caller's 1 s was not the call's deadline", took)
	}
	select {
	case err := <-pt.Ended:
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			t.Errorf("region's call ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("the region's call did not end with the caller's deadline")
	}
}

// TestBadServerTimeoutIsRefused: a value that is not a positive number of
// seconds is answered 400, naming the header, and reaches no region; on the
// Vertex and the OpenAI-compatible surfaces alike.
func TestBadServerTimeoutIsRefused(t *testing.T) {
	pt, r := onePT(t)
	paths := map[string]string{
		"/v1/projects/" + project + "/locations/europe-west1/publishers/google/models/" + model + ":generateContent": `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`,
		"/v1/projects/" + project + "/locations/europe-west1/endpoints/openapi/chat/completions":                     `{"model":"google/` + model + `","messages":[{"role":"user","content":"hi"}]}`,
	}
	for path, body := range paths {
		for _, v := range []string{"soon", "0", "-3", "NaN", "Inf"} {
			resp, b := r.post(path, body, http.Header{"X-Server-Timeout": {v}})
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("%s with %q: status %d, want 400: %s", path, v, resp.StatusCode, b)
				continue
			}
			if _, msg, _ := googleErr(t, b); !strings.Contains(msg, "X-Server-Timeout") {
				t.Errorf("%s with %q: message %q does not name the header", path, v, msg)
			}
		}
	}
	if n := pt.calls.Load(); n != 0 {
		t.Errorf("region saw %d calls", n)
	}
	// A decimal number of seconds is a timeout.
	resp, b := r.post("/v1/projects/"+project+"/locations/europe-west1/publishers/google/models/"+model+":generateContent",
		`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, http.Header{"X-Server-Timeout": {" 2.5 "}})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if got := pt.Seen()[0].Header.Get(upstream.HeaderServerTimeout); got != "3" {
		t.Errorf("region told %q, want 3 (2.5 s rounded up)", got)
	}
}

// gaveUp is the outcome of an attempt whose caller went away.
const gaveUp = policy.Cancelled //nolint:misspell // the policy package's name

// streamText reads a whole stream through the SDK.
func streamText(c *genai.Client) (string, error) {
	var b strings.Builder
	for resp, err := range c.Models.GenerateContentStream(context.Background(), model, genai.Text("hi"), nil) {
		if err != nil {
			return b.String(), err
		}
		b.WriteString(resp.Text())
	}
	return b.String(), nil
}

// TestStreamRetriedBeforeFirstChunk: a stream that fails before any chunk
// reached the caller is retried in another region.
func TestStreamRetriedBeforeFirstChunk(t *testing.T) {
	pt := startRegion(t, "europe-west1", table.TierProvisioned)
	shared := startRegion(t, "us-central1", table.TierShared)
	pt.set(func(b *upstreamtest.Behavior) {
		b.Fault = func(int64) error { return status.Error(codes.Unavailable, "region down") }
	})
	r := startRouter(t, poolOf(generous(), region(pt, 0), region(shared, 0)))
	text, err := streamText(r.client(""))
	if err != nil {
		t.Fatal(err)
	}
	if text != "[us-central1 chunk 0][us-central1 chunk 1][us-central1 chunk 2]" {
		t.Errorf("streamed %q", text)
	}
	if pt.calls.Load() != 1 || shared.calls.Load() != 1 {
		t.Errorf("calls: provisioned %d, shared %d; want 1 each", pt.calls.Load(), shared.calls.Load())
	}
}

// TestStreamNotRetriedAfterFirstChunk: once a chunk reached the caller the
// answer is committed; a later failure ends the stream with an error the SDK
// reads, and is never retried.
func TestStreamNotRetriedAfterFirstChunk(t *testing.T) {
	pt := startRegion(t, "europe-west1", table.TierProvisioned)
	shared := startRegion(t, "us-central1", table.TierShared)
	pt.set(func(b *upstreamtest.Behavior) { b.FailAfterFirstChunk = true })
	r := startRouter(t, poolOf(generous(), region(pt, 0), region(shared, 0)))
	text, err := streamText(r.client(""))
	var apiErr genai.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != 503 || apiErr.Status != "UNAVAILABLE" {
		t.Fatalf("stream ended with %v, want a 503 UNAVAILABLE APIError", err)
	}
	if text != "[europe-west1 chunk 0]" {
		t.Errorf("streamed %q before the error", text)
	}
	if n := shared.calls.Load(); n != 0 {
		t.Errorf("a committed stream was retried: shared region got %d calls", n)
	}
	if got := r.attempts("europe-west1", "provisioned", policy.Failure); got != 1 {
		t.Errorf("attempts failure = %v, want 1", got)
	}
}

// TestCallerCancellationCancelsUpstream: when the caller gives up, the
// region's call is canceled, nothing is retried and the region is not blamed.
func TestCallerCancellationCancelsUpstream(t *testing.T) {
	for _, method := range []string{"generate", "stream"} {
		t.Run(method, func(t *testing.T) {
			pt := startRegion(t, "europe-west1", table.TierProvisioned)
			shared := startRegion(t, "us-central1", table.TierShared)
			pt.set(func(b *upstreamtest.Behavior) { b.Block = true })
			r := startRouter(t, poolOf(generous(), region(pt, 0), region(shared, 0)))
			c := r.client("")
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				if method == "generate" {
					_, err := c.Models.GenerateContent(ctx, model, genai.Text("hi"), nil)
					done <- err
					return
				}
				for _, err := range c.Models.GenerateContentStream(ctx, model, genai.Text("hi"), nil) {
					if err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
			<-pt.Started
			cancel()
			select {
			case err := <-pt.Ended:
				if !errors.Is(err, context.Canceled) {
					t.Errorf("region's call ended with %v, want canceled", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the region's call was not canceled")
			}
			if err := <-done; err == nil {
				t.Error("canceled call returned no error")
			}
			// The router reports the attempt after the region's call returns.
			waittest.For(t, 10*time.Second, "one attempt counted canceled", func() bool {
				return r.attempts("europe-west1", "provisioned", gaveUp) == 1
			})
			if n := shared.calls.Load(); n != 0 {
				t.Errorf("a canceled call was retried: shared region got %d calls", n)
			}
		})
	}
}

// TestCountingCallsThroughRouter: countTokens and computeTokens, called
// with the genai SDK, take nothing of a region's request quota (Google
// serves them under their own) and teach the policy nothing of how the
// region serves the model (policy.Request.Counting). At a quota of one call
// a second, with the router's clock standing still unless a call waits for
// room, ten counts and then a generation call are all answered at once,
// and the region's failure window holds the generation call alone.
func TestCountingCallsThroughRouter(t *testing.T) {
	s := startRegion(t, "us-central1", table.TierShared)
	r := startRouter(t, poolOf(generous(), region(s, 1))) // 20 s deadlines; waiting moves the clock
	c := r.client("")
	start := r.clock.Now()
	for i := range 5 {
		if _, err := c.Models.CountTokens(context.Background(), model, genai.Text("count me"), nil); err != nil {
			t.Fatalf("countTokens %d: %v", i+1, err)
		}
		if _, err := c.Models.ComputeTokens(context.Background(), model, genai.Text("count me"), nil); err != nil {
			t.Fatalf("computeTokens %d: %v", i+1, err)
		}
	}
	if _, err := r.generate(c, "after ten counts"); err != nil {
		t.Fatal(err)
	}
	if waited := r.clock.Now().Sub(start); waited != 0 {
		t.Errorf("ten counts and a generation call at one request a second waited %v for room, want none", waited)
	}
	if n := s.calls.Load(); n != 11 {
		t.Errorf("region saw %d calls, want 11", n)
	}
	if rs := r.snapshotOf("us-central1"); rs.Answered != 1 {
		t.Errorf("failure window: %d answered, want 1 (the generation call; counts are no evidence)", rs.Answered)
	}
	// The generation calls still meter: the next one waits for the next
	// second's room.
	if _, err := r.generate(c, "the second in its second"); err != nil {
		t.Fatal(err)
	}
	if waited := r.clock.Now().Sub(start); waited == 0 {
		t.Error("a second generation call in the second of a quota of one a second did not wait for room")
	}
}
