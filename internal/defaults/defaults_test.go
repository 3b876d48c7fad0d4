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
