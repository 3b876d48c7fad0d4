package replay

import (
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/regionwarden/regionwarden/internal/emulator"
)

// TestGenerateIsValidAndRepeatable: every generated scenario is valid, reads
// back from its YAML as it was written, is the same for the same seed and
// number whatever else was generated, and differs from its neighbors; and
// over a few hundred of them every kind of fault and PT the emulator has
// comes up.
func TestGenerateIsValidAndRepeatable(t *testing.T) {
	seen := map[string]int{}
	for seed := uint64(1); seed <= 3; seed++ {
		var prev *emulator.Scenario
		for i := 1; i <= 100; i++ {
			sc, err := Generate(seed, i)
			if err != nil {
				t.Fatal(err)
			}
			data, err := yaml.Marshal(sc)
			if err != nil {
				t.Fatal(err)
			}
			back, err := emulator.ParseScenario(data)
			if err != nil {
				t.Fatalf("%s does not read back: %v\n%s", sc.Name, err, data)
			}
			if !reflect.DeepEqual(back, sc) {
				t.Fatalf("%s reads back changed:\n%s", sc.Name, data)
			}
			again, _ := Generate(seed, i)
			if !reflect.DeepEqual(again, sc) {
				t.Fatalf("%s differs when generated again", sc.Name)
			}
			if prev != nil && reflect.DeepEqual(prev.Regions, sc.Regions) {
				t.Fatalf("%s has the regions of the scenario before it", sc.Name)
			}
			prev = sc
			count(sc, seen)
		}
	}
	t.Logf("what came up: %v", seen)
	for _, k := range []string{"spillover", "dedicated", "2 PTs", "4 quotas", "surge", "priorities",
		"errors", "clustered", "late errors", "slower", "ramp", "refused", "unavailable", "429", "no fault on a PT"} {
		if seen[k] == 0 {
			t.Errorf("no generated scenario has %s: %v", k, seen)
		}
	}
}

// count tallies the kinds of load, PT and fault a scenario has.
func count(sc *emulator.Scenario, seen map[string]int) {
	if len(sc.Load.Phases) > 0 {
		seen["surge"]++
	}
	if !sc.Load.Priorities.IsZero() {
		seen["priorities"]++
	}
	pts, quotas, ptFaulted := 0, 0, false
	for _, r := range sc.Regions {
		if r.Provisioned == nil {
			quotas++
		} else {
			pts++
			seen[string(r.Provisioned.Mode)]++
			ptFaulted = ptFaulted || len(r.Faults) > 0
		}
		for _, f := range r.Faults {
			switch kindOf(f) {
			case faultOutage:
				seen[string(f.Outage)]++
			case faultLateErrors:
				seen["late errors"]++
			case faultErrors:
				seen["errors"]++
				if f.BurstLength > 1 {
					seen["clustered"]++
				}
				if f.Code == 429 {
					seen["429"]++
				}
			case faultRamp:
				seen["ramp"]++
			case faultSlower:
				seen["slower"]++
			}
		}
	}
	if pts == 2 {
		seen["2 PTs"]++
	}
	if quotas == 4 {
		seen["4 quotas"]++
	}
	if !ptFaulted {
		seen["no fault on a PT"]++
	}
}
