package policy

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/regionwarden/regionwarden/internal/clocktest"
)

// quickPool is europe-west1, which answers in 100 ms, and europe-west4, in
// a second or more, each given 10 successes (minRequests) that took that
// long; both shared, without hints. within starts a call that must end
// within d and picks its first attempt.
func quickPool(t *testing.T) (p *Pool, clk *clocktest.Clock, within func(d time.Duration) (Attempt, error)) {
	t.Helper()
	clk = newClock()
	tp := pool(shared("europe-west1", 0), shared("europe-west4", 0))
	tp.Policy.Ejection.MinRequests = 10
	p = mustNew(t, tp, clk)
	within = func(d time.Duration) (Attempt, error) {
		c := p.Start(Request{Deadline: clk.Now().Add(d)})
		return c.Pick()
	}
	// Batches of calls in flight together, so that the successes fall
	// within one ejection interval.
	ok := map[string]int{}
	for range 10 {
		if ok["europe-west1"] >= 10 && ok["europe-west4"] >= 10 {
			return p, clk, within
		}
		var quick, slow []Attempt
		for range 20 {
			a, err := within(time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if a.Region == "europe-west1" {
				quick = append(quick, a)
			} else {
				slow = append(slow, a)
			}
		}
		clk.Advance(100 * time.Millisecond)
		for _, a := range quick {
			a.Done(Success)
		}
		clk.Advance(900 * time.Millisecond)
		for _, a := range slow {
			a.Done(Success)
		}
		ok["europe-west1"] += len(quick)
		ok["europe-west4"] += len(slow)
	}
	t.Fatalf("successes after 200 calls: %v, want 10 in each region", ok)
	return nil, nil, nil
}

// TestFirstAttemptIsNeverTooLate: the snapshot shows the median of each
// region's latest successes, and a first attempt goes anywhere whatever its
// deadline, shorter than a region's median or not: it has all the time its
// caller gave (quick.go), so no call is left out by answers that are not
// like its own. A counting call too.
func TestFirstAttemptIsNeverTooLate(t *testing.T) {
	p, clk, within := quickPool(t)
	b, err := json.Marshal(p.Snapshot().Regions)
	if err != nil {
		t.Fatal(err)
	}
	var median []struct{ MedianSuccess string }
	if err := json.Unmarshal(b, &median); err != nil {
		t.Fatal(err)
	}
	if len(median) != 2 || median[0].MedianSuccess != "100ms" || median[1].MedianSuccess != "1s" {
		t.Errorf("snapshot's medianSuccess %+v, want 100ms and 1s: %s", median, b)
	}
	for _, left := range []time.Duration{50 * time.Millisecond, 500 * time.Millisecond, 2 * time.Second} {
		got := map[string]int{}
		for range 40 {
			a, err := within(left)
			if err != nil {
				t.Fatalf("a call with %v left: %v", left, err)
			}
			got[a.Region]++
			a.Done(Cancelled)
		}
		if got["europe-west4"] == 0 || got["europe-west1"] == 0 {
			t.Errorf("first attempts of calls with %v left went %v, want some to each region", left, got)
		}
	}
	c := p.Start(Request{Deadline: clk.Now().Add(50 * time.Millisecond), Counting: true})
	if a, err := c.Pick(); err != nil {
		t.Errorf("a counting call with 50 ms left: %v, want an attempt", err)
	} else {
		a.Done(Cancelled)
	}
}

// TestRetryNotSentWhereItCannotEndInTime: the retry of a call whose first
// attempt failed slowly, with less time left than one region's median
// success, goes to the other region; with less than either's, the call ends
// with its failure (the retry refused with a deadline error). A region
// quicker than the whole time the caller gave is not judged: a call given
// 0.8 s retries in europe-west4, whose successes took 1 s, with
// 50 ms left.
func TestRetryNotSentWhereItCannotEndInTime(t *testing.T) {
	for _, tc := range []struct {
		given, left time.Duration
		want        string // "": refused
	}{
		{5 * time.Second, 500 * time.Millisecond, "europe-west1"},
		{5 * time.Second, 50 * time.Millisecond, ""},
		{800 * time.Millisecond, 50 * time.Millisecond, "europe-west4"},
	} {
		p, clk, _ := quickPool(t)
		var calls []*Call
		var firsts []Attempt
		for range 6 {
			c := p.Start(Request{Deadline: clk.Now().Add(tc.given)})
			a, err := c.Pick()
			if err != nil {
				t.Fatal(err)
			}
			calls, firsts = append(calls, &c), append(firsts, a)
		}
		clk.Advance(tc.given - tc.left)
		for i, c := range calls {
			firsts[i].Done(Failure)
			r, err := c.Pick()
			switch {
			case tc.want == "" && !errors.Is(err, ErrTooLate):
				t.Errorf("given %v, retry with %v left after %s: %q %v, want ErrTooLate", tc.given, tc.left, firsts[i].Region, r.Region, err)
			case tc.want != "" && (err != nil || r.Region != tc.want):
				t.Errorf("given %v, retry with %v left after %s: %q %v, want %s", tc.given, tc.left, firsts[i].Region, r.Region, err, tc.want)
			case err == nil:
				r.Done(Cancelled)
			}
		}
	}
}

// TestMedianIsRecentAndNeedsEvidence: a region is judged too slow only on
// minRequests successes over the ejection interval, by the median of its
// latest successes: before the tenth success and once two intervals pass
// with none, an attempt with little time left is not too late. One quick
// success among slower ones does not make an attempt with less time than
// most of them take likely to end in time (under the quickest success, the
// rule before, it was sent); once the quick ones are most of the latest,
// it is. The attempts are judged as a retry's, of a call given a minute (a
// first attempt never is: TestFirstAttemptIsNeverTooLate), by the region's
// own test, so that judging adds no attempt whose failure or budget would
// change what is measured.
func TestMedianIsRecentAndNeedsEvidence(t *testing.T) {
	clk := newClock()
	tp := pool(shared("europe-west1", 0))
	tp.Policy.Ejection.MinRequests = 10
	p := mustNew(t, tp, clk)
	tooLate := func(left time.Duration) bool {
		st := p.st.Load()
		return st.slots[0].r.tooSlowFor(int64(left), int64(time.Minute), p.nanos(), st)
	}
	succeed := func(took time.Duration) {
		c := p.Start(Request{})
		a, err := c.Pick()
		if err != nil {
			t.Fatal(err)
		}
		clk.Advance(took)
		a.Done(Success)
	}
	for i := range 9 {
		succeed(time.Second)
		if tooLate(500 * time.Millisecond) {
			t.Fatalf("after %d successes of 1 s, 0.5 s left is too late, want not (too little evidence)", i+1)
		}
	}
	succeed(time.Second)
	if !tooLate(500 * time.Millisecond) {
		t.Fatal("after 10 successes of 1 s, 0.5 s left is not too late")
	}
	succeed(400 * time.Millisecond)
	if !tooLate(500 * time.Millisecond) {
		t.Error("after 10 successes of 1 s and one of 0.4 s, 0.5 s left is not too late")
	}
	for range 10 {
		succeed(400 * time.Millisecond)
	}
	if tooLate(500 * time.Millisecond) {
		t.Error("after 11 successes of 0.4 s and 10 of 1 s, 0.5 s left is too late")
	}
	if !tooLate(300 * time.Millisecond) {
		t.Error("after 11 successes of 0.4 s and 10 of 1 s, 0.3 s left is not too late")
	}
	clk.Advance(20 * time.Second) // two ejection intervals
	if tooLate(300 * time.Millisecond) {
		t.Error("two intervals after the last success, 0.3 s left is too late")
	}
}

// TestUnlikeCallsAreJudgedAsOne pins down what the median rule cannot tell
// apart: a region serving one caller's calls of two kinds, short ones
// answered in 1 s and long ones in 10 s, the long ones more of them, has a
// median of 10 s, and the retry of a short call with 4 s left is left out,
// though a short call would end in time. Judged as any call of the region,
// it had 2 chances in 5 (the short ones' share); the quickest-success rule
// sent it. The router does not know a call's kind before it is answered
// (quick.go: what it may still get wrong).
func TestUnlikeCallsAreJudgedAsOne(t *testing.T) {
	clk := newClock()
	tp := pool(shared("europe-west1", 0))
	tp.Policy.Ejection.MinRequests = 10
	p := mustNew(t, tp, clk)
	took := func(d time.Duration, n int) {
		var as []Attempt
		for range n {
			c := p.Start(Request{})
			a, err := c.Pick()
			if err != nil {
				t.Fatal(err)
			}
			as = append(as, a)
		}
		clk.Advance(d)
		for _, a := range as {
			clk.Advance(time.Millisecond) // each ends at its own tick
			a.Done(Success)
		}
	}
	took(time.Second, 8)
	took(10*time.Second, 12)
	st := p.st.Load()
	if !st.slots[0].r.tooSlowFor(int64(4*time.Second), int64(time.Minute), p.nanos(), st) {
		t.Errorf("median %v: a retry with 4 s left is sent, want it left out (judged as any call of the region)", p.Snapshot().Regions[0].MedianSuccess.Duration)
	}
}

// TestNeighborLocksNoCallerOut: a region whose recent successes are all a
// neighbor's slow calls (30 s each, more than minRequests of them) is
// still sent the first attempts of a caller whose deadline is 2 s; once
// their quick successes are most of the latest they are the region's
// measure, and then a retry of that caller with too little time left for
// them is refused while one with enough is sent.
func TestNeighborLocksNoCallerOut(t *testing.T) {
	clk := newClock()
	tp := pool(shared("europe-west1", 0))
	tp.Policy.Ejection.MinRequests = 10
	p := mustNew(t, tp, clk)
	var slow []Attempt
	for range 20 {
		c := p.Start(Request{})
		a, err := c.Pick()
		if err != nil {
			t.Fatal(err)
		}
		slow = append(slow, a)
	}
	clk.Advance(30 * time.Second)
	for _, a := range slow {
		a.Done(Success)
	}
	if q := p.Snapshot().Regions[0].MedianSuccess.Duration; q != 30*time.Second {
		t.Fatalf("median success %v after the neighbor's calls, want 30s", q)
	}
	for i := range answerSamples {
		c := p.Start(Request{Deadline: clk.Now().Add(2 * time.Second)})
		a, err := c.Pick()
		if err != nil {
			t.Fatalf("first attempt %d of a call given 2 s: %v, want it sent", i+1, err)
		}
		clk.Advance(100 * time.Millisecond)
		a.Done(Success)
	}
	retry := func(left time.Duration) error {
		c := p.Start(Request{Deadline: clk.Now().Add(2 * time.Second)})
		a, err := c.Pick()
		if err != nil {
			t.Fatal(err)
		}
		clk.Advance(2*time.Second - left)
		a.Done(Failure)
		r, err := c.Pick()
		if err == nil {
			r.Done(Cancelled)
		}
		return err
	}
	if err := retry(500 * time.Millisecond); err != nil {
		t.Errorf("a retry with 0.5 s left where the caller's calls took 0.1 s: %v, want it sent", err)
	}
	if err := retry(50 * time.Millisecond); !errors.Is(err, ErrTooLate) {
		t.Errorf("a retry with 50 ms left where the caller's calls took 0.1 s: %v, want ErrTooLate", err)
	}
}
