package server_test

import (
	"context"
	"testing"

	"google.golang.org/genai"

	"github.com/regionwarden/regionwarden/router/table"
)

// TestCountingCallsThroughRouter: countTokens and computeTokens, called
// with the genai SDK, take nothing of a region's request quota (Google
// serves them under their own) and teach the policy nothing of how the
// region serves the model (policy.Request.Counting). At a quota of one call
// a second, with the router's clock standing still unless a call waits for
// room, ten counts and then a generation call are all answered at once,
// and the region's failure window holds the generation call alone.
func TestCountingCallsThroughRouter(t *testing.T) {
	s := startRegion(t, "us-central1", table.TierShared)
	r := startRouter(t, poolOf(generous(), region(s, 1))) // 20 s deadlines; waiting moves the clock
	c := r.client("")
	start := r.clock.Now()
	for i := range 5 {
		if _, err := c.Models.CountTokens(context.Background(), model, genai.Text("count me"), nil); err != nil {
			t.Fatalf("countTokens %d: %v", i+1, err)
		}
		if _, err := c.Models.ComputeTokens(context.Background(), model, genai.Text("count me"), nil); err != nil {
			t.Fatalf("computeTokens %d: %v", i+1, err)
		}
	}
	if _, err := r.generate(c, "after ten counts"); err != nil {
		t.Fatal(err)
	}
	if waited := r.clock.Now().Sub(start); waited != 0 {
		t.Errorf("ten counts and a generation call at one request a second waited %v for room, want none", waited)
	}
	if n := s.calls.Load(); n != 11 {
		t.Errorf("region saw %d calls, want 11", n)
	}
	if rs := r.snapshotOf("us-central1"); rs.Answered != 1 {
		t.Errorf("failure window: %d answered, want 1 (the generation call; counts are no evidence)", rs.Answered)
	}
	// The generation calls still meter: the next one waits for the next
	// second's room.
	if _, err := r.generate(c, "the second in its second"); err != nil {
		t.Fatal(err)
	}
	if waited := r.clock.Now().Sub(start); waited == 0 {
		t.Error("a second generation call in the second of a quota of one a second did not wait for room")
	}
}
