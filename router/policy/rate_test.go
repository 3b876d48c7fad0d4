package policy

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestMeterNeverOverWindow offers calls at random times at a capacity of 10 a
// second and checks that no window of ten buckets (one second) admitted more
// than 10, while the meter admitted at least 9 in every second it was offered
// more than 10 (a window spans 0.9 to 1 s, so it can lose one to rounding).
func TestMeterNeverOverWindow(t *testing.T) {
	const cost = rateCapacity / 10
	var m meter
	rnd := rand.New(rand.NewPCG(1, 2))
	start := int64(1_700_000_000) * int64(time.Second)
	perBucket := map[int64]int{}
	offered := map[int64]int{}
	now := start
	for range 5000 {
		now += rnd.Int64N(int64(40 * time.Millisecond)) // about 50 calls a second
		offered[(now-start)/int64(time.Second)]++
		if ok, wait := m.take(now, cost, meterWidth); ok {
			perBucket[now/meterWidth]++
		} else if wait <= 0 || wait > rateWindow {
			t.Fatalf("refusal at %d with wait %v, want within (0, 1s]", now, time.Duration(wait))
		}
	}
	first, last := start/meterWidth, now/meterWidth
	for b := first; b+windowBuckets <= last; b++ {
		n := 0
		for k := range int64(windowBuckets) {
			n += perBucket[b+k]
		}
		if n > 10 {
			t.Fatalf("window of buckets %d..%d admitted %d calls at 10/s", b, b+windowBuckets-1, n)
		}
	}
	for sec := int64(0); sec < (now-start)/int64(time.Second); sec++ {
		n := 0
		b0 := (start + sec*int64(time.Second)) / meterWidth
		for k := range int64(windowBuckets) {
			n += perBucket[b0+k]
		}
		if offered[sec] > 10 && n < 9 {
			t.Errorf("second %d: offered %d, admitted %d, want at least 9", sec, offered[sec], n)
		}
	}
}

// TestMeterRefundAndWait checks the wait of a refusal and that a refund gives
// room back only while the window still holds what it refunds.
func TestMeterRefundAndWait(t *testing.T) {
	const cost = rateCapacity / 4
	var m meter
	t0 := int64(1_700_000_000)*int64(time.Second) + 30*int64(time.Millisecond)
	for i := range 4 {
		if ok, _ := m.take(t0, cost, meterWidth); !ok {
			t.Fatalf("call %d of 4 at 4/s refused", i+1)
		}
	}
	ok, wait := m.take(t0+int64(300*time.Millisecond), cost, meterWidth)
	if ok || time.Duration(wait) != 670*time.Millisecond {
		t.Fatalf("fifth call 0.3 s later: admitted %v, wait %v; want refused, wait 0.67s (when the first bucket leaves the window)", ok, time.Duration(wait))
	}
	m.refund(t0, t0+int64(500*time.Millisecond), cost, meterWidth)
	if ok, _ := m.take(t0+int64(500*time.Millisecond), cost, meterWidth); !ok {
		t.Fatal("after a refund within the window: refused, want room for one")
	}
	// A refund of a charge the window no longer holds is ignored: it must
	// not make room in the next second.
	t1 := t0 + int64(time.Second)
	for range 4 {
		m.take(t1, cost, meterWidth)
	}
	m.refund(t0, t1, cost, meterWidth)
	if ok, _ := m.take(t1, cost, meterWidth); ok {
		t.Fatal("a refund of an expired charge made room")
	}
	if got := m.sum(t1, meterWidth); got != 4*cost {
		t.Fatalf("sum %d after 4 calls, want %d", got, 4*cost)
	}
}

// TestMeterCostlyCall checks that a call costlier than the whole window is
// admitted into an empty window, and holds it for a second.
func TestMeterCostlyCall(t *testing.T) {
	var m meter
	now := int64(1_700_000_000) * int64(time.Second)
	if ok, _ := m.take(now, 3*rateCapacity, meterWidth); !ok {
		t.Fatal("a call of 3 s of capacity into an empty window: refused")
	}
	if ok, _ := m.take(now+int64(900*time.Millisecond), 1, meterWidth); ok {
		t.Fatal("a call 0.9 s later was admitted")
	}
	if ok, _ := m.take(now+rateWindow, 1, meterWidth); !ok {
		t.Fatal("a call 1 s later was refused")
	}
}

// TestPacer checks the pacing of a capacity under one call a second.
func TestPacer(t *testing.T) {
	var g pacer
	now := int64(1_700_000_000) * int64(time.Second)
	cost := int64(4 * time.Second)
	if ok, _ := g.take(now, cost); !ok {
		t.Fatal("first call refused")
	}
	if ok, wait := g.take(now+int64(time.Second), cost); ok || wait != int64(3*time.Second) {
		t.Fatalf("a call 1 s later: admitted %v, wait %v; want refused, 3s", ok, time.Duration(wait))
	}
	if ok, _ := g.take(now+cost, cost); !ok {
		t.Fatal("a call 4 s later was refused")
	}
}
