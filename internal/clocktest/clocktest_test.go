package clocktest

import (
	"testing"
	"time"
)

// TestClockMovesOnlyWhenTold: the clock stands where it was put and moves by
// what Advance adds.
func TestClockMovesOnlyWhenTold(t *testing.T) {
	start := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	c := At(start)
	if got := c.Now(); !got.Equal(start) {
		t.Fatalf("Now() = %v, want %v", got, start)
	}
	c.Advance(1500 * time.Millisecond)
	if got, want := c.Now(), start.Add(1500*time.Millisecond); !got.Equal(want) {
		t.Fatalf("after Advance: %v, want %v", got, want)
	}
}
