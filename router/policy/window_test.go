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
	var w window
	at := func(t int64) uint64 { return bucketOf(t, sec) }
	for i := range int64(10) {
		w.add(at(t0+i*sec), 1, i)
	}
	for _, tc := range []struct {
		at    int64
		wantA int64
		wantB int64
	}{
		{t0 + 9*sec, 10, 45},
		{t0 + 10*sec, 9, 45}, // bucket 0 (b=0) left
		{t0 + 15*sec, 4, 6 + 7 + 8 + 9},
		{t0 + 19*sec, 0, 0},
		{t0 + 2_000*sec, 0, 0},
	} {
		a, b := w.sum(at(tc.at))
		if a != tc.wantA || b != tc.wantB {
			t.Errorf("sum at +%ds = (%d, %d), want (%d, %d)", (tc.at-t0)/sec, a, b, tc.wantA, tc.wantB)
		}
	}
	w.add(at(t0+20*sec), 2, 3) // lands on bucket 0's slot, stale since t0
	if a, b := w.sum(at(t0 + 20*sec)); a != 2 || b != 3 {
		t.Errorf("after reusing a stale bucket: (%d, %d), want (2, 3)", a, b)
	}
	w.reset()
	if a, b := w.sum(at(t0 + 20*sec)); a != 0 || b != 0 {
		t.Errorf("after reset: (%d, %d), want (0, 0)", a, b)
	}
}

// TestWindowSaturates checks that a bucket's counts stay within [0, countMax]
// instead of wrapping into the other count or the tag.
func TestWindowSaturates(t *testing.T) {
	var w window
	const idx = 1_700_000_000
	w.add(idx, countMax-1, 5)
	w.add(idx, 10, 0)
	if a, b := w.sum(idx); a != countMax || b != 5 {
		t.Errorf("sum = (%d, %d), want (%d, 5)", a, b, countMax)
	}
	w.add(idx, 0, -9)
	if a, b := w.sum(idx); a != countMax || b != 0 {
		t.Errorf("after taking 9 from 5: (%d, %d), want (%d, 0)", a, b, countMax)
	}
}

// TestWindowAddPast checks that a correction reaches a bucket only while the
// window still holds it and it has not been reused.
func TestWindowAddPast(t *testing.T) {
	var w window
	const idx = 1_700_000_000
	w.add(idx, 5, 5)
	w.addPast(idx, idx+windowBuckets-1, -2, 0)
	if a, _ := w.sum(idx + windowBuckets - 1); a != 3 {
		t.Errorf("correction within the window: a = %d, want 3", a)
	}
	w.addPast(idx, idx+windowBuckets, -1, 0) // leaving: the meters still read it
	w.addPast(idx, idx+windowSlots, -2, 0)   // left the window
	w.addPast(idx+1, idx+2, -1, 0)           // a bucket never written
	if a, b := bucket(&w, idx); a != 2 || b != 5 {
		t.Errorf("bucket after corrections in the leaving bucket and outside the window: (%d, %d), want (2, 5)", a, b)
	}
	if a, b := bucket(&w, idx+1); a != 0 || b != 0 {
		t.Errorf("a correction started a stale bucket: (%d, %d)", a, b)
	}
}

// bucket is the counts of bucket idx alone, as the window reads it.
func bucket(w *window, idx uint64) (a, b int64) {
	var v [windowSlots]uint64
	w.load(idx, 1, &v)
	return int64(v[0] >> countBits & countMax), int64(v[0] & countMax)
}
