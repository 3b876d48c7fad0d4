package policy

import (
	"testing"
	"time"
)

// TestWindowSlides checks that counts leave the window once they are older
// than its span, bucket by bucket, and that stale buckets start afresh.
func TestWindowSlides(t *testing.T) {
	const sec = int64(time.Second)
	t0 := int64(1_700_000_000) * sec
	w := newWindow(10 * time.Second)
	for i := range int64(10) {
		w.add(t0+i*sec, 1, uint64(i))
	}
	for _, tc := range []struct {
		at    int64
		wantA uint64
		wantB uint64
	}{
		{t0 + 9*sec, 10, 45},
		{t0 + 10*sec, 9, 45}, // bucket 0 (b=0) left
		{t0 + 15*sec, 4, 6 + 7 + 8 + 9},
		{t0 + 19*sec, 0, 0},
		{t0 + 2_000*sec, 0, 0},
	} {
		a, b := w.sum(tc.at)
		if a != tc.wantA || b != tc.wantB {
			t.Errorf("sum at +%ds = (%d, %d), want (%d, %d)", (tc.at-t0)/sec, a, b, tc.wantA, tc.wantB)
		}
	}
	w.add(t0+20*sec, 2, 3) // lands on bucket 0's slot, stale since t0
	if a, b := w.sum(t0 + 20*sec); a != 2 || b != 3 {
		t.Errorf("after reusing a stale bucket: (%d, %d), want (2, 3)", a, b)
	}
	w.reset()
	if a, b := w.sum(t0 + 20*sec); a != 0 || b != 0 {
		t.Errorf("after reset: (%d, %d), want (0, 0)", a, b)
	}
}

// TestWindowSaturates checks that a bucket's counts stop at their maximum
// instead of wrapping into the other count or the tag.
func TestWindowSaturates(t *testing.T) {
	w := newWindow(10 * time.Second)
	now := int64(1_700_000_000) * int64(time.Second)
	w.add(now, countMax-1, 5)
	w.add(now, 10, 0)
	a, b := w.sum(now)
	if a != countMax || b != 5 {
		t.Errorf("sum = (%d, %d), want (%d, 5)", a, b, countMax)
	}
}
