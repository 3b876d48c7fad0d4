package share

import (
	"testing"
	"time"
)

func TestDemandRate(t *testing.T) {
	var d Demand
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	// 20 calls a second for twelve seconds.
	for i := range 240 {
		d.Add(t0 + int64(i)*int64(50*time.Millisecond))
	}
	now := t0 + int64(12*time.Second)
	if got := d.Rate(now); got < 19 || got > 21 {
		t.Errorf("rate = %v, want about 20", got)
	}
	if got := d.Rate(now + int64(DemandWindow)); got != 0 {
		t.Errorf("rate a window later = %v, want 0", got)
	}
}
