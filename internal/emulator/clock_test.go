package emulator

import (
	"context"
	"testing"
	"time"
)

func TestScaledClock(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	c := NewScaledClock(30)
	c.now = func() time.Time { return now }
	if c.Elapsed() != 0 || c.Started() {
		t.Fatalf("a clock that was not started reads %s", c.Elapsed())
	}
	now = now.Add(time.Hour)
	c.Start()
	now = now.Add(2 * time.Second)
	if got := c.Elapsed(); got != time.Minute {
		t.Errorf("2s of real time at scale 30 reads %s, want 1m", got)
	}
	c.Start() // a second Start does not restart the clock
	now = now.Add(2 * time.Second)
	if got := c.Elapsed(); got != 2*time.Minute {
		t.Errorf("after a second Start the clock reads %s, want 2m", got)
	}
	if got := c.Real(30 * time.Minute); got != time.Minute {
		t.Errorf("30m of scenario time lasts %s of real time at scale 30, want 1m", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Sleep(ctx, time.Hour); err == nil {
		t.Errorf("Sleep on an ended context returned nil")
	}
}

func TestManualClock(t *testing.T) {
	c := NewManualClock()
	c.Advance(time.Minute)
	c.Set(30 * time.Second) // backwards: ignored
	if got := c.Elapsed(); got != time.Minute {
		t.Errorf("clock reads %s, want 1m", got)
	}
	_ = c.Sleep(context.Background(), 2*time.Second)
	_ = c.Sleep(context.Background(), 3*time.Second)
	if total, n := c.Slept(); total != 5*time.Second || n != 2 {
		t.Errorf("slept %s in %d sleeps, want 5s in 2", total, n)
	}
	if got := c.Elapsed(); got != time.Minute {
		t.Errorf("sleeping moved the clock to %s", got)
	}
}
