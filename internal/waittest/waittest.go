// Package waittest is how tests wait for what happens asynchronously: a
// condition polled until it holds, the test failing once a bound passes with
// what it waited for. Every package's tests wait through it, over gomega's
// Eventually, so that one polling loop serves them all.
package waittest

import (
	"fmt"
	"testing"
	"time"

	"github.com/onsi/gomega"
)

// For polls cond until it holds, and fails t once within has passed, saying
// what it waited for: a string, or a func() string read at the failure.
func For(t testing.TB, within time.Duration, what any, cond func() bool) {
	t.Helper()
	gomega.NewWithT(t).Eventually(cond).WithTimeout(within).WithPolling(poll(within)).Should(gomega.BeTrue(), what)
}

// Until polls get until ok holds of its value, and returns that value; once
// within has passed it fails t, saying what it waited for and the last value
// get returned.
func Until[T any](t testing.TB, within time.Duration, what string, get func() T, ok func(T) bool) T {
	t.Helper()
	var last T
	For(t, within, func() string { return fmt.Sprintf("never %s; last: %+v", what, last) }, func() bool {
		last = get()
		return ok(last)
	})
	return last
}

// poll is how often a wait of within polls: every 5 ms, or a thousandth of
// within for a long wait, whose condition (an API server's answer) costs
// more to ask.
func poll(within time.Duration) time.Duration { return max(5*time.Millisecond, within/1000) }
