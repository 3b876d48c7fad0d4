package emulator_test

import (
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/aiplatform/apiv1/aiplatformpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const (
	pt       = aiplatformpb.GenerateContentResponse_UsageMetadata_PROVISIONED_THROUGHPUT
	onDemand = aiplatformpb.GenerateContentResponse_UsageMetadata_ON_DEMAND
)

// served is what one call came back as: a traffic type, or an error code.
func TestCapacityByRequestType(t *testing.T) {
	// europe-west1 holds a PT of 5 calls/s and a pay-as-you-go quota of 3;
	// europe-west4 has a quota of 4. All calls land in the same second.
	tests := []struct {
		name        string
		mode        string
		region      string
		requestType string
		calls       int
		wantPT      int
		wantOnDem   int
		want429     int
		want429Msg  string
	}{
		{name: "shared region answers 429 beyond its quota", region: "europe-west4", calls: 7, wantOnDem: 4, want429: 3, want429Msg: "Resource exhausted"},
		{name: "shared header on a shared region", region: "europe-west4", requestType: "shared", calls: 6, wantOnDem: 4, want429: 2, want429Msg: "Resource exhausted"},
		{name: "dedicated PT answers 429 beyond the PT", region: "europe-west1", requestType: "dedicated", calls: 8, wantPT: 5, want429: 3, want429Msg: "Exceeded the Provisioned Throughput"},
		{name: "no header spills over as ON_DEMAND", region: "europe-west1", calls: 10, wantPT: 5, wantOnDem: 3, want429: 2, want429Msg: "Resource exhausted"},
		{name: "shared header skips the PT", region: "europe-west1", requestType: "shared", calls: 5, wantOnDem: 3, want429: 2, want429Msg: "Resource exhausted"},
		{name: "dedicated mode refuses the excess without a header", mode: "dedicated", region: "europe-west1", calls: 7, wantPT: 5, want429: 2, want429Msg: "Exceeded the Provisioned Throughput"},
		{name: "dedicated header on a region without PT", region: "europe-west4", requestType: "dedicated", calls: 2, want429: 2, want429Msg: "Exceeded the Provisioned Throughput"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			yaml := baseScenario
			if tt.mode != "" {
				yaml = strings.Replace(yaml, "mode: spillover", "mode: "+tt.mode, 1)
			}
			sc := mustParse(t, yaml)
			e, clock := start(t, sc, 1)
			clock.Set(90 * time.Second)
			c := client(t, e, tt.region)
			got := map[string]int{}
			for range tt.calls {
				resp, err := generate(t, c, sc, tt.region, tt.requestType)
				switch {
				case err == nil:
					got[resp.GetUsageMetadata().GetTrafficType().String()]++
					if resp.GetUsageMetadata().GetTotalTokenCount() <= resp.GetUsageMetadata().GetPromptTokenCount() {
						t.Errorf("usage %v: total tokens do not include the output", resp.GetUsageMetadata())
					}
				case status.Code(err) == codes.ResourceExhausted:
					got["429"]++
					if msg := status.Convert(err).Message(); !strings.Contains(msg, tt.want429Msg) {
						t.Errorf("429 message %q, want it to contain %q", msg, tt.want429Msg)
					}
				default:
					t.Fatalf("unexpected error: %v", err)
				}
			}
			want := map[string]int{}
			for k, v := range map[string]int{pt.String(): tt.wantPT, onDemand.String(): tt.wantOnDem, "429": tt.want429} {
				if v > 0 {
					want[k] = v
				}
			}
			if !equalCounts(got, want) {
				t.Errorf("served %v, want %v", got, want)
			}
		})
	}
}

func TestCapacityWindowSlides(t *testing.T) {
	sc, e, clock := startBase(t)
	c := client(t, e, "europe-west4")
	outcomes := func() (ok, throttled int) { return callsServed(t, c, sc, "europe-west4", "", 6) }
	if ok, thr := outcomes(); ok != 4 || thr != 2 {
		t.Fatalf("first second: %d served, %d throttled; want 4 and 2", ok, thr)
	}
	// Half a window later the calls of the first half still count.
	clock.Advance(500 * time.Millisecond)
	if ok, thr := outcomes(); ok != 0 || thr != 6 {
		t.Fatalf("half a window later: %d served, %d throttled; want 0 and 6", ok, thr)
	}
	// A full window later the quota is back.
	clock.Advance(600 * time.Millisecond)
	if ok, thr := outcomes(); ok != 4 || thr != 2 {
		t.Fatalf("a window later: %d served, %d throttled; want 4 and 2", ok, thr)
	}
}

func TestTokenCapacity(t *testing.T) {
	// Each call is one prompt token plus 100 output tokens; a quota of 350
	// tokens/s admits three.
	sc := mustParse(t, strings.Replace(baseScenario, "capacity: {requestsPerSecond: 4}", "capacity: {tokensPerSecond: 350}", 1))
	e, _ := start(t, sc, 1)
	c := client(t, e, "europe-west4")
	ok := 0
	for range 5 {
		ctx := t.Context()
		req := request(sc, "europe-west4", "hi")
		if _, err := c.GenerateContent(ctx, req); err == nil {
			ok++
		} else if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("unexpected error: %v", err)
		}
	}
	if ok != 3 {
		t.Errorf("served %d calls of 101 tokens under 350 tokens/s, want 3", ok)
	}
}

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestPTWindowOfItsSize: a PT that sets no window is enforced over its
// size's: a 2-GSU order over 40 s, so a burst takes 40 s of its capacity
// at once, and the PT is full until the burst leaves the window.
func TestPTWindowOfItsSize(t *testing.T) {
	sc := mustParse(t, strings.Replace(baseScenario, ", window: 1s}", "}", 1))
	if w := sc.Regions[0].Provisioned.EnforcedWindow(); w != 40*time.Second {
		t.Fatalf("a 2-GSU order's window is %s, want 40s", w)
	}
	e, clock := start(t, sc, 1)
	clock.Set(time.Minute)
	c := client(t, e, "europe-west1")
	burst := func() (served int) {
		served, _ = callsServed(t, c, sc, "europe-west1", "dedicated", 250)
		return served
	}
	// 5 calls a second over 40 s.
	if got := burst(); got != 200 {
		t.Fatalf("a burst onto an idle PT: %d served, want 200", got)
	}
	clock.Advance(20 * time.Second)
	if got := burst(); got != 0 {
		t.Fatalf("half a window later: %d served, want 0", got)
	}
	clock.Advance(21 * time.Second)
	if got := burst(); got != 200 {
		t.Fatalf("a window later: %d served, want 200", got)
	}
}
