package replay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/regionwarden/regionwarden/internal/defaults"
	"github.com/regionwarden/regionwarden/internal/emulator"
	"github.com/regionwarden/regionwarden/router/table"
)

// Options tune a replay. The zero value replays the scenario at its
// suggested time scale with seed 1.
type Options struct {
	// Seed seeds the load (arrivals, session lengths) and the emulated
	// regions (latencies, fault bursts); every policy gets the same. Zero
	// means 1.
	Seed uint64
	// Scale is scenario seconds per real second. Zero uses the scenario's
	// timeScale.
	Scale float64
	// Duration cuts the replay short of the scenario's duration; zero (or
	// more than the scenario's) replays all of it.
	Duration time.Duration
	// Progress, when set, is called about once a real second with the
	// running totals of every policy, and once more for each policy when its
	// result is complete. Calls come from one goroutine, in order.
	Progress func(Event)
	// ProgressEvery is how often (real time) Progress sees running totals.
	// Zero means one second.
	ProgressEvery time.Duration
	// Logf, when set, receives the policies' diagnostics.
	Logf func(format string, args ...any)
}

// Event is a progress report.
type Event struct {
	// Scenario is the scenario's name.
	Scenario string
	// Elapsed and Duration are scenario time: how far the replay is, of how long.
	Elapsed, Duration time.Duration
	// Live are the running totals, one per policy, in the order given to Run.
	Live []Live
	// Result is set when one policy's result is complete; Live is then empty.
	Result *Result
}

// Live is a policy's running totals.
type Live struct {
	Policy string
	// Requests is how many calls ended so far; Succeeded how many of them
	// succeeded.
	Requests, Succeeded int64
	// Skipped is why the policy is not running, or empty.
	Skipped string
}

// SuccessRate is the share of the calls ended so far that succeeded.
func (l Live) SuccessRate() float64 { return ratio(l.Succeeded, l.Requests) }

// bucketWidth is the width of the time series that the charts and the
// recovery check read.
const bucketWidth = 10 * time.Second

// Run replays sc against each policy: one set of emulated regions per
// policy, one shared scenario clock, the same seeded load for all. It
// returns when every policy has replayed the scenario and its calls have
// ended, or with ctx's error. A policy that is unavailable here is in the
// report as skipped, with the reason.
func Run(ctx context.Context, sc *emulator.Scenario, policies []Policy, o Options) (*Report, error) {
	sc.Default()
	if err := sc.Validate(); err != nil {
		return nil, fmt.Errorf("scenario %q: %w", sc.Name, err)
	}
	o.Seed = cmp.Or(o.Seed, 1)
	defaults.Positive(&o.Scale, sc.TimeScale)
	dur := sc.Duration.Duration
	if o.Duration > 0 && o.Duration < dur {
		dur = o.Duration
	}
	defaults.Positive(&o.ProgressEvery, time.Second)
	rep := &Report{Scenario: sc.Name, Description: sc.Description, Duration: dur, Scale: o.Scale, Seed: o.Seed, Rate: sc.Load.RequestsPerSecond}
	for _, ph := range sc.Load.Phases {
		if ph.From.Duration < dur {
			rep.Phases = append(rep.Phases, Phase{Span: Span{From: ph.From.Duration, To: min(ph.To.Duration, dur)}, Multiplier: ph.Multiplier})
		}
	}
	rep.Fault, rep.FaultCarry = faultSpan(sc, dur)
	rep.FaultCarryOnce = carryOnce(sc, rep.Fault)
	rep.PriorityCarry = priorityCarry(sc.Load.Priorities, rep.FaultCarry)
	for i := range sc.Regions {
		if p := sc.Regions[i].Provisioned; p != nil {
			rep.PTCalls += sc.RequestsPerSecond(&emulator.Region{Provisioned: p})
		}
	}
	// Policies that cannot keep up with the replay's scale replay in a pass
	// of their own, after the others, at the scale they can take.
	rep.Results = make([]*Result, len(policies))
	scales := []float64{o.Scale}
	for _, p := range policies {
		if s := p.MaxScale; s > 0 && s < o.Scale && !slices.Contains(scales, s) {
			scales = append(scales, s)
		}
	}
	for _, scale := range scales {
		var idx []int
		for i, p := range policies {
			if s := p.MaxScale; (s > 0 && s < o.Scale && s == scale) || ((s <= 0 || s >= o.Scale) && scale == o.Scale) {
				idx = append(idx, i)
			}
		}
		wall, err := runPass(ctx, sc, policies, idx, scale, dur, o, rep)
		if err != nil {
			return nil, err
		}
		rep.Wall += wall
		if scale != o.Scale {
			rep.SlowWall += wall
		}
	}
	return rep, nil
}

// runPass replays the policies at indexes idx on one clock at scale and
// stores their results in rep.Results at the same indexes.
func runPass(ctx context.Context, sc *emulator.Scenario, policies []Policy, idx []int, scale float64, dur time.Duration, o Options, rep *Report) (time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	clock := emulator.NewScaledClock(scale)
	runs := make([]*policyRun, 0, len(idx))
	defer func() {
		for _, pr := range runs {
			pr.close()
		}
	}()
	for _, i := range idx {
		pr, err := startPolicy(ctx, sc, policies[i], clock, o, dur)
		if err != nil {
			return 0, err
		}
		runs = append(runs, pr)
	}

	// Every policy gets the same arrivals (drive), and policies of a pass
	// run side by side on one machine: unshifted, n policies would send n
	// calls at the same instant, a batch the machine serves one call after
	// another, and batches queue far longer than n independent streams of
	// the same rate (the replay's own load would arrive late, in backlogs).
	// Each policy's schedule is shifted by its share of the mean gap between
	// calls, so the machine sees the calls spread out while every policy
	// sees the same arrivals, at most one gap later.
	var driving []*policyRun
	for _, pr := range runs {
		if pr.caller != nil {
			driving = append(driving, pr)
		}
	}
	if rate := sc.Load.RequestsPerSecond; rate > 0 {
		for i, pr := range driving {
			pr.offset = time.Duration(float64(time.Second) / rate * float64(i) / float64(len(driving)))
		}
	}
	begin := time.Now()
	clock.Start()
	var wg sync.WaitGroup
	for _, pr := range driving {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pr.drive(ctx)
		}()
	}
	finished := make(chan struct{})
	go func() {
		wg.Wait()
		close(finished)
	}()
	tick := time.NewTicker(o.ProgressEvery)
	defer tick.Stop()
	for running := true; running; {
		select {
		case <-ctx.Done():
			<-finished
			return 0, ctx.Err()
		case <-finished:
			running = false
		case <-tick.C:
			if o.Progress != nil {
				ev := Event{Scenario: sc.Name, Elapsed: min(clock.Elapsed(), dur), Duration: dur}
				for _, pr := range runs {
					ev.Live = append(ev.Live, pr.live())
				}
				o.Progress(ev)
			}
		}
	}
	wall := time.Since(begin)
	for k, pr := range runs {
		res := pr.result(rep)
		res.Scale = scale
		rep.Results[idx[k]] = res
		if o.Progress != nil {
			o.Progress(Event{Scenario: sc.Name, Elapsed: dur, Duration: dur, Result: res})
		}
	}
	return wall, nil
}

// policyRun is one policy's replay: its regions, its caller and what it saw.
type policyRun struct {
	p       Policy
	sc      *emulator.Scenario
	clock   *emulator.ScaledClock
	emu     *emulator.Emulator
	caller  Caller
	skipped string
	seed    uint64
	dur     time.Duration
	// offset shifts the policy's arrivals (runPass).
	offset time.Duration
	rec    *recorder
}

// startPolicy starts a set of regions for one policy and the policy on them.
// The regions read the shared clock through a wrapper, so that starting them
// does not start the clock.
func startPolicy(ctx context.Context, sc *emulator.Scenario, p Policy, clock *emulator.ScaledClock, o Options, dur time.Duration) (*policyRun, error) {
	pr := &policyRun{p: p, sc: sc, clock: clock, seed: o.Seed, dur: dur, rec: newRecorder(dur)}
	emu, err := emulator.New(sc, emulator.Options{Seed: o.Seed, Clock: heldClock{clock}})
	if err != nil {
		return nil, err
	}
	if err := emu.Start(ctx); err != nil {
		return nil, err
	}
	pr.emu = emu
	env := &Env{
		Scenario: sc,
		Regions:  emu.Regions(),
		Clock:    clock,
		Seed:     o.Seed,
		Prompt:   prompt(sc.Load.InputTokens),
		Logf:     o.Logf,
	}
	env.Pool = regionPool(sc, env.Regions)
	c, err := p.Start(ctx, env)
	switch {
	case errors.Is(err, ErrUnavailable):
		pr.skipped = err.Error()
	case err != nil:
		_ = emu.Close()
		return nil, fmt.Errorf("policy %s: %w", p.Name, err)
	default:
		pr.caller = c
	}
	return pr, nil
}

// heldClock is the shared scaled clock as the emulator reads it: a Clock
// the emulator does not recognize as a ScaledClock, so it never starts it.
type heldClock struct{ c *emulator.ScaledClock }

func (h heldClock) Elapsed() time.Duration { return h.c.Elapsed() }

func (h heldClock) Sleep(ctx context.Context, d time.Duration) error { return h.c.Sleep(ctx, d) }

// close stops the policy and its regions.
func (pr *policyRun) close() {
	if pr.caller != nil {
		_ = pr.caller.Close()
		pr.caller = nil
	}
	if pr.emu != nil {
		_ = pr.emu.Close()
	}
}

// drive sends the load through the policy: Poisson arrivals at the
// scenario's rate, each call given to an idle session (or a new one), until
// the replay's duration; then it waits for the calls in flight.
func (pr *policyRun) drive(ctx context.Context) {
	// Arrivals, priorities and session lengths each come from a stream of
	// their own. How many sessions open depends on when calls end, which is
	// the policy's doing; drawn from the arrivals' stream, their lengths
	// would shift every arrival after the first session one policy opened
	// and another did not. Apart, every policy of a replay gets the same calls
	// with the same priorities (common random numbers; runPass shifts each
	// policy's schedule by less than the mean gap between calls),
	// so that a difference between two columns is the policies', not the
	// load's: a few dozen calls more in one column's outage would otherwise
	// move its success rate by as much as the half point some targets allow.
	arrivals := rand.New(rand.NewPCG(pr.seed, 0x5e55))
	prios := rand.New(rand.NewPCG(pr.seed, 0x9e10))
	lengths := rand.New(rand.NewPCG(pr.seed, 0x5e5510))
	streams := rand.New(rand.NewPCG(pr.seed, 0x57ea))
	load := &pr.sc.Load
	var sessions sessionPool
	var wg sync.WaitGroup
	defer wg.Wait()
	t := time.Duration(0)
	for {
		rate := load.RateAt(t)
		if rate <= 0 {
			if t += time.Second; t >= pr.dur {
				return
			}
			continue
		}
		t += time.Duration(arrivals.ExpFloat64() / rate * float64(time.Second))
		if t >= pr.dur {
			return
		}
		due := t + pr.offset
		if wait := due - pr.clock.Elapsed(); wait > 0 {
			if err := pr.clock.Sleep(ctx, wait); err != nil {
				return
			}
		}
		pr.rec.lag(pr.clock.Elapsed() - due)
		prio := table.PriorityDefault
		if !load.Priorities.IsZero() {
			prio = load.Priorities.Of(prios.Float64())
		}
		// Drawn only where the load streams, so that a scenario without
		// streams gets the calls it always had.
		lc := LoadCall{Deadline: load.Deadline.Duration, Priority: prio,
			Stream: load.StreamShare > 0 && streams.Float64() < load.StreamShare}
		s := sessions.take(func() int {
			return load.SessionCalls.Min + lengths.IntN(load.SessionCalls.Max-load.SessionCalls.Min+1)
		})
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := pr.clock.Elapsed()
			res := pr.caller.Call(ctx, lc)
			end := pr.clock.Elapsed()
			pr.rec.record(start, end-start, lc, res)
			if done, clean := sessions.release(s, res.Err == NoError); done {
				pr.rec.session(clean)
			}
		}()
	}
}

// live returns the policy's running totals.
func (pr *policyRun) live() Live {
	l := Live{Policy: pr.p.Name, Skipped: pr.skipped}
	l.Requests, l.Succeeded = pr.rec.totals()
	return l
}

// result turns what the policy's run saw into its Result.
func (pr *policyRun) result(rep *Report) *Result {
	res := &Result{Policy: pr.p.Name, Skipped: pr.skipped}
	if pr.skipped != "" {
		return res
	}
	pr.rec.fill(res)
	st := pr.emu.Stats()
	seconds := int(pr.dur / time.Second)
	for _, rs := range st.Regions {
		rs = rs.Until(seconds)
		rl := NewRegionLoad(rs)
		res.Attempts += rl.Requests
		for _, s := range rs.PerSecond {
			if b := s.Second * int(time.Second) / int(bucketWidth); b < len(res.Series) {
				res.Series[b].Attempts += s.Requests
			}
			pr.rec.attemptsAt(s.Second, s.Requests)
		}
		res.Regions = append(res.Regions, rl)
	}
	for _, ph := range rep.Phases {
		res.Phases = append(res.Phases, PhaseResult{SpanResult: pr.rec.span(ph.Span), Multiplier: ph.Multiplier})
	}
	if rep.Fault.To > 0 {
		res.Fault = pr.rec.span(rep.Fault)
		pr.rec.prioritySpan(res.Priorities, rep.Fault)
	}
	return res
}

// sessionPool hands calls to client sessions: an idle session takes the next
// call; when none is idle a new session opens. A session closes after its
// last call.
type sessionPool struct {
	mu   sync.Mutex
	idle []*session
}

// session is one client session: calls left, and whether all so far succeeded.
type session struct {
	left  int
	clean bool
}

// take returns an idle session, or a new one of size() calls.
func (p *sessionPool) take(size func() int) *session {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.idle); n > 0 {
		s := p.idle[n-1]
		p.idle = p.idle[:n-1]
		return s
	}
	return &session{left: size(), clean: true}
}

// release ends one call of s; it reports whether the session is over and, if
// so, whether every call of it succeeded.
func (p *sessionPool) release(s *session, ok bool) (done, clean bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s.left--
	s.clean = s.clean && ok
	if s.left <= 0 {
		return true, s.clean
	}
	p.idle = append(p.idle, s)
	return false, false
}

// recorder gathers the calls of one policy's run.
type recorder struct {
	mu        sync.Mutex
	requests  int64
	ok        int64
	pt        int64
	errs      map[ErrorKind]int64
	latencies []time.Duration // of successful calls
	seconds   []secondCount   // by the second the call started
	sessions  int64
	clean     int64
	lags      []time.Duration // how late each call was sent
	byPrio    map[table.Priority]*PriorityResult
	// streams and streamsOK count the calls made as streams, and those
	// served.
	streams, streamsOK int64
	// prioSeconds counts, per priority, the calls by the second they
	// started: requests and ok.
	prioSeconds map[table.Priority][]secondCount
}

// secondCount is one scenario second of one policy's run.
type secondCount struct {
	requests, ok, attempts int64
}

func newRecorder(dur time.Duration) *recorder {
	return &recorder{errs: map[ErrorKind]int64{}, seconds: make([]secondCount, int(dur/time.Second)+1),
		byPrio: map[table.Priority]*PriorityResult{}, prioSeconds: map[table.Priority][]secondCount{}}
}

// record counts one call of the load that started at start and took took.
func (r *recorder) record(start, took time.Duration, lc LoadCall, res CallResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests++
	prio := lc.Priority
	if lc.Stream {
		r.streams++
		if res.Err == NoError {
			r.streamsOK++
		}
	}
	p := r.byPrio[prio]
	if p == nil {
		p = &PriorityResult{Priority: prio, ByTraffic: map[string]int64{}, Errors: map[string]int64{}}
		r.byPrio[prio] = p
	}
	p.Requests++
	if res.Err == NoError {
		p.Succeeded++
		p.ByTraffic[res.Traffic]++
	} else {
		p.Errors[res.Err.String()]++
	}
	sec := min(int(start/time.Second), len(r.seconds)-1)
	r.seconds[sec].requests++
	ps := r.prioSeconds[prio]
	if ps == nil {
		ps = make([]secondCount, len(r.seconds))
		r.prioSeconds[prio] = ps
	}
	ps[sec].requests++
	if res.Err == NoError {
		ps[sec].ok++
	}
	if res.Err != NoError {
		r.errs[res.Err]++
		return
	}
	r.ok++
	r.seconds[sec].ok++
	r.latencies = append(r.latencies, took)
	if res.Provisioned {
		r.pt++
	}
}

// lag records how late, in scenario time, a call was sent.
func (r *recorder) lag(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lags = append(r.lags, max(d, 0))
}

// session counts a finished session.
func (r *recorder) session(clean bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sessions++
	if clean {
		r.clean++
	}
}

// attemptsAt adds attempts that reached the regions in scenario second sec.
func (r *recorder) attemptsAt(sec int, n int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if sec < len(r.seconds) {
		r.seconds[sec].attempts += n
	}
}

func (r *recorder) totals() (requests, ok int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests, r.ok
}

// fill writes the totals, latencies and time series into res.
func (r *recorder) fill(res *Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	res.Requests, res.Succeeded, res.Provisioned = r.requests, r.ok, r.pt
	res.NoRegions, res.Shed = r.errs[NoRegions], r.errs[Shed]
	res.Errors = map[string]int64{}
	for k, v := range r.errs {
		res.Errors[k.String()] = v
	}
	res.Sessions, res.CleanSessions = r.sessions, r.clean
	res.Streams, res.StreamsSucceeded = r.streams, r.streamsOK
	for _, pr := range highestFirst {
		if p := r.byPrio[pr]; p != nil {
			c := *p
			c.ByTraffic, c.Errors = maps.Clone(p.ByTraffic), maps.Clone(p.Errors)
			res.Priorities = append(res.Priorities, c)
		}
	}
	lat := append([]time.Duration(nil), r.latencies...)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	res.P50, res.P99 = quantile(lat, 0.50), quantile(lat, 0.99)
	lags := append([]time.Duration(nil), r.lags...)
	sort.Slice(lags, func(i, j int) bool { return lags[i] < lags[j] })
	res.LagP99 = quantile(lags, 0.99)
	if len(lags) > 0 {
		res.LagMax = lags[len(lags)-1]
	}
	per := int(bucketWidth / time.Second)
	for i := 0; i < len(r.seconds)-1; i += per {
		b := Bucket{Start: time.Duration(i) * time.Second}
		for j := i; j < min(i+per, len(r.seconds)-1); j++ {
			b.Requests += r.seconds[j].requests
			b.Succeeded += r.seconds[j].ok
		}
		res.Series = append(res.Series, b)
	}
}

// span measures a span: attempts per request and success during it, the
// success of the two minutes before it, and how long after it ended a 10 s
// window was back to that baseline.
func (r *recorder) span(ph Span) SpanResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(r.seconds) - 1
	sum := func(from, to time.Duration) secondCount { return sumSeconds(r.seconds, from, to) }
	pr := SpanResult{Span: ph, RecoveredAfter: -1}
	during := sum(ph.From, ph.To)
	pr.Requests = during.requests
	pr.AttemptsPerRequest = ratio(during.attempts, during.requests)
	pr.Success = ratio(during.ok, during.requests)
	before := sum(ph.From-2*time.Minute, ph.From)
	pr.Baseline = ratio(before.ok, before.requests)
	for at := ph.To; at+bucketWidth <= time.Duration(n)*time.Second; at += time.Second {
		w := sum(at, at+bucketWidth)
		if w.requests > 0 && ratio(w.ok, w.requests) >= pr.Baseline-0.01 {
			pr.RecoveredAfter = at + bucketWidth - ph.To
			break
		}
	}
	return pr
}

// prioritySpan counts in each of ps the calls of its priority that started
// in sp, and how many succeeded.
func (r *recorder) prioritySpan(ps []PriorityResult, sp Span) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range ps {
		c := sumSeconds(r.prioSeconds[ps[i].Priority], sp.From, sp.To)
		ps[i].FaultRequests, ps[i].FaultSucceeded = c.requests, c.ok
	}
}

// sumSeconds adds up the seconds of secs from from up to to, but for the
// last second of secs (the one the calls after the end are counted in).
func sumSeconds(secs []secondCount, from, to time.Duration) secondCount {
	var c secondCount
	for s := max(int(from/time.Second), 0); s < min(int(to/time.Second), len(secs)-1); s++ {
		c.requests += secs[s].requests
		c.ok += secs[s].ok
		c.attempts += secs[s].attempts
	}
	return c
}

// quantile is the q-quantile of sorted values (nearest rank), 0 when empty.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// ratio is a/b, 0 when b is 0.
func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// faultSpan is the span of sc's faults within dur, from the first one's start
// to the last one's end (zero when it has none), and the share of the calls
// sent in it that the regions can carry (overSpan): at each moment, each
// region's capacity in calls per second (a region without one carries
// anything), and of a region with a fault then what it answers of the calls
// it is sent up to that capacity (answeredAt), over the load's rate then, at
// most 1. Judged moment by moment, a span in which the regions fail by turns
// (a region that flaps, a second one failing as the first recovers) carries
// what each moment does, not what it would if every fault lasted the whole
// span.
func faultSpan(sc *emulator.Scenario, dur time.Duration) (Span, float64) {
	var sp Span
	for _, r := range sc.Regions {
		for _, f := range r.Faults {
			if f.From.Duration >= dur {
				continue
			}
			if sp.To == 0 || f.From.Duration < sp.From {
				sp.From = f.From.Duration
			}
			sp.To = max(sp.To, min(f.To.Duration, dur))
		}
	}
	if sp.To == 0 {
		return Span{}, 0
	}
	return sp, overSpan(sc, sp, 1, func(t time.Duration, rate float64) float64 {
		var carry float64
		for i := range sc.Regions {
			r := &sc.Regions[i]
			carry += answeredAt(r, t, sc.Load.Deadline.Duration) * min(callsOf(sc, r, rate), rate)
		}
		return min(carry/rate, 1)
	})
}

// priorityCarry is, for a load of mix m, the share of each priority's calls
// that a carry (a share of the load) serves when it goes to the highest
// priority first: critical calls take up to their share of the load, default
// ones up to theirs of what is left, sheddable ones the rest. Nil for a load
// of one priority.
func priorityCarry(m emulator.PriorityMix, carry float64) map[table.Priority]float64 {
	if m.IsZero() {
		return nil
	}
	shares := map[table.Priority]float64{table.PriorityCritical: m.Critical, table.PriorityDefault: 1 - m.Critical - m.Sheddable, table.PrioritySheddable: m.Sheddable}
	out := map[table.Priority]float64{}
	left := carry
	for _, pr := range highestFirst {
		share := shares[pr]
		if share <= 0 {
			continue
		}
		got := min(share, max(left, 0))
		out[pr] = got / share
		left -= got
	}
	return out
}

// carryOnce is the share of the calls sent during sp that sc's regions
// serve when every call is sent once, and not retried (overSpan): at each
// moment, to the regions that answer most of what they are sent first, each
// up to its capacity in calls per second (a region without one takes the
// rest), each answering its share (answeredAt) of the calls it takes. Zero
// without a span.
func carryOnce(sc *emulator.Scenario, sp Span) float64 {
	if sp.To == 0 {
		return 0
	}
	type room struct{ share, calls float64 }
	rooms := make([]room, len(sc.Regions))
	return overSpan(sc, sp, 0, func(t time.Duration, rate float64) float64 {
		for i := range sc.Regions {
			r := &sc.Regions[i]
			rooms[i] = room{answeredAt(r, t, sc.Load.Deadline.Duration), callsOf(sc, r, rate)}
		}
		slices.SortStableFunc(rooms, func(a, b room) int { return cmp.Compare(b.share, a.share) })
		left, served := rate, 0.0
		for _, r := range rooms {
			sent := min(r.calls, left)
			served += r.share * sent
			left -= sent
		}
		return served / rate
	})
}

// callsOf is the calls per second region r can take of a load of rate: its
// capacity, or the whole load where it has none.
//
// A capacity counts whole calls over its window (the scenario's
// capacityWindow for pay-as-you-go, the PT's enforcement window for a PT),
// as the regions count it: a quota of 1.86 calls a second over a one-second
// window grants one call in any second, not 1.86, and a bound that counted
// the fraction would blame the router for a call no region would take.
func callsOf(sc *emulator.Scenario, r *emulator.Region, rate float64) float64 {
	if sc.RequestsPerSecond(r) == 0 {
		return rate // no limit
	}
	return sc.WholeRequestsPerSecond(r)
}

// carryStep is the length of the moments, in scenario time, that overSpan
// judges a span by: a second, the window in which regions count calls.
const carryStep = time.Second

// overSpan averages carry over sp: carry(t, rate) is the share of the calls
// sent at t, at the load's rate then, that the regions serve. It is judged at
// the middle of each carryStep of sp, and each step weighs as the calls sent
// in it. none is the result when the load sends nothing in sp.
func overSpan(sc *emulator.Scenario, sp Span, none float64, carry func(t time.Duration, rate float64) float64) float64 {
	var sent, served float64
	for from := sp.From; from < sp.To; from += carryStep {
		to := min(from+carryStep, sp.To)
		t := from + (to-from)/2
		rate := sc.Load.RateAt(t)
		if rate <= 0 {
			continue
		}
		calls := rate * (to - from).Seconds()
		sent += calls
		served += calls * carry(t, rate)
	}
	if sent == 0 {
		return none
	}
	return served / sent
}

// answeredAt is the share of its calls that region r answers within
// deadline (zero: none) under its faults at t: none in an outage, else all
// but the error rate, and of those the share that the region's latency
// distribution answers within what the deadline leaves once the faults have
// added their latency (emulator.Latency.Within): none once the added latency
// reaches the deadline, about half while it leaves the median. The tail of
// a region's own latency counts too, with no fault: a call it answers after
// the deadline is lost wherever the router sent it, and has no time left to
// be sent again, so no routing serves it, and a bound that counted it would
// blame the router for the region's tail.
func answeredAt(r *emulator.Region, t, deadline time.Duration) float64 {
	share, added := 1.0, time.Duration(0)
	for i := range r.Faults {
		f := &r.Faults[i]
		if !f.Active(t) {
			continue
		}
		if f.Outage != "" {
			return 0
		}
		added += f.AddedLatencyAt(t)
		share = min(share, 1-f.ErrorRate)
	}
	if deadline > 0 {
		share *= r.Latency.Within(deadline - added)
	}
	return share
}
