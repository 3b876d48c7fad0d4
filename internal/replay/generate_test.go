package replay

import (
	"fmt"
	"math"
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

// TestGenerateAtRate: a scenario generated at a rate is the one Generate
// draws, its failure shapes the same, with its calls per second, its
// quotas and its PTs' tokens multiplied alike (a quota kept at one call a
// second at least), valid, and named for its rate.
func TestGenerateAtRate(t *testing.T) {
	near := func(got, want, tol float64) bool { return got >= want-tol && got <= want+tol }
	for seed := uint64(1); seed <= 2; seed++ {
		for i := 1; i <= 40; i++ {
			full, err := Generate(seed, i)
			if err != nil {
				t.Fatal(err)
			}
			for _, rate := range []float64{0.2, 2} {
				sc, err := GenerateAt(seed, i, rate)
				if err != nil {
					t.Fatal(err)
				}
				if want := fmt.Sprintf("%s-x%g", full.Name, rate); sc.Name != want {
					t.Fatalf("named %s, want %s", sc.Name, want)
				}
				// The load's rate is rounded to a hundredth after the product.
				if got, want := sc.Load.RequestsPerSecond, full.Load.RequestsPerSecond*rate; !near(got, want, 0.01+0.005*rate) {
					t.Fatalf("%s: %v calls a second, want about %v", sc.Name, got, want)
				}
				if len(sc.Regions) != len(full.Regions) {
					t.Fatalf("%s: %d regions, want %d", sc.Name, len(sc.Regions), len(full.Regions))
				}
				for k, r := range sc.Regions {
					f := full.Regions[k]
					if r.Name != f.Name || !reflect.DeepEqual(r.Faults, f.Faults) || r.Latency != f.Latency {
						t.Fatalf("%s: region %d is %s with faults %v, want %s with %v", sc.Name, k, r.Name, r.Faults, f.Name, f.Faults)
					}
					ratio := sc.Load.RequestsPerSecond / full.Load.RequestsPerSecond
					if q := r.Capacity.RequestsPerSecond; q > 0 && !near(q, max(1, f.Capacity.RequestsPerSecond*ratio), 0.02+0.01*q) {
						t.Fatalf("%s: %s's quota %v a second, want about %v", sc.Name, r.Name, q, max(1, f.Capacity.RequestsPerSecond*ratio))
					}
					if (r.Provisioned == nil) != (f.Provisioned == nil) {
						t.Fatalf("%s: %s provisioned %v, want %v", sc.Name, r.Name, r.Provisioned, f.Provisioned)
					}
					if r.Provisioned != nil && !near(r.Provisioned.TokensPerSecond, f.Provisioned.TokensPerSecond*ratio, 1+0.001*r.Provisioned.TokensPerSecond) {
						t.Fatalf("%s: %s's PT %v tokens a second, want about %v", sc.Name, r.Name, r.Provisioned.TokensPerSecond, f.Provisioned.TokensPerSecond*ratio)
					}
				}
			}
		}
	}
	for _, bad := range []float64{0, -1, math.Inf(1), math.NaN()} {
		if _, err := GenerateAt(1, 1, bad); err == nil {
			t.Errorf("rate %v: no error", bad)
		}
	}
}
