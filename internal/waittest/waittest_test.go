package waittest

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// failures records what a wait reports instead of failing the test.
type failures struct {
	testing.TB
	msgs []string
}

func (f *failures) Helper() {}

func (f *failures) Fatalf(format string, args ...any) {
	f.msgs = append(f.msgs, fmt.Sprintf(format, args...))
}

// TestForWaitsThenFails: a condition that comes true within the bound ends
// the wait without a failure; one that never does fails it, with what was
// waited for.
func TestForWaitsThenFails(t *testing.T) {
	var n atomic.Int64
	f := &failures{TB: t}
	For(f, time.Second, "the third poll", func() bool { return n.Add(1) >= 3 })
	if len(f.msgs) != 0 || n.Load() != 3 {
		t.Errorf("a condition true at the third poll: %d polls, failures %q", n.Load(), f.msgs)
	}
	f = &failures{TB: t}
	For(f, 20*time.Millisecond, func() string { return "never true" }, func() bool { return false })
	if len(f.msgs) != 1 || !strings.Contains(f.msgs[0], "never true") {
		t.Errorf("a condition never true: failures %q, want one naming it", f.msgs)
	}
}

// TestUntilReturnsTheValue: Until returns the value that met the condition,
// and a failure says the last one.
func TestUntilReturnsTheValue(t *testing.T) {
	var n atomic.Int64
	f := &failures{TB: t}
	if got := Until(f, time.Second, "five", func() int64 { return n.Add(1) }, func(v int64) bool { return v == 5 }); got != 5 || len(f.msgs) != 0 {
		t.Errorf("Until = %d, failures %q; want 5 and none", got, f.msgs)
	}
	f = &failures{TB: t}
	Until(f, 20*time.Millisecond, "a negative count", func() int64 { return 7 }, func(v int64) bool { return v < 0 })
	if len(f.msgs) != 1 || !strings.Contains(f.msgs[0], "never a negative count; last: 7") {
		t.Errorf("failures %q, want one naming the wait and the last value", f.msgs)
	}
}
