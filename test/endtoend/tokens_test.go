package endtoend

import (
	"maps"
	"testing"

	"github.com/regionwarden/regionwarden/internal/metricstest"
)

// TestTokensCountedByCapacity: the router counts every answer's tokens by
// pool, region, the capacity the attempt asked for (tier and pay-as-you-go
// tier), the traffic type Google reported and direction, through both SDKs;
// in each location and per traffic type, input and output together add up
// to what the emulated location says it served.
func TestTokensCountedByCapacity(t *testing.T) {
	e := start(t, globalPT)
	for _, c := range []struct{ sdk, priority string }{
		{"genai", ""}, {"openai", ""}, // the PT's two calls
		{"genai", "critical"}, {"openai-stream", "critical"}, // Priority PayGo
		{"openai", "sheddable"}, // Flex PayGo
		{"genai", ""},           // standard, on global or europe-west4
	} {
		var err error
		if c.sdk == "genai" {
			_, err = generate(t, e.genai(c.priority))
		} else {
			_, err = chat(t, e.openai(c.priority), c.sdk == "openai-stream")
		}
		if err != nil {
			t.Fatalf("%s %q: %v", c.sdk, c.priority, err)
		}
	}

	got := map[[6]string]float64{} // region, tier, pay_go_tier, traffic_type, direction, pool
	for _, s := range metricstest.Samples(t, e.metrics.Registry(), "regionwarden_router_tokens_total") {
		l := s.Labels
		got[[6]string{l["region"], l["tier"], l["pay_go_tier"], l["traffic_type"], l["direction"], l["pool"]}] += s.Value
	}
	const pool = project + "/google/" + model
	// The capacity each traffic type was asked of: the PT called dedicated
	// (no pay-as-you-go tier), else pay-as-you-go alone.
	asked := map[string][2]string{
		"PROVISIONED_THROUGHPUT": {"provisioned", "none"},
		"ON_DEMAND_PRIORITY":     {"shared", "priority"},
		"ON_DEMAND_FLEX":         {"shared", "flex"},
		"ON_DEMAND":              {"shared", "standard"},
	}
	served := map[string]map[string]float64{} // by region, traffic type
	for k, v := range got {
		if k[5] != pool {
			t.Errorf("tokens counted for pool %q, want %q", k[5], pool)
		}
		if want, ok := asked[k[3]]; !ok || k[1] != want[0] || k[2] != want[1] {
			t.Errorf("%s: tokens of %s counted as asked of tier %s, pay-as-you-go tier %s; want %v", k[0], k[3], k[1], k[2], want)
		}
		if served[k[0]] == nil {
			served[k[0]] = map[string]float64{}
		}
		served[k[0]][k[3]] += v
	}
	for _, traffic := range []string{"PROVISIONED_THROUGHPUT", "ON_DEMAND_PRIORITY", "ON_DEMAND_FLEX"} {
		for _, dir := range []string{"input", "output"} {
			k := [6]string{"global", asked[traffic][0], asked[traffic][1], traffic, dir, pool}
			if got[k] <= 0 {
				t.Errorf("no %s tokens counted for %s on global", dir, traffic)
			}
		}
	}
	for _, r := range e.emu.Stats().Regions {
		want := map[string]float64{}
		for k, v := range r.Tokens {
			want[k] = float64(v)
		}
		if !maps.Equal(served[r.Name], want) && len(want)+len(served[r.Name]) > 0 {
			t.Errorf("%s's tokens by traffic type: the router counted %v, the location served %v", r.Name, served[r.Name], want)
		}
	}
	if served["global"]["ON_DEMAND"]+served["europe-west4"]["ON_DEMAND"] <= 0 {
		t.Error("no standard pay-as-you-go tokens counted")
	}
}
