package server

import (
	"context"
	"time"
)

// ScaledClock returns a clock that runs scale times faster than real time
// from now on: it reads start + (real elapsed) × scale. Scale 1 is time.Now
// shifted by nothing; values <= 0 mean 1. It exists for incident replays,
// which run a 30-minute scenario in about a minute.
func ScaledClock(scale float64) func() time.Time {
	if scale <= 0 || scale == 1 {
		return time.Now
	}
	start := time.Now()
	return func() time.Time {
		// time.Since reads the monotonic clock, so a wall-clock step does
		// not move the scaled clock.
		return start.Add(time.Duration(float64(time.Since(start)) * scale))
	}
}

// scaledSleep returns a sleep on a clock that runs scale times faster than
// real time (ScaledClock): it sleeps d of that clock, or until ctx is done,
// and then returns ctx's error.
func scaledSleep(scale float64) func(context.Context, time.Duration) error {
	if scale <= 0 {
		scale = 1
	}
	return func(ctx context.Context, d time.Duration) error {
		t := time.NewTimer(time.Duration(float64(d) / scale))
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
