package replay

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/regionwarden/regionwarden/internal/emulator"
	"github.com/regionwarden/regionwarden/router/table"
)

// Generated scenarios: failure shapes nobody wrote down.
//
// The scenarios in test/scenarios are incidents someone saw, each written
// with its lesson in mind. A rule tuned to them can be wrong everywhere else.
// Generate draws scenarios at random from a seed: a load (its rate, a surge,
// a priority mix, a deadline, a share of streamed calls), one or two PTs in
// either mode, one to four pay-as-you-go regions with latencies of their
// own, and faults on some of them, of each kind the emulator has: errors
// (every code, clustered or not, some breaking streams after their first
// chunk), added latency, latency that ramps up, outages, and errors that
// come late. The shares of the load the PTs and the quotas can carry are drawn
// too, from under the load to well over it, so the scenarios are sometimes
// over capacity with no fault at all.
//
// The report says, for each, what the regions can carry during its faults,
// beside what each policy served: a generated scenario has no target, only
// the gap between the two, and the baselines', to read. The same seed gives
// the same scenarios (and, replayed with it, the same load), so a shape one
// run finds can be replayed again after a change.

// GeneratedPrefix begins the name of every generated scenario.
const GeneratedPrefix = "generated-"

// generatedLocations are the regions a generated scenario draws from.
var generatedLocations = []string{"europe-west1", "europe-west4", "europe-north1", "europe-southwest1", "europe-west2", "europe-west3"}

// Generate returns scenario i (from 1) of seed: a five-minute scenario at
// scale 10, valid and defaulted, named generated-SEED-I. Each scenario has
// its own stream of draws, so scenario i is the same whatever the count
// asked for.
func Generate(seed uint64, i int) (*emulator.Scenario, error) { return GenerateAt(seed, i, 1) }

// GenerateAt is Generate with the calls per second of the scenario
// multiplied by rate: its load, its pay-as-you-go quotas and its PTs' tokens
// alike, so the capacity stays the same share of the load, from the same
// draws as Generate's. At a rate under 1 the pools are the small ones most
// rules are hardest for: a quota of one or two calls a second is full for a
// moment far more often than one of fifty, a region sent a call a second
// answers fewer than minRequests in an ejection interval, and a PT of a
// few GSUs is counted over a 40-s window. A quota keeps at least one call a
// second (in its one-second window, less admits none); a PT's GSUs follow
// its tokens, as an order that small would. A rate other than 1 adds
// "-x<rate>" to the name.
func GenerateAt(seed uint64, i int, rate float64) (*emulator.Scenario, error) {
	if !(rate > 0) || math.IsInf(rate, 0) {
		return nil, fmt.Errorf("generated scenario rate must be a positive number, got %v", rate)
	}
	g := generator{r: rand.New(rand.NewPCG(seed, uint64(i))), rate: rate}
	name := fmt.Sprintf("%s%d-%d", GeneratedPrefix, seed, i)
	if rate != 1 {
		name += fmt.Sprintf("-x%g", rate)
	}
	sc := g.scenario(name)
	sc.Default()
	if err := sc.Validate(); err != nil {
		return nil, fmt.Errorf("generated scenario %s: %w", sc.Name, err)
	}
	return sc, nil
}

// generator draws one scenario.
type generator struct {
	r    *rand.Rand
	rate float64 // multiplies the calls per second drawn (GenerateAt)
}

// between draws uniformly from [lo, hi).
func (g generator) between(lo, hi float64) float64 { return lo + g.r.Float64()*(hi-lo) }

// round keeps two decimals: the YAML stays readable.
func round(x float64) float64 { return math.Round(x*100) / 100 }

func seconds(s float64) emulator.Duration {
	return emulator.D(time.Duration(s * float64(time.Second)).Round(time.Millisecond))
}

func (g generator) scenario(name string) *emulator.Scenario {
	const duration = 300 // seconds
	rps := round(g.between(10, 60) * g.rate)
	deadline := []float64{3, 5, 8, 10, 15, 20}[g.r.IntN(6)]
	in, out := 200+g.r.IntN(800), 50+g.r.IntN(300)
	sc := &emulator.Scenario{
		Name:           name,
		Project:        "demo-project",
		Publisher:      emulator.DefaultPublisher,
		Model:          "gemini-3.6-flash",
		Duration:       emulator.D(duration * time.Second),
		TimeScale:      10,
		CapacityWindow: emulator.D(time.Second),
		Load: emulator.Load{
			RequestsPerSecond: rps,
			SessionCalls:      emulator.IntRange{Min: 50, Max: 100},
			Deadline:          seconds(deadline),
			InputTokens:       in,
			OutputTokens:      out,
		},
	}
	var what []string
	if g.r.IntN(2) == 0 {
		from := 30 + g.r.IntN(150)
		m := round(g.between(1.3, 3))
		sc.Load.Phases = []emulator.Phase{{From: seconds(float64(from)), To: seconds(float64(from + 10 + g.r.IntN(60))), Multiplier: m}}
		what = append(what, fmt.Sprintf("a surge of x%g", m))
	}
	if g.r.IntN(2) == 0 {
		sc.Load.Priorities = emulator.PriorityMix{Critical: round(g.between(0, 0.3)), Sheddable: round(g.between(0, 0.4))}
	}
	locations := append([]string(nil), generatedLocations...)
	g.r.Shuffle(len(locations), func(i, j int) { locations[i], locations[j] = locations[j], locations[i] })
	pts, quotas := 1+g.r.IntN(2), 1+g.r.IntN(4)
	ptShare := g.between(0.4, 1.3)  // of the load, over the PTs together
	payShare := g.between(0.2, 1.0) // of the load, over the quotas together
	tokens := float64(in + out)
	faulted := false
	for k := range pts + quotas {
		pt := k < pts
		r := emulator.Region{Name: locations[k], Tier: table.TierShared}
		// A quota admits at least one call in its one-second window.
		quota := emulator.Capacity{RequestsPerSecond: max(1, round(payShare/float64(quotas)*rps))}
		if pt {
			tps := math.Round(ptShare / float64(pts) * rps * tokens)
			r.Tier = table.TierProvisioned
			r.Provisioned = &emulator.Provisioned{
				GSUs:            int64(tps/2500) + 1,
				TokensPerSecond: tps,
				Mode:            []emulator.PTMode{emulator.ModeSpillover, emulator.ModeDedicated}[g.r.IntN(2)],
			}
			if g.r.IntN(2) == 0 {
				r.Capacity = quota
			}
		} else {
			r.Capacity = quota
		}
		p50 := g.between(0.3, 1.8)
		r.Latency = emulator.Latency{Distribution: emulator.Lognormal, P50: seconds(p50), P99: seconds(p50 * g.between(2, 6))}
		// At least one region has faults: the last one, if none before.
		if g.r.IntN(3) == 0 && (pt || faulted || g.r.IntN(2) == 0) || (k == pts+quotas-1 && !faulted) {
			faulted = true
			r.Faults = g.faults(deadline, duration)
			what = append(what, fmt.Sprintf("%s: %s", r.Name, describeFaults(r.Faults)))
		}
		sc.Regions = append(sc.Regions, r)
	}
	// Drawn last, so that a seed draws the regions and faults it drew
	// before the load had streams.
	if g.r.IntN(2) == 0 {
		sc.Load.StreamShare = round(g.between(0.2, 0.8))
		what = append(what, fmt.Sprintf("%.0f%% of calls streamed", 100*sc.Load.StreamShare))
		// A region's errors may break streams off after their first
		// chunk, where the call cannot be retried.
		for i := range sc.Regions {
			r := &sc.Regions[i]
			for j := range r.Faults {
				if f := &r.Faults[j]; f.ErrorRate > 0 && f.Code != 429 && g.r.IntN(2) == 0 {
					f.BreaksStreams = true
					what = append(what, fmt.Sprintf("%s's %.0f%% %d break streams after their first chunk", r.Name, 100*f.ErrorRate, f.Code))
				}
			}
		}
	}
	sc.Description = fmt.Sprintf("Generated: %d PT(s) for %.0f%% of the load, %d pay-as-you-go quota(s) for %.0f%%; %s.",
		pts, 100*ptShare, quotas, 100*payShare, strings.Join(what, "; "))
	return sc
}

// faults draws one to three faults in a row, each 15 to 105 s long, within
// the scenario.
func (g generator) faults(deadline float64, duration int) []emulator.Fault {
	var fs []emulator.Fault
	t := 30 + g.r.IntN(60)
	for n := 1 + g.r.IntN(3); len(fs) < n && t < duration-20; {
		end := min(t+15+g.r.IntN(90), duration-5)
		f := emulator.Fault{From: seconds(float64(t)), To: seconds(float64(end))}
		switch faultKind(g.r.IntN(faultKinds)) {
		case faultErrors: // any code, clustered or not
			f.ErrorRate = round(g.between(0.2, 1))
			f.Code = []int{500, 503, 504, 429}[g.r.IntN(4)]
			f.BurstLength = 1 + g.r.IntN(8)
		case faultSlower: // up to past the deadline
			f.AddedLatency = seconds(g.between(0, 1.2) * deadline)
		case faultRamp: // backing up: a ramp to around the deadline
			f.AddedLatencyEnd = seconds(g.between(0.5, 1.5) * deadline)
		case faultOutage:
			f.Outage = []emulator.Outage{emulator.OutageRefused, emulator.OutageUnavailable}[g.r.IntN(2)]
		case faultLateErrors:
			f.ErrorRate = round(g.between(0.2, 0.9))
			f.Code = 504
			f.AddedLatency = seconds(g.between(0.3, 0.9) * deadline)
		}
		fs = append(fs, f)
		t = end + g.r.IntN(40)
	}
	return fs
}

// faultKind is a kind of fault the generator draws.
type faultKind int

const (
	faultErrors     faultKind = iota // errors, any code, clustered or not
	faultSlower                      // added latency
	faultRamp                        // added latency that ramps up
	faultOutage                      // refused or unavailable
	faultLateErrors                  // 504s after added latency
	faultKinds      = iota
)

// kindOf is the kind of fault f.
func kindOf(f emulator.Fault) faultKind {
	switch {
	case f.Outage != "":
		return faultOutage
	case f.ErrorRate > 0 && f.AddedLatency.Duration > 0:
		return faultLateErrors
	case f.ErrorRate > 0:
		return faultErrors
	case f.AddedLatencyEnd.Duration > 0:
		return faultRamp
	}
	return faultSlower
}

// describeFaults says what faults are, for a scenario's description.
func describeFaults(fs []emulator.Fault) string {
	var parts []string
	for _, f := range fs {
		var s string
		switch kindOf(f) {
		case faultOutage:
			s = "outage (" + string(f.Outage) + ")"
		case faultLateErrors:
			s = fmt.Sprintf("%.0f%% %d after %s", 100*f.ErrorRate, f.Code, f.AddedLatency)
		case faultErrors:
			s = fmt.Sprintf("%.0f%% %d", 100*f.ErrorRate, f.Code)
		case faultRamp:
			s = "latency ramping to +" + f.AddedLatencyEnd.String()
		case faultSlower:
			s = "latency +" + f.AddedLatency.String()
		}
		parts = append(parts, fmt.Sprintf("%s from %s to %s", s, f.From, f.To))
	}
	return strings.Join(parts, ", ")
}
