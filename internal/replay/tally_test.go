package replay

import (
	"strings"
	"testing"
	"time"

	"github.com/regionwarden/regionwarden/internal/emulator"
	"github.com/regionwarden/regionwarden/router/policy"
)

// scripted is a Selection that answers Pick from a script: an attempt of a
// region, or an error.
type scripted struct {
	steps []any // string: a region; error: a refusal
	n     int
}

func (s *scripted) Pick() (Attempt, error) {
	step := s.steps[0]
	s.steps = s.steps[1:]
	if err, ok := step.(error); ok {
		return Attempt{}, err
	}
	s.n++
	return Attempt{Region: step.(string), Done: func(policy.Report) {}}, nil
}

func (s *scripted) Attempts() int { return s.n }

// TestTally: the diagnostics tell a call refused before any attempt from one
// refused a retry and one stopped by the budget, and count first attempts
// that failed by region, in the phase the call started in.
func TestTally(t *testing.T) {
	var lines []string
	sc := &emulator.Scenario{Regions: []emulator.Region{{Name: "pt", Faults: []emulator.Fault{{From: emulator.D(time.Minute), To: emulator.D(2 * time.Minute)}}}}}
	env := &Env{Scenario: sc, Clock: emulator.NewScaledClock(1), Logf: func(f string, _ ...any) {
		lines = append(lines, f)
	}}
	tl := newTally(env)
	capacity := &policy.CapacityError{Err: policy.ErrOverCapacity}
	for _, steps := range [][]any{
		{capacity},                        // refused at once
		{"pt", capacity},                  // the PT failed, the retry refused
		{"pt", policy.ErrBudgetExhausted}, // the PT failed, the budget spent
		{"w4"},                            // served
	} {
		c := &tallied{Selection: &scripted{steps: steps}, t: tl, c: tl.start(0)}
		for {
			a, err := c.Pick()
			if err != nil {
				break
			}
			out := policy.Failure
			if a.Region != "pt" {
				out = policy.Success
			}
			a.Done(policy.Report{Outcome: out})
			if out == policy.Success {
				break
			}
		}
	}
	got := *tl.c[tallyKey{0, 0}]
	if got.calls != 4 || got.served != 1 || got.refusedFirst != 1 || got.refusedRetry != 1 || got.stopped != 1 || got.firstFailedAtt["pt failure"] != 2 {
		t.Errorf("tally %+v, want 4 calls: 1 served, 1 refused at once, 1 refused a retry, 1 stopped, 2 PT first attempts failed", got)
	}
	tl.log("col", 2)
	if len(lines) != 1 || !strings.Contains(lines[0], "router %d %s") {
		t.Errorf("logged %q, want one line for the one router and phase with calls", lines)
	}
}
