package replay

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/regionwarden/regionwarden/router/policy"
	"github.com/regionwarden/regionwarden/router/table"
)

// tally counts how each router of a Replicas column ended its calls, before,
// during and after the scenario's first fault, for the diagnostics (-v): a
// router that refuses calls while another has room shows it here.
type tally struct {
	env      *Env
	from, to time.Duration // the first fault; zero: none

	mu sync.Mutex
	c  map[tallyKey]*tallyCount
}

type tallyKey struct {
	router int
	phase  int // 0 before the fault, 1 during, 2 after
}

// tallyCount is one router's calls in one phase.
type tallyCount struct {
	calls, served  int64
	refusedFirst   int64 // refused before any attempt: no region had room
	refusedRetry   int64 // refused a retry for want of room
	stopped        int64 // retry budget, attempts or deadline spent
	firstFailedAtt map[string]int64
}

func newTally(env *Env) *tally {
	t := &tally{env: env, c: map[tallyKey]*tallyCount{}}
	for _, r := range env.Scenario.Regions {
		if len(r.Faults) > 0 {
			t.from, t.to = r.Faults[0].From.Duration, r.Faults[0].To.Duration
			break
		}
	}
	return t
}

var tallyPhases = [...]string{"before the fault", "during the fault", "after the fault"}

// start counts a call that router i receives now and returns its counts.
func (t *tally) start(i int) *tallyCount {
	ph, e := 0, t.env.Clock.Elapsed()
	switch {
	case t.to == 0 || e < t.from:
	case e < t.to:
		ph = 1
	default:
		ph = 2
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	k := tallyKey{i, ph}
	c := t.c[k]
	if c == nil {
		c = &tallyCount{firstFailedAtt: map[string]int64{}}
		t.c[k] = c
	}
	c.calls++
	return c
}

// add runs f on c under the tally's lock.
func (t *tally) add(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f()
}

// log writes one line per router and phase.
func (t *tally) log(name string, n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for ph, label := range tallyPhases {
		for i := range n {
			c := t.c[tallyKey{i, ph}]
			if c == nil {
				continue
			}
			t.env.Logf("%s: router %d %s: %d calls, %d served, %d refused before any attempt, %d refused a retry, %d stopped by the retry budget, attempts or deadline; first attempts failed by region %v",
				name, i, label, c.calls, c.served, c.refusedFirst, c.refusedRetry, c.stopped, c.firstFailedAtt)
		}
	}
}

// tallied is a call's selection that counts its end in c.
type tallied struct {
	Selection
	t *tally
	c *tallyCount
}

func (s *tallied) Pick() (Attempt, error) {
	a, err := s.Selection.Pick()
	n := s.Attempts()
	if err != nil {
		s.t.add(func() {
			var ce *policy.CapacityError
			switch {
			case errors.As(err, &ce) && n == 0:
				s.c.refusedFirst++
			case errors.As(err, &ce):
				s.c.refusedRetry++
			case errors.Is(err, policy.ErrNotRetryable):
			default:
				s.c.stopped++
			}
		})
		return a, err
	}
	done := a.Done
	a.Done = func(r policy.Report) {
		s.t.add(func() {
			switch {
			case r.Outcome == policy.Success:
				s.c.served++
			case n == 1:
				s.c.firstFailedAtt[fmt.Sprintf("%s %s", a.Region, r.Outcome)]++
			}
		})
		done(r)
	}
	return a, nil
}

// tallySelector tallies the calls of one router's Selector (the in-process
// policy's column) as router 0, with the diagnostics.
type tallySelector struct {
	Selector
	name string
	t    *tally
}

func (s tallySelector) Start(deadline time.Time, pr table.Priority) Selection {
	return &tallied{Selection: s.Selector.Start(deadline, pr), t: s.t, c: s.t.start(0)}
}

// Close logs the tally, and closes the Selector if it is an io.Closer.
func (s tallySelector) Close() error {
	s.t.log(s.name, 1)
	if c, ok := s.Selector.(io.Closer); ok {
		return c.Close()
	}
	return nil
}
