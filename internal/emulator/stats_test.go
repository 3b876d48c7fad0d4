package emulator_test

import (
	"encoding/json"
	"testing"
	"time"
)

func TestStatsPeakAndTimeOverCapacity(t *testing.T) {
	// europe-west4 can take 4 calls/s. Send 10 calls in each of seconds 5, 6
	// and 7, 2 in second 8 and 10 in second 9.
	sc, e, clock := startBase(t)
	c := client(t, e, "europe-west4")
	perSecond := map[int]int{5: 10, 6: 10, 7: 10, 8: 2, 9: 10}
	for s := 5; s <= 9; s++ {
		clock.Set(time.Duration(s) * time.Second)
		for range perSecond[s] {
			_, _ = generate(t, c, sc, "europe-west4", "")
		}
	}
	var st struct {
		Regions []struct {
			Name                      string           `json:"name"`
			CapacityRequestsPerSecond float64          `json:"capacityRequestsPerSecond"`
			Requests                  int64            `json:"requests"`
			ByCode                    map[string]int64 `json:"byCode"`
			ByTrafficType             map[string]int64 `json:"byTrafficType"`
			PeakRequestsPerSecond     int64            `json:"peakRequestsPerSecond"`
			SecondsOverCapacity       int              `json:"secondsOverCapacity"`
			LongestOverCapacity       int              `json:"longestOverCapacity"`
			PerSecond                 []struct {
				Second    int   `json:"second"`
				Requests  int64 `json:"requests"`
				Served    int64 `json:"served"`
				Throttled int64 `json:"throttled"`
			} `json:"perSecond"`
		} `json:"regions"`
	}
	b, err := json.Marshal(e.Stats())
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	r := st.Regions[1]
	if r.Name != "europe-west4" || r.CapacityRequestsPerSecond != 4 {
		t.Fatalf("region %s capacity %v, want europe-west4 with 4/s", r.Name, r.CapacityRequestsPerSecond)
	}
	if r.Requests != 42 || r.PeakRequestsPerSecond != 10 || r.SecondsOverCapacity != 4 || r.LongestOverCapacity != 3 {
		t.Errorf("requests %d peak %d over %ds longest %ds; want 42, 10, 4s, 3s", r.Requests, r.PeakRequestsPerSecond, r.SecondsOverCapacity, r.LongestOverCapacity)
	}
	if r.ByCode["OK"]+r.ByCode["RESOURCE_EXHAUSTED"] != 42 || r.ByTrafficType["ON_DEMAND"] != r.ByCode["OK"] {
		t.Errorf("outcomes %v, traffic %v: do not add up to 42 calls", r.ByCode, r.ByTrafficType)
	}
	if len(r.PerSecond) != 10 || r.PerSecond[6].Requests != 10 || r.PerSecond[6].Served+r.PerSecond[6].Throttled != 10 {
		t.Errorf("histogram %+v", r.PerSecond)
	}
	if st.Regions[0].Requests != 0 {
		t.Errorf("europe-west1 saw %d calls, want 0", st.Regions[0].Requests)
	}
}
