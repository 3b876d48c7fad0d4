package emulator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	aiplatform "cloud.google.com/go/aiplatform/apiv1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/regionwarden/regionwarden/internal/emulator"
)

// faultScenario has one region with ample capacity and one fault window from
// 1m to 2m.
func faultScenario(fault string) string {
	return scenarioHead + `
regions:
- name: europe-west1
  tier: shared
  capacity: {requestsPerSecond: 100000}
  latency: {distribution: fixed, p50: 100ms}
  faults:
  - {from: 1m, to: 2m, ` + fault + `}
`
}

// pattern makes n sequential calls and returns which failed, checking that
// every failure carries want.
func pattern(t *testing.T, c *aiplatform.PredictionClient, sc *emulator.Scenario, n int, want codes.Code) []bool {
	t.Helper()
	failed := make([]bool, n)
	for i := range failed {
		_, err := generate(t, c, sc, "europe-west1", "")
		if err != nil {
			if status.Code(err) != want {
				t.Fatalf("call %d: %v, want code %v", i, err, want)
			}
			failed[i] = true
		}
	}
	return failed
}

// runs returns the lengths of the maximal runs of failures.
func runs(failed []bool) []int {
	var out []int
	n := 0
	for _, f := range failed {
		if f {
			n++
			continue
		}
		if n > 0 {
			out = append(out, n)
		}
		n = 0
	}
	if n > 0 {
		out = append(out, n)
	}
	return out
}

func TestFaultWindowErrorRateAndBursts(t *testing.T) {
	const calls = 3000
	tests := []struct {
		rate  float64
		code  int
		burst int
		want  codes.Code
	}{
		{rate: 0.07, code: 504, burst: 6, want: codes.DeadlineExceeded},
		{rate: 0.2, code: 503, burst: 1, want: codes.Unavailable},
		{rate: 0.3, code: 429, burst: 3, want: codes.ResourceExhausted},
		{rate: 0.1, code: 500, burst: 10, want: codes.Internal},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d at %v in bursts of %d", tt.code, tt.rate, tt.burst), func(t *testing.T) {
			sc := mustParse(t, faultScenario(fmt.Sprintf("errorRate: %v, code: %d, burstLength: %d", tt.rate, tt.code, tt.burst)))
			e, clock := start(t, sc, 7)
			c := client(t, e, "europe-west1")

			clock.Set(30 * time.Second)
			if r := runs(pattern(t, c, sc, 200, tt.want)); len(r) != 0 {
				t.Fatalf("failures before the window: %v", r)
			}

			clock.Set(90 * time.Second)
			failed := pattern(t, c, sc, calls, tt.want)
			n := 0
			for _, f := range failed {
				if f {
					n++
				}
			}
			// The failures come in runs of burst calls, so they are about
			// calls*rate/burst independent events: allow four standard
			// deviations of that count.
			got := float64(n) / calls
			events := calls * tt.rate / float64(tt.burst)
			tol := 4 * math.Sqrt(events) * float64(tt.burst) / calls
			if math.Abs(got-tt.rate) > tol {
				t.Errorf("error rate %.4f, want %.4f within %.4f", got, tt.rate, tol)
			}
			// A run is one or more bursts back to back, so its length is a
			// multiple of the burst length (the last may be cut short).
			rs := runs(failed)
			for i, r := range rs[:len(rs)-1] {
				if r%tt.burst != 0 {
					t.Fatalf("run %d has %d failures, not a multiple of %d: %v", i, r, tt.burst, rs)
				}
			}
			if tt.burst > 1 && len(rs) > n/tt.burst {
				t.Errorf("%d failures in %d runs: not clustered in bursts of %d", n, len(rs), tt.burst)
			}

			clock.Set(150 * time.Second)
			if r := runs(pattern(t, c, sc, 200, tt.want)); len(r) != 0 {
				t.Fatalf("failures after the window: %v", r)
			}
		})
	}
}

func TestSameSeedSameFaultPattern(t *testing.T) {
	sc := mustParse(t, faultScenario("errorRate: 0.1, code: 504, burstLength: 6"))
	run := func(seed uint64) []bool {
		e, clock := start(t, sc, seed)
		clock.Set(90 * time.Second)
		return pattern(t, client(t, e, "europe-west1"), sc, 500, codes.DeadlineExceeded)
	}
	a, b, other := run(42), run(42), run(43)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("seed 42 gave two different patterns")
	}
	if fmt.Sprint(a) == fmt.Sprint(other) {
		t.Errorf("seeds 42 and 43 gave the same pattern")
	}
}

func TestAddedLatencyRamps(t *testing.T) {
	// The region's own latency is a fixed 100ms; the fault adds 1s at 1m,
	// growing to 3s at 2m: a region backing up.
	sc := mustParse(t, faultScenario("addedLatency: 1s, addedLatencyEnd: 3s"))
	e, clock := start(t, sc, 1)
	c := client(t, e, "europe-west1")
	tests := []struct {
		at   time.Duration
		want time.Duration
	}{
		{at: 30 * time.Second, want: 100 * time.Millisecond},
		{at: 60 * time.Second, want: 1100 * time.Millisecond},
		{at: 90 * time.Second, want: 2100 * time.Millisecond},
		{at: 150 * time.Second, want: 100 * time.Millisecond},
	}
	for _, tt := range tests {
		clock.Set(tt.at)
		before, _ := clock.Slept()
		if _, err := generate(t, c, sc, "europe-west1", ""); err != nil {
			t.Fatalf("at %s: %v", tt.at, err)
		}
		after, _ := clock.Slept()
		if got := after - before; got != tt.want {
			t.Errorf("at %s the call waited %s of scenario time, want %s", tt.at, got, tt.want)
		}
	}
}

func TestOutage(t *testing.T) {
	tests := []struct {
		outage  string
		outcome string
	}{
		{outage: "unavailable", outcome: "UNAVAILABLE"},
		{outage: "refused", outcome: "CONNECTION_REFUSED"},
	}
	for _, tt := range tests {
		t.Run(tt.outage, func(t *testing.T) {
			sc := mustParse(t, faultScenario("outage: "+tt.outage))
			e, clock := start(t, sc, 1)
			c := client(t, e, "europe-west1")
			if _, err := generate(t, c, sc, "europe-west1", ""); err != nil {
				t.Fatalf("before the outage: %v", err)
			}
			clock.Set(time.Minute)
			for i := range 3 {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, err := c.GenerateContent(ctx, request(sc, "europe-west1", "hello"))
				cancel()
				if status.Code(err) != codes.Unavailable {
					t.Fatalf("call %d in the outage: %v, want UNAVAILABLE", i, err)
				}
			}
			st := e.Stats().Regions[0]
			if st.ByCode[tt.outcome] == 0 {
				t.Errorf("counters %v record no %s", st.ByCode, tt.outcome)
			}
		})
	}
}

// TestFaultBreaksStreams: under a fault that breaks streams, a stream it
// fails gets its first chunk and then the fault's error: the stream's status
// over gRPC, the last server-sent event or the array's last element over
// REST, with the fault's code; a unary call fails before any answer, as
// under any error fault. The region counts each as failed.
func TestFaultBreaksStreams(t *testing.T) {
	sc := mustParse(t, faultScenario("errorRate: 1, code: 503, breaksStreams: true"))
	e, clock := start(t, sc, 1)
	clock.Set(time.Minute)
	c := client(t, e, "europe-west1")
	if _, err := generate(t, c, sc, "europe-west1", ""); status.Code(err) != codes.Unavailable {
		t.Fatalf("unary call: %v, want UNAVAILABLE", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := c.StreamGenerateContent(ctx, request(sc, "europe-west1", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	chunks := 0
	for {
		if _, err = st.Recv(); err != nil {
			break
		}
		chunks++
	}
	if chunks != 1 || status.Code(err) != codes.Unavailable {
		t.Errorf("gRPC stream: %d chunks, then %v; want one chunk, then UNAVAILABLE", chunks, err)
	}

	url := "http://" + regionAddr(t, e, "europe-west1").REST +
		"/v1/projects/demo-project/locations/europe-west1/publishers/google/models/gemini-2.5-flash-lite:streamGenerateContent"
	for _, tc := range []struct {
		name, query string
		split       func(string) []string
	}{
		{"sse", "?alt=sse", func(b string) []string { return strings.Split(strings.TrimSpace(b), "\r\n\r\n") }},
		{"json array", "", func(b string) []string {
			var raw []json.RawMessage
			if err := json.Unmarshal([]byte(b), &raw); err != nil {
				t.Fatalf("json array %q: %v", b, err)
			}
			var out []string
			for _, r := range raw {
				out = append(out, string(r))
			}
			return out
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := post(t, url+tc.query, "")
			body, _ := io.ReadAll(resp.Body)
			parts := tc.split(string(body))
			if resp.StatusCode != http.StatusOK || len(parts) != 2 {
				t.Fatalf("HTTP %d, %d parts in %q; want 200, a chunk and an error", resp.StatusCode, len(parts), body)
			}
			var ge googleError
			if err := json.Unmarshal([]byte(strings.TrimPrefix(parts[1], "data: ")), &ge); err != nil || ge.Error.Code != 503 || ge.Error.Status != "UNAVAILABLE" {
				t.Errorf("last part %q (%v), want Google's 503 UNAVAILABLE error", parts[1], err)
			}
			if !strings.Contains(parts[0], `"candidates"`) {
				t.Errorf("first part %q, want an answer's chunk", parts[0])
			}
		})
	}
	if got := e.Stats().Regions[0].ByCode["UNAVAILABLE"]; got != 4 {
		t.Errorf("the region counted %d UNAVAILABLE, want 4 (a unary call and three streams)", got)
	}
}

// TestRefusedCallsTakeNoCapacity: a call a 429 fault refuses takes none of
// the capacity that admitted it. A PT of two calls a second refuses five
// calls with the fault in the fault's last moment; the next moment, the
// fault over and the refused calls still in its one-second window, it
// admits its two. Charged for the refused calls, it answered them 429 as
// full.
func TestRefusedCallsTakeNoCapacity(t *testing.T) {
	sc := mustParse(t, scenarioHead+`
regions:
- name: europe-west1
  tier: provisioned
  provisioned: {gsus: 1, mode: dedicated, tokensPerSecond: 1000000, requestsPerSecond: 2, window: 1s}
  latency: {distribution: fixed, p50: 10ms}
  faults:
  - {from: 1m, to: 2m, errorRate: 1, code: 429}
`)
	e, clock := start(t, sc, 1)
	c := client(t, e, "europe-west1")
	ctx := metadata.AppendToOutgoingContext(t.Context(), "x-vertex-ai-llm-request-type", "dedicated")
	clock.Set(2*time.Minute - 200*time.Millisecond)
	for i := range 5 {
		if _, err := c.GenerateContent(ctx, request(sc, "europe-west1", "hello")); status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("call %d in the fault: %v, want RESOURCE_EXHAUSTED", i, err)
		}
	}
	clock.Set(2*time.Minute + 100*time.Millisecond)
	served, full := 0, 0
	for range 3 {
		_, err := c.GenerateContent(ctx, request(sc, "europe-west1", "hello"))
		switch {
		case err == nil:
			served++
		case status.Code(err) == codes.ResourceExhausted && strings.Contains(status.Convert(err).Message(), "Exceeded the Provisioned Throughput"):
			full++
		default:
			t.Fatalf("after the fault: %v", err)
		}
	}
	if served != 2 || full != 1 {
		t.Errorf("after the fault, 3 calls within the refused calls' window: %d served, %d refused as full; want 2 and 1", served, full)
	}
}
