package server

import "time"

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
