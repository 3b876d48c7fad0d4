package defaults

import (
	"testing"
	"time"
)

func TestPositive(t *testing.T) {
	for _, tc := range []struct {
		in, want time.Duration
	}{
		{0, time.Second},
		{-time.Minute, time.Second},
		{time.Millisecond, time.Millisecond},
	} {
		v := tc.in
		Positive(&v, time.Second)
		if v != tc.want {
			t.Errorf("Positive(%v, 1s) = %v, want %v", tc.in, v, tc.want)
		}
	}
}

func TestZero(t *testing.T) {
	for _, tc := range []struct {
		in, want int
	}{
		{0, 7},
		{-1, -1},
		{3, 3},
	} {
		v := tc.in
		Zero(&v, 7)
		if v != tc.want {
			t.Errorf("Zero(%d, 7) = %d, want %d", tc.in, v, tc.want)
		}
	}
	s := ""
	Zero(&s, "prefix:")
	if s != "prefix:" {
		t.Errorf("Zero(\"\", %q) = %q", "prefix:", s)
	}
}
