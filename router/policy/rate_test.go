package policy

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestMeterNeverOverWindow offers calls at random times, from a little over
// to forty times over a capacity of 10 a second, and checks that no span of
// one second, wherever it starts, admitted more than 10 (a region counting
// on its own clock sees no more than its quota), while the meter admitted at
// least 95% of what an exact sliding log of every call would have on the
// same offers: its buckets cost at most that.
func TestMeterNeverOverWindow(t *testing.T) {
	const cost = rateCapacity / 10
	for _, gap := range []time.Duration{5 * time.Millisecond, 20 * time.Millisecond, 80 * time.Millisecond, 180 * time.Millisecond} {
		var m meter
		rnd := rand.New(rand.NewPCG(1, uint64(gap)))
		now := int64(1_700_000_000) * int64(time.Second)
		var admitted, log []int64
		for range 10000 {
			now += rnd.Int64N(int64(gap)) // offered at 2/gap a second
			if m.take(now, cost, meterWidth) {
				admitted = append(admitted, now)
			} else if wait := m.wait(now, cost, meterWidth); wait <= 0 || wait > rateWindow+meterWidth {
				t.Fatalf("refusal at %d with wait %v, want within (0, 1.1s]", now, time.Duration(wait))
			}
			if n := len(log); n < 10 || log[n-10] <= now-rateWindow {
				log = append(log, now)
			}
		}
		for i, j := 0, 0; i < len(admitted); i++ {
			for admitted[i]-admitted[j] >= rateWindow {
				j++
			}
			if n := i - j + 1; n > 10 {
				t.Fatalf("offers every %v on average: %d calls admitted within 1 s ending at %d, want at most 10", gap/2, n, admitted[i])
			}
		}
		if float64(len(admitted)) < 0.95*float64(len(log)) {
			t.Errorf("offers every %v on average: admitted %d, an exact sliding log %d; want at least 95%%", gap/2, len(admitted), len(log))
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
		if !m.take(t0, cost, meterWidth) {
			t.Fatalf("call %d of 4 at 4/s refused", i+1)
		}
	}
	// The four calls leave the window one second after the end of the
	// quarter of their bucket that holds them: 50 ms into the bucket that
	// begins at t0+970ms.
	ok, wait := m.take(t0+int64(300*time.Millisecond), cost, meterWidth), m.wait(t0+int64(300*time.Millisecond), cost, meterWidth)
	if want := 720 * time.Millisecond; ok || time.Duration(wait) != want {
		t.Fatalf("fifth call 0.3 s later: admitted %v, wait %v; want refused, wait %v (when the first calls' quarter bucket leaves the window)", ok, time.Duration(wait), want)
	}
	if m.take(t0+int64(300*time.Millisecond)+wait-int64(time.Millisecond), cost, meterWidth) {
		t.Fatal("admitted 1 ms before the wait ended")
	}
	if !m.take(t0+int64(300*time.Millisecond)+wait, cost, meterWidth) {
		t.Fatal("refused when the wait ended")
	}
	m.refund(t0+int64(300*time.Millisecond)+wait, t0+int64(300*time.Millisecond)+wait, cost, meterWidth)
	m.refund(t0, t0+int64(500*time.Millisecond), cost, meterWidth)
	if !m.take(t0+int64(500*time.Millisecond), cost, meterWidth) {
		t.Fatal("after a refund within the window: refused, want room for one")
	}
	// A refund of a charge the window no longer holds (its bucket has left,
	// the leaving part included) is ignored: it must not make room.
	t1 := t0 + rateWindow + meterWidth
	for range 4 {
		m.take(t1, cost, meterWidth)
	}
	m.refund(t0, t1, cost, meterWidth)
	if m.take(t1, cost, meterWidth) {
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
	if !m.take(now, 3*rateCapacity, meterWidth) {
		t.Fatal("a call of 3 s of capacity into an empty window: refused")
	}
	if m.take(now+int64(900*time.Millisecond), 1, meterWidth) {
		t.Fatal("a call 0.9 s later was admitted")
	}
	// It counts until one second after the end of the quarter of its
	// bucket that holds it.
	if m.take(now+rateWindow+meterWidth/callSlots-1, 1, meterWidth) {
		t.Fatal("a call 1 ns short of 1.025 s later was admitted")
	}
	if !m.take(now+rateWindow+meterWidth/callSlots, 1, meterWidth) {
		t.Fatal("a call 1.025 s later was refused")
	}
}

// TestMeterPacedUnderQuota paces calls evenly at 39 a second against a
// capacity of 40, at several phases against the buckets: none is refused, as
// a call is held at most a fortieth of a second past its window.
func TestMeterPacedUnderQuota(t *testing.T) {
	const cost = rateCapacity / 40
	for _, phase := range []time.Duration{0, 3 * time.Millisecond, 12500 * time.Microsecond, 24 * time.Millisecond} {
		var m meter
		now := int64(1_700_000_000)*int64(time.Second) + int64(phase)
		for i := range 2000 {
			now += int64(time.Second) / 39
			if !m.take(now, cost, meterWidth) {
				t.Fatalf("phase %v: call %d at 39/s refused", phase, i)
			}
		}
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
