// Package clocktest is the tests' wall clock: it stands still until the test
// moves it, so that a test of time-driven code (the routing policy, its
// baselines, the server's retries) moves time instead of sleeping.
package clocktest

import (
	"sync/atomic"
	"time"
)

// Clock is a clock that only tests move. Its zero value stands at the Unix
// epoch. It is safe for concurrent use: the code under test may read it from
// other goroutines while the test moves it.
type Clock struct{ ns atomic.Int64 }

// At returns a clock standing at t.
func At(t time.Time) *Clock {
	c := &Clock{}
	c.ns.Store(t.UnixNano())
	return c
}

// Now is the clock's time, in UTC.
func (c *Clock) Now() time.Time { return time.Unix(0, c.ns.Load()).UTC() }

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }
