package emulator

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Clock tells scenario time. Scenario time is zero until the clock starts and
// never goes backwards.
type Clock interface {
	// Elapsed is the scenario time since the clock started.
	Elapsed() time.Duration
	// Sleep waits d of scenario time, or until ctx ends (returning its error).
	Sleep(ctx context.Context, d time.Duration) error
}

// ScaledClock runs scenario time at Scale times real time once started:
// scenario elapsed = real elapsed x scale, and a scenario sleep of d lasts
// d / scale of real time.
type ScaledClock struct {
	scale float64
	now   func() time.Time
	// start is the real start time in Unix nanoseconds; zero until Start.
	start atomic.Int64
}

// NewScaledClock returns a stopped clock running at scale (values <= 0 mean 1).
func NewScaledClock(scale float64) *ScaledClock {
	if scale <= 0 {
		scale = 1
	}
	return &ScaledClock{scale: scale, now: time.Now}
}

// Start starts the clock. Only the first call counts.
func (c *ScaledClock) Start() {
	c.start.CompareAndSwap(0, c.now().UnixNano())
}

// Started reports whether Start was called.
func (c *ScaledClock) Started() bool { return c.start.Load() != 0 }

// Scale is scenario seconds per real second.
func (c *ScaledClock) Scale() float64 { return c.scale }

// Elapsed is the scenario time since Start, zero before it.
func (c *ScaledClock) Elapsed() time.Duration {
	s := c.start.Load()
	if s == 0 {
		return 0
	}
	passed := c.now().UnixNano() - s
	if passed < 0 {
		return 0
	}
	return time.Duration(float64(passed) * c.scale)
}

// Real converts a scenario duration to real time.
func (c *ScaledClock) Real(d time.Duration) time.Duration {
	return time.Duration(float64(d) / c.scale)
}

// Sleep waits d / scale of real time.
func (c *ScaledClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(c.Real(d))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// ManualClock is a Clock that moves only when told; it is started from the
// beginning. Its Sleep does not wait: it adds d to the total that Slept
// reports, so tests see what latency a region applied without waiting for it.
type ManualClock struct {
	mu      sync.Mutex
	elapsed time.Duration
	slept   time.Duration
	sleeps  int64
}

// NewManualClock returns a clock at scenario time zero.
func NewManualClock() *ManualClock { return &ManualClock{} }

// Elapsed is the time the clock was set or advanced to.
func (c *ManualClock) Elapsed() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.elapsed
}

// Set moves the clock to t; a t before the current time is ignored.
func (c *ManualClock) Set(t time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t > c.elapsed {
		c.elapsed = t
	}
}

// Advance moves the clock forward by d.
func (c *ManualClock) Advance(d time.Duration) {
	if d <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.elapsed += d
}

// Sleep records d and returns at once, or returns ctx's error if it ended.
func (c *ManualClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d > 0 {
		c.mu.Lock()
		c.slept += d
		c.sleeps++
		c.mu.Unlock()
	}
	return nil
}

// Slept is the total scenario time that Sleep was asked to wait, and how many
// positive sleeps there were.
func (c *ManualClock) Slept() (total time.Duration, count int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.slept, c.sleeps
}
