package policy

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/regionwarden/regionwarden/internal/clocktest"
	"github.com/regionwarden/regionwarden/router/table"
)

// silencePool is a provisioned region, europe-west1, with no capacity hint,
// and a shared one of 5 calls a second, judged on 10 calls, after the
// provisioned region answered a call in 1 s: its slowest answer. first
// starts a call and picks its first attempt.
func silencePool(t *testing.T) (*Pool, *clocktest.Clock, func() Attempt) {
	t.Helper()
	clk := newClock()
	tp := pool(provisioned("europe-west1", table.Capacity{}), shared("europe-west4", 5))
	tp.Policy.Ejection.MinRequests = 10
	p := mustNew(t, tp, clk)
	first := func() Attempt {
		t.Helper()
		_, a := pick(t, p, PriorityDefault)
		return a
	}
	a := first()
	clk.Advance(time.Second)
	a.Done(Success)
	return p, clk, first
}

// TestSilentRegionRanksLast: a provisioned region whose last answer took
// 1 s stops answering. Calls still go to it while it has answered within
// 1 s; once nothing has come back for longer, with minRequests attempts in
// flight, calls go first to the shared region, which has room, and the
// silent one takes what the shared one cannot. A timeout is not an answer;
// the first bytes of any answer end the silence.
func TestSilentRegionRanksLast(t *testing.T) {
	p, clk, first := silencePool(t)

	var hung []Attempt
	for i := range 10 {
		a := first()
		if a.Region != "europe-west1" {
			t.Fatalf("attempt %d since the last answer went to %s, want the provisioned region", i+1, a.Region)
		}
		hung = append(hung, a)
		clk.Advance(50 * time.Millisecond)
	}
	// 0.5 s after the first unanswered attempt: not late by its 1 s.
	if a := first(); a.Region != "europe-west1" {
		t.Errorf("0.5 s into the silence a call went to %s, want the provisioned region", a.Region)
	}
	clk.Advance(600 * time.Millisecond)
	if rs := p.Snapshot().Regions[0]; !rs.Silent || rs.InFlight != 11 {
		t.Fatalf("1.1 s after 11 unanswered attempts: %+v, want silent", rs)
	}
	got := map[string]int{}
	for range 8 {
		a := first()
		got[a.Region]++
	}
	if got["europe-west4"] != 5 || got["europe-west1"] != 3 {
		t.Errorf("calls while silent %v, want 5 on the shared region (its quota) and the rest on the silent one", got)
	}
	hung[0].Finish(Report{Outcome: Failure, Timeout: true})
	if rs := p.Snapshot().Regions[0]; !rs.Silent {
		t.Errorf("a timeout ended the silence: %+v", rs)
	}
	hung[1].Heard() // a stream's first bytes
	if rs := p.Snapshot().Regions[0]; rs.Silent {
		t.Errorf("the first bytes of an answer did not end the silence: %+v", rs)
	}
	if a := first(); a.Region != "europe-west1" {
		t.Errorf("after an answer a call went to %s, want the provisioned region", a.Region)
	}
}

// TestFlowingStreamsAreNotSilent: streams whose chunks keep arriving
// (Attempt.Heard on each) are the region answering, however long they
// last; once their chunks stop for longer than the slowest answer, the
// region is silent.
func TestFlowingStreamsAreNotSilent(t *testing.T) {
	p, clk, first := silencePool(t)
	var streams []Attempt
	for range 10 {
		a := first()
		clk.Advance(100 * time.Millisecond)
		a.Heard() // its first chunk, 0.1 s in
		streams = append(streams, a)
	}
	for i := range 20 {
		clk.Advance(500 * time.Millisecond)
		streams[i%len(streams)].Heard()
		if rs := p.Snapshot().Regions[0]; rs.Silent {
			t.Fatalf("%.1f s into streams whose chunks arrive every 0.5 s: %+v, want not silent", float64(i+1)/2, rs)
		}
	}
	clk.Advance(1100 * time.Millisecond)
	if rs := p.Snapshot().Regions[0]; !rs.Silent {
		t.Errorf("1.1 s after the streams' last chunk: %+v, want silent", rs)
	}
	if a := first(); a.Region != "europe-west4" {
		t.Errorf("a call to a region whose streams stalled went to %s, want the shared region", a.Region)
	}
}

// TestQuietRegionThatHangsIsSeen: a pool of one call a second, judged on
// the default 20 answers, whose provisioned region answers in 0.6 s and then
// hangs. It never holds 20 calls (ten a deadline of 10 s), so minRequests in
// flight would leave it first for ever, each call waiting out its deadline.
// It holds as many calls as it answered over the interval after about five
// seconds, and from then calls go to the shared region. Before the hang it
// is never silent.
func TestQuietRegionThatHangsIsSeen(t *testing.T) {
	clk := newClock()
	p := mustNew(t, pool(provisioned("europe-west1", table.Capacity{}), shared("europe-west4", 5)), clk)
	for i := range 30 {
		_, a := pick(t, p, PriorityDefault)
		if a.Region != "europe-west1" {
			t.Fatalf("call %d before the hang went to %s, want the provisioned region", i+1, a.Region)
		}
		clk.Advance(600 * time.Millisecond)
		if rs := p.Snapshot().Regions[0]; rs.Silent {
			t.Fatalf("call %d before the hang: %+v, want not silent", i+1, rs)
		}
		a.Done(Success)
		clk.Advance(400 * time.Millisecond)
	}
	hung := 0
	for i := range 15 {
		_, a := pick(t, p, PriorityDefault)
		if a.Region == "europe-west1" {
			if hung < i {
				t.Fatalf("call %d of the hang went to the provisioned region after one went elsewhere", i+1)
			}
			hung++
		}
		clk.Advance(time.Second)
	}
	if hung > 6 {
		t.Errorf("the hung region held %d calls before calls went elsewhere, want at most 6", hung)
	}
	if hung == 15 {
		t.Errorf("every call of 15 s went to the hung region")
	}
}

// TestSilentDemotedRegionGetsNoProbe: a demoted provisioned region that
// then hangs on its probes gets no further probe once it is silent (two
// unanswered); its next answer ends the silence, and the probes go again.
func TestSilentDemotedRegionGetsNoProbe(t *testing.T) {
	p, clk, first := silencePool(t)
	for range 20 {
		a := first()
		if a.Region != "europe-west1" {
			break
		}
		clk.Advance(10 * time.Millisecond)
		a.Done(Failure) // a fast 503
	}
	if p.Snapshot().Regions[0].Demotion == nil {
		t.Fatal("not demoted after its calls failed")
	}
	every := time.Duration(p.st.Load().probeEvery)
	var probe Attempt
	for i := range 2 {
		probeWait(p, clk)
		if probe = first(); probe.Region != "europe-west1" {
			t.Fatalf("due probe %d went to %s", i+1, probe.Region)
		}
	}
	clk.Advance(max(every, 1100*time.Millisecond)) // the next probe is due; nothing has come back for longer than 1 s
	startCalls(p, p.st.Load().probeCalls)
	if rs := p.Snapshot().Regions[0]; !rs.Silent {
		t.Fatalf("%+v, want silent", rs)
	}
	if a := first(); a.Region != "europe-west4" {
		t.Errorf("a call went to %s while the demoted region is silent, want the shared region", a.Region)
	}
	probe.Done(Failure) // it answers, with an error
	if a := first(); a.Region != "europe-west1" {
		t.Errorf("after the region answered, a due probe went to %s, want the provisioned region", a.Region)
	}
}

// TestOneQuietCallIsNoSilence: a region that answered once in the interval
// and now holds one call that has said nothing for five times its slowest
// answer (a stream whose model thinks that long) is not silent: one call is
// no evidence of a region. A second is.
func TestOneQuietCallIsNoSilence(t *testing.T) {
	p, clk, first := silencePool(t)
	first()
	clk.Advance(5 * time.Second)
	if rs := p.Snapshot().Regions[0]; rs.Silent {
		t.Fatalf("one call quiet for 5 s: %+v, want not silent", rs)
	}
	first()
	clk.Advance(1100 * time.Millisecond)
	if rs := p.Snapshot().Regions[0]; !rs.Silent {
		t.Errorf("two calls quiet for longer than the slowest answer: %+v, want silent", rs)
	}
}

// TestStragglersDoNotHideAHang: a region whose slowest answer took 1 s
// hangs at 0.5 s, taking a call every 50 ms, while calls picked before
// are still answering, each 0.95 s after its pick: those stragglers come
// back until 1.4 s, so nothing has been quiet for longer than 1 s until
// 2.4 s. But no call picked since has answered, and the first call picked
// after a straggler came back (at 1 s) is later than any answer the region
// gives by 2 s: calls go to the shared region from then, not before the
// first hung call (0.5 s) is 1 s old.
func TestStragglersDoNotHideAHang(t *testing.T) {
	_, clk, first := silencePool(t)
	const step = 50 * time.Millisecond
	var stragglers []Attempt
	answered := 0
	for at := time.Duration(0); at < 3*time.Second; at += step {
		// Straggler j, picked at j×50 ms, answers at j×50 ms + 0.95 s.
		for answered < len(stragglers) && time.Duration(answered)*step+950*time.Millisecond <= at {
			stragglers[answered].Done(Success)
			answered++
		}
		a := first()
		switch {
		case a.Region == "europe-west4":
			if at < 1500*time.Millisecond || at > 2*time.Second {
				t.Errorf("the first call to the shared region went at %s, want between 1.5 s and 2 s", at)
			}
			return
		case at < 500*time.Millisecond:
			stragglers = append(stragglers, a)
		}
		clk.Advance(step)
	}
	t.Fatal("every call of 3 s went to the region that hangs")
}

// TestRefusalsDoNotHideAHang: a region that hangs every call it lets in
// while it answers 429 to others (a PT full for some of them, its
// pay-as-you-go out of room), or 400 to a caller's bad requests, is silent
// as soon as one that refuses nothing would be. A refusal comes back at the
// door, before the model runs: it says nothing of the calls the region
// holds. Counted as an answer, each one moved the marks, and the region
// kept its first attempts, every one of them waiting out its deadline; a
// tenant sending bad requests kept a hung region first for every other.
func TestRefusalsDoNotHideAHang(t *testing.T) {
	for _, o := range []Outcome{Capacity, ProvisionedFull, CallerFault} {
		t.Run(o.String(), func(t *testing.T) {
			p, clk, first := silencePool(t)
			for range 10 {
				first() // let in, never answered
				clk.Advance(50 * time.Millisecond)
			}
			clk.Advance(200 * time.Millisecond)
			a := first()
			if a.Region != "europe-west1" {
				t.Fatalf("a call went to %s before the silence, want the provisioned region", a.Region)
			}
			a.Done(o) // refused at once
			// 1.1 s after the first attempt it let in, 0.4 s after the
			// refusal: longer than its slowest answer (1 s) with nothing
			// back from the calls it holds.
			clk.Advance(400 * time.Millisecond)
			if rs := p.Snapshot().Regions[0]; !rs.Silent || rs.InFlight != 10 {
				t.Errorf("holding 10 calls it let in 1.1 s ago, answering only %s: %+v, want silent", o, rs)
			}
		})
	}
}

// TestHeavyTailIsNotSilence: a region answering 40 calls a second with a
// heavy tail (lognormal, median 1 s, p99 5 s), never hanging, is never
// silent over two minutes, in which its slowest answer ages out of the
// interval a dozen times.
func TestHeavyTailIsNotSilence(t *testing.T) {
	clk := newClock()
	tp := pool(provisioned("europe-west1", table.Capacity{}), shared("europe-west4", 0))
	tp.Policy.Concurrency = table.Concurrency{MaxInFlight: 1000, RegionInitialLimit: 512, RegionMaxLimit: 512}
	p := mustNew(t, tp, clk)
	rnd := rand.New(rand.NewPCG(7, 7))
	type pending struct {
		at time.Time
		a  Attempt
	}
	var inFlight []pending
	start := clk.Now()
	for clk.Now().Sub(start) < 2*time.Minute {
		next := clk.Now().Add(25 * time.Millisecond)
		for {
			i := slices.IndexFunc(inFlight, func(q pending) bool { return !q.at.After(next) })
			if i < 0 {
				break
			}
			for j, q := range inFlight {
				if q.at.Before(inFlight[i].at) && !q.at.After(next) {
					i = j
				}
			}
			clk.Advance(inFlight[i].at.Sub(clk.Now()))
			inFlight[i].a.Done(Success)
			inFlight = slices.Delete(inFlight, i, i+1)
		}
		clk.Advance(next.Sub(clk.Now()))
		_, a := pick(t, p, PriorityDefault)
		if a.Region != "europe-west1" {
			t.Fatalf("at %s with %d in flight, a call went to %s: %+v", clk.Now().Sub(start), len(inFlight), a.Region, p.Snapshot().Regions[0])
		}
		lat := time.Duration(float64(time.Second) * math.Exp(rnd.NormFloat64()*math.Log(5)/2.326))
		inFlight = append(inFlight, pending{clk.Now().Add(lat), a})
	}
}

// TestSilenceStartsAfreshAfterIdle: a region's call times out, it gets no
// call for 30 s, and then several at once: nothing came back from the call
// that timed out, but that says nothing of the new ones, which have been
// in it for no time at all. The region is not silent, and takes them.
func TestSilenceStartsAfreshAfterIdle(t *testing.T) {
	p, clk, first := silencePool(t)
	a := first()
	clk.Advance(2 * time.Second)
	a.Finish(Report{Outcome: Failure, Timeout: true})
	clk.Advance(30 * time.Second)
	for i := range 3 {
		if a := first(); a.Region != "europe-west1" {
			t.Fatalf("call %d after 30 s idle went to %s: %+v", i+1, a.Region, p.Snapshot().Regions[0])
		}
	}
}
