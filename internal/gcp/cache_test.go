package gcp

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/regionwarden/regionwarden/internal/gcp/gcpfake"
)

const callsPerFetch = 3 // one ListTimeSeries per metric for a project with PT

// declareProjects gives each project a few PTs over locations and models.
func declareProjects(fake *gcpfake.MetricServer, projects []string) {
	for i, p := range projects {
		for _, loc := range []string{"europe-west1", "europe-west4", "us-central1"} {
			for _, model := range []string{"gemini-2.5-flash-lite-001", "gemini-2.5-pro"} {
				fake.SetPT(gcpfake.PT{Project: p, Location: loc, Publisher: "google", Model: model, GSUs: int64(i + 1), TokensPerSecond: 1000})
			}
		}
	}
}

func TestCachedSourceCallsGrowWithProjectsNotLookups(t *testing.T) {
	projects := []string{"p0", "p1", "p2"}
	for _, lookups := range []int{3, 200} {
		t.Run(fmt.Sprint(lookups), func(t *testing.T) {
			clk := newClock()
			fake, src := startFake(t, clk)
			declareProjects(fake, projects)
			cached := NewCachedSource(src, CacheOptions{TTL: time.Minute, Now: clk.Now})

			// Lookups as PT objects make them: a few workers, each PT object asks
			// for its project and finds its entry.
			var wg sync.WaitGroup
			errs := make(chan error, lookups)
			work := make(chan int)
			for range 4 {
				wg.Go(func() {
					for i := range work {
						p := projects[i%len(projects)]
						facts, err := cached.ProvisionedThroughput(context.Background(), p)
						if err != nil {
							errs <- err
							continue
						}
						if f, ok := facts.Lookup("europe-west4", "google", "gemini-2.5-flash-lite"); !ok || f.GSUs != int64(i%len(projects)+1) {
							errs <- fmt.Errorf("lookup %d in %s: %+v, %v", i, p, f, ok)
						}
					}
				})
			}
			for i := range lookups {
				work <- i
			}
			close(work)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			for _, p := range projects {
				if calls := fake.Calls(p); calls != callsPerFetch {
					t.Errorf("%d lookups made %d calls for %s, want %d", lookups, calls, p, callsPerFetch)
				}
			}
			if total := fake.TotalCalls(); total != callsPerFetch*len(projects) {
				t.Errorf("%d lookups made %d calls in all, want %d", lookups, total, callsPerFetch*len(projects))
			}
		})
	}
}

func TestCachedSourceExpiresAfterTTL(t *testing.T) {
	clk := newClock()
	fake, src := startFake(t, clk)
	fake.SetPT(gcpfake.PT{Project: "p", Location: "europe-west1", Publisher: "google", Model: "m", GSUs: 2})
	const ttl = 5 * time.Minute
	cached := NewCachedSource(src, CacheOptions{TTL: ttl, Now: clk.Now})
	gsus := func() int64 {
		t.Helper()
		facts, err := cached.ProvisionedThroughput(context.Background(), "p")
		if err != nil {
			t.Fatal(err)
		}
		f, _ := facts.Lookup("europe-west1", "google", "m")
		return f.GSUs
	}

	if got := gsus(); got != 2 {
		t.Fatalf("GSUs = %d, want 2", got)
	}
	fake.SetPT(gcpfake.PT{Project: "p", Location: "europe-west1", Publisher: "google", Model: "m", GSUs: 6})
	clk.Step(ttl - time.Second)
	if got := gsus(); got != 2 {
		t.Errorf("GSUs within the TTL = %d, want the cached 2", got)
	}
	if calls := fake.Calls("p"); calls != callsPerFetch {
		t.Errorf("calls within the TTL = %d, want %d", calls, callsPerFetch)
	}
	clk.Step(time.Second)
	if got := gsus(); got != 6 {
		t.Errorf("GSUs after the TTL = %d, want the new 6", got)
	}
	if calls := fake.Calls("p"); calls != 2*callsPerFetch {
		t.Errorf("calls after the TTL = %d, want %d", calls, 2*callsPerFetch)
	}

	cached.Forget("p")
	gsus()
	if calls := fake.Calls("p"); calls != 3*callsPerFetch {
		t.Errorf("calls after Forget = %d, want %d", calls, 3*callsPerFetch)
	}
}

func TestCachedSourceErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		errorTTL time.Duration
		// retryAfter is when, after a failure, the next caller calls again.
		retryAfter time.Duration
	}{
		{"default error TTL", 0, DefaultErrorTTL},
		{"short error TTL", time.Second, time.Second},
		{"errors not cached", -1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			fake, src := startFake(t, clk)
			fake.SetPT(gcpfake.PT{Project: "p", Location: "europe-west1", Publisher: "google", Model: "m", GSUs: 2})
			fake.SetError("p", status.Error(codes.Unavailable, "down"))
			cached := NewCachedSource(src, CacheOptions{TTL: time.Hour, ErrorTTL: tc.errorTTL, Now: clk.Now})

			if _, err := cached.ProvisionedThroughput(context.Background(), "p"); Code(err) != codes.Unavailable {
				t.Fatalf("got %v, want Unavailable", err)
			}
			fake.SetError("p", nil)
			if tc.retryAfter > 0 {
				clk.Step(tc.retryAfter - time.Millisecond)
				if _, err := cached.ProvisionedThroughput(context.Background(), "p"); Code(err) != codes.Unavailable {
					t.Errorf("within the error TTL got %v, want the cached Unavailable", err)
				}
				if calls := fake.Calls("p"); calls != 1 {
					t.Errorf("calls within the error TTL = %d, want 1", calls)
				}
				clk.Step(time.Millisecond)
			}
			if _, err := cached.ProvisionedThroughput(context.Background(), "p"); err != nil {
				t.Errorf("after the error TTL: %v", err)
			}
			if calls := fake.Calls("p"); calls != 1+callsPerFetch {
				t.Errorf("calls = %d, want the failed one and a full fetch (%d)", calls, 1+callsPerFetch)
			}
		})
	}
}

// gatedSource holds every call until release is closed.
type gatedSource struct {
	Source
	release chan struct{}
}

func (g gatedSource) ProvisionedThroughput(ctx context.Context, project string) (*ProjectFacts, error) {
	select {
	case <-g.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.Source.ProvisionedThroughput(ctx, project)
}

// waitJoined blocks until n callers wait for the project's call. The deadline
// only keeps a broken cache from hanging the test run.
func waitJoined(t *testing.T, c *CachedSource, project string, n int) {
	t.Helper()
	NewWithT(t).Eventually(func() int { return c.joined(project) }).WithTimeout(time.Minute).WithPolling(time.Millisecond).
		Should(BeNumerically(">=", n), "callers that joined the call in flight")
}

func TestCachedSourceSharesACallInFlight(t *testing.T) {
	clk := newClock()
	fake, src := startFake(t, clk)
	fake.SetPT(gcpfake.PT{Project: "p", Location: "europe-west1", Publisher: "google", Model: "m", GSUs: 3,
		Consumed: map[string]float64{RequestTypeDedicated: 10}})
	gate := gatedSource{Source: src, release: make(chan struct{})}
	cached := NewCachedSource(gate, CacheOptions{Now: clk.Now})

	const callers = 50
	results := make([]*ProjectFacts, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() { results[i], errs[i] = cached.ProvisionedThroughput(context.Background(), "p") })
	}
	// One more caller gives up while the call is in flight: it stops waiting,
	// the others still get the answer.
	ctx, cancel := context.WithCancel(context.Background())
	impatient := make(chan error, 1)
	go func() {
		_, err := cached.ProvisionedThroughput(ctx, "p")
		impatient <- err
	}()
	waitJoined(t, cached, "p", callers+1)
	cancel()
	if err := <-impatient; !errors.Is(err, context.Canceled) {
		t.Errorf("a caller that gave up got %v, want context.Canceled", err)
	}
	close(gate.release)
	wg.Wait()

	for i := range callers {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if f, ok := results[i].Lookup("europe-west1", "google", "m"); !ok || f.GSUs != 3 {
			t.Errorf("caller %d got %+v, %v", i, f, ok)
		}
	}
	if calls := fake.Calls("p"); calls != callsPerFetch {
		t.Errorf("%d concurrent callers made %d calls, want one fetch (%d)", callers+1, calls, callsPerFetch)
	}
	// Every caller owns its copy: changing one changes no other.
	results[0].Entries[0].Consumed[RequestTypeDedicated] = -1
	results[0].Entries[0].GSUs = -1
	if f := results[1].Entries[0]; f.GSUs != 3 || f.Consumed[RequestTypeDedicated] != 10 {
		t.Errorf("a caller's change leaked to another: %+v", f)
	}
}

// deadlineSource records the deadline of the context each call gets.
type deadlineSource struct {
	mu        sync.Mutex
	deadlines []time.Time
}

func (s *deadlineSource) ProvisionedThroughput(ctx context.Context, _ string) (*ProjectFacts, error) {
	d, _ := ctx.Deadline()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deadlines = append(s.deadlines, d)
	return &ProjectFacts{}, nil
}

// TestIntervalCacheFetchTimeout checks that the fetch timeout given to an
// IntervalCache bounds its calls, longer or shorter than the default, and
// that zero means DefaultTimeout.
func TestIntervalCacheFetchTimeout(t *testing.T) {
	for _, tc := range []struct {
		timeout, want time.Duration
	}{{0, DefaultTimeout}, {2 * time.Minute, 2 * time.Minute}, {5 * time.Second, 5 * time.Second}} {
		src := &deadlineSource{}
		c := NewIntervalCache(src, time.Second, tc.timeout, nil)
		before := time.Now()
		if _, err := c.ProjectFacts(context.Background(), "p", time.Minute); err != nil {
			t.Fatal(err)
		}
		if len(src.deadlines) != 1 || src.deadlines[0].IsZero() {
			t.Fatalf("timeout %v: the call had deadlines %v, want one", tc.timeout, src.deadlines)
		}
		if got := src.deadlines[0].Sub(before); got < tc.want || got > tc.want+5*time.Second {
			t.Errorf("timeout %v: the call's deadline was %v away, want %v", tc.timeout, got, tc.want)
		}
	}
}
