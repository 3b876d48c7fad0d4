package emulator_test

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// tierScenario holds a PT on global, where Priority and Flex are offered
// with their own quotas, and a regional location offering standard alone.
const tierScenario = `
name: tiers
project: demo-project
model: gemini-3.6-flash
duration: 10m
load: {requestsPerSecond: 10}
regions:
- name: global
  tier: provisioned
  provisioned: {gsus: 1, tokensPerSecond: 100000, requestsPerSecond: 2, window: 1s}
  capacity: {requestsPerSecond: 1}
  priority: {requestsPerSecond: 3}
  flex: {requestsPerSecond: 2}
  latency: {distribution: fixed, p50: 10ms}
- name: europe-west4
  tier: shared
  capacity: {requestsPerSecond: 4}
  latency: {distribution: fixed, p50: 10ms}
`

// TestTiersHaveTheirOwnQuotas: each pay-as-you-go tier is its own quota and
// reports its own traffic type; a PT spills into the tier the call names;
// a tier a location does not offer is refused. The stats count each 429 by
// the capacity that was full, and a full PT's second by second too.
func TestTiersHaveTheirOwnQuotas(t *testing.T) {
	for _, tc := range []struct {
		name, region, requestType, tier string
		calls                           int
		want                            map[string]int
		full                            map[string]int64 // the stats' 429s by the capacity that was full
	}{
		{"priority alone", "global", "shared", "priority", 5, map[string]int{"ON_DEMAND_PRIORITY": 3, "429": 2}, map[string]int64{"priority": 2}},
		{"flex alone", "global", "shared", "flex", 4, map[string]int{"ON_DEMAND_FLEX": 2, "429": 2}, map[string]int64{"flex": 2}},
		{"standard alone", "global", "shared", "", 3, map[string]int{"ON_DEMAND": 1, "429": 2}, map[string]int64{"standard": 2}},
		{"PT spills into priority", "global", "", "priority", 6, map[string]int{"PROVISIONED_THROUGHPUT": 2, "ON_DEMAND_PRIORITY": 3, "429": 1}, map[string]int64{"priority": 1}},
		{"PT spills into standard", "global", "", "", 4, map[string]int{"PROVISIONED_THROUGHPUT": 2, "ON_DEMAND": 1, "429": 1}, map[string]int64{"standard": 1}},
		{"dedicated ignores the tier", "global", "dedicated", "priority", 3, map[string]int{"PROVISIONED_THROUGHPUT": 2, "429pt": 1}, map[string]int64{"provisioned": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := mustParse(t, tierScenario)
			e, clock := start(t, sc, 1)
			clock.Set(time.Minute)
			c := client(t, e, tc.region)
			got := map[string]int{}
			for range tc.calls {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				ctx = metadata.AppendToOutgoingContext(ctx, "x-vertex-ai-llm-request-type", tc.requestType, "x-vertex-ai-llm-shared-request-type", tc.tier)
				resp, err := c.GenerateContent(ctx, request(sc, tc.region, "hello"))
				cancel()
				switch {
				case err == nil:
					got[resp.GetUsageMetadata().GetTrafficType().String()]++
				case status.Code(err) == codes.ResourceExhausted && strings.Contains(status.Convert(err).Message(), "Exceeded the Provisioned Throughput"):
					got["429pt"]++
				case status.Code(err) == codes.ResourceExhausted:
					got["429"]++
				default:
					t.Fatalf("unexpected error: %v", err)
				}
			}
			if !equalCounts(got, tc.want) {
				t.Errorf("served %v, want %v", got, tc.want)
			}
			if full := e.Stats().Regions[0].Full; !maps.Equal(full, tc.full) {
				t.Errorf("stats count the 429s of full capacities as %v, want %v", full, tc.full)
			}
			// Second by second, the 429s of a full PT are told apart.
			var ptFull int64
			for _, s := range e.Stats().Regions[0].PerSecond {
				ptFull += s.PTFull
			}
			if ptFull != tc.full["provisioned"] {
				t.Errorf("the seconds count %d 429s of a full PT, want %d", ptFull, tc.full["provisioned"])
			}
		})
	}

	sc := mustParse(t, tierScenario)
	e, clock := start(t, sc, 1)
	clock.Set(time.Minute)
	ctx := metadata.AppendToOutgoingContext(t.Context(), "x-vertex-ai-llm-shared-request-type", "priority")
	_, err := client(t, e, "europe-west4").GenerateContent(ctx, request(sc, "europe-west4", "hello"))
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "not offered") {
		t.Errorf("priority at a regional location: %v, want INVALID_ARGUMENT, not offered", err)
	}
}
