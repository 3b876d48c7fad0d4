package policy

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/regionwarden/regionwarden/router/table"
)

// TestCountingCallsTakeNoMeteredCapacity: a caller that counts each
// prompt's tokens before sending it gets all of a PT's throughput for its
// generation calls, and a request quota's every request, as one that does
// not count: Google serves the counting under a quota of its own.
func TestCountingCallsTakeNoMeteredCapacity(t *testing.T) {
	t.Run("tokens", func(t *testing.T) {
		clk := newClock()
		p := mustNew(t, pool(provisioned("europe-west4", table.Capacity{TokensPerSecond: 1000}), shared("europe-west1", 0)), clk)
		generated := map[string]int{}
		counted := map[string]int{}
		for range 100 {
			c := p.Start(Request{Counting: true})
			a, err := c.Pick()
			if err != nil {
				t.Fatalf("counting call: %v", err)
			}
			counted[a.Region]++
			a.Done(Success) // a count's answer reports no tokens consumed
			_, a = pick(t, p, PriorityDefault)
			generated[a.Region]++
			a.DoneTokens(Success, 100)
			clk.Advance(50 * time.Millisecond)
		}
		// 5 s at 1000 tokens/s: 10 calls of 100 tokens a second, about 50,
		// as TestTokenCapacity finds without the counting.
		if got := generated["europe-west4"]; math.Abs(float64(got)-50) > 2 {
			t.Errorf("the PT took %d generation calls of 100 tokens in 5 s at 1000 tokens/s beside 100 counts, want about 50 (%v)", got, generated)
		}
		if counted["europe-west4"] != 100 {
			t.Errorf("counting calls went to %v, want every one to the PT's region, which answers", counted)
		}
	})
	t.Run("requests", func(t *testing.T) {
		clk := newClock()
		p := mustNew(t, pool(shared("europe-west1", 5)), clk)
		for i := range 20 {
			c := p.Start(Request{Counting: true})
			if _, err := c.Pick(); err != nil {
				t.Fatalf("counting call %d at 5 requests/s: %v, want admitted", i, err)
			}
		}
		for i := range 5 {
			c := p.Start(Request{})
			if _, err := c.Pick(); err != nil {
				t.Fatalf("generation call %d of 5 at 5 requests/s after 20 counts: %v", i, err)
			}
		}
		c := p.Start(Request{})
		if _, err := c.Pick(); !errors.Is(err, ErrOverCapacity) {
			t.Errorf("sixth generation call in the second at 5 requests/s: %v, want ErrOverCapacity", err)
		}
	})
}

// TestCountingCallsAreNoEvidence: how a count went says nothing of how the
// region serves the model, either way.
func TestCountingCallsAreNoEvidence(t *testing.T) {
	// run sends 100 calls a second for 10 s, three counts to each
	// generation call, to two shared regions; serve says how a call on
	// europe-west4 goes (europe-west1 answers all). It returns the times
	// europe-west4 was ejected.
	run := func(t *testing.T, serve func(counting bool) Outcome) int64 {
		t.Helper()
		clk := newClock()
		p := mustNew(t, pool(shared("europe-west4", 0), shared("europe-west1", 0)), clk)
		for i := range 1000 {
			counting := i%4 != 0
			c := p.Start(Request{Counting: counting})
			a, err := c.Pick()
			if err != nil {
				t.Fatal(err)
			}
			o := Success
			if a.Region == "europe-west4" {
				o = serve(counting)
			}
			a.Done(o)
			clk.Advance(10 * time.Millisecond)
		}
		return regionOf(t, p, "europe-west4").TimesEjected
	}
	t.Run("counts answered where the model fails", func(t *testing.T) {
		// A quarter of its calls failing and three quarters answered
		// would keep it under the threshold of one half.
		if n := run(t, func(counting bool) Outcome {
			if counting {
				return Success
			}
			return Failure
		}); n == 0 {
			t.Error("a region failing every generation call was never ejected: its counts' answers hid the failures")
		}
	})
	t.Run("counts failing where the model answers", func(t *testing.T) {
		if n := run(t, func(counting bool) Outcome {
			if counting {
				return Failure
			}
			return Success
		}); n != 0 {
			t.Errorf("a region answering every generation call was ejected %d times for its counts' failures", n)
		}
	})
	t.Run("no probe of a demoted PT", func(t *testing.T) {
		clk := newClock()
		p := mustNew(t, pool(provisioned("europe-west4", table.Capacity{}), shared("europe-west1", 0)), clk)
		report(p, 0, Failure, 100)
		if regionOf(t, p, "europe-west4").Demotion == nil {
			t.Fatal("the PT was not demoted")
		}
		regions := map[string]int{}
		for range 1000 {
			c := p.Start(Request{Counting: true})
			a, err := c.Pick()
			if err != nil {
				t.Fatal(err)
			}
			regions[a.Region]++
			a.Done(Success)
			clk.Advance(10 * time.Millisecond)
		}
		if regions["europe-west4"] != 0 {
			t.Errorf("counting calls on a demoted PT while the shared region has room: %v, want none (no probes)", regions)
		}
		if regionOf(t, p, "europe-west4").Demotion == nil {
			t.Error("counts answered restored a demoted PT")
		}
	})
}
