package replay

import (
	"fmt"
	"strings"
	"time"

	"github.com/regionwarden/regionwarden/internal/emulator"
	"github.com/regionwarden/regionwarden/router/table"
)

// Scenario names whose targets Checks knows.
const (
	ScenarioProvisionedIncident  = "provisioned-region-incident"
	ScenarioCascadingFailover    = "cascading-failover"
	ScenarioRetrySurge           = "retry-surge"
	ScenarioProvisionedDown      = "provisioned-region-down"
	ScenarioUnreachable          = "provisioned-region-unreachable"
	ScenarioDownPriorities       = "provisioned-region-down-priorities"
	ScenarioProvisionedSlow      = "provisioned-region-slow"
	ScenarioProvisionedThrottled = "provisioned-region-throttled"
	ScenarioProvisionedBrownout  = "provisioned-region-brownout"
	ScenarioBrownoutStreams      = "provisioned-region-brownout-streams"
	ScenarioSharedContention     = "shared-quota-contention"
	ScenarioTotalOutage          = "total-outage"
	ScenarioSmallPTBursts        = "small-pt-bursts"
	ScenarioPriorityPayGo        = "priority-paygo"
	ScenarioSpillFailing         = "spill-regions-failing"
	ScenarioProvisionedFlapping  = "provisioned-region-flapping"
	ScenarioSharedHangs          = "shared-region-hangs"
	ScenarioNearDeadline         = "provisioned-region-near-deadline"
	ScenarioSharedDown           = "shared-region-down"
	ScenarioModelNotServed       = "model-not-served"
)

// Targets of the scenarios.
const (
	// MinSuccess is the least share of calls regionwarden must serve in the
	// provisioned-region incident.
	MinSuccess = 0.999
	// MaxOutageSuccess is the most the count blocklist may serve there for
	// the replay to reproduce the outage.
	MaxOutageSuccess = 0.20
	// MaxSecondsOver is the longest run of seconds a region may receive more
	// than its capacity under regionwarden in the cascading failover.
	MaxSecondsOver = 10
	// MaxSurgeAttempts is the most attempts per call during the retry surge.
	MaxSurgeAttempts = 1.1
	// MaxRecovery is how soon after the surge, or after a region that was
	// down serves again (provisioned-region-unreachable,
	// shared-region-down), success must be back to its baseline.
	MaxRecovery = 30 * time.Second
	// MinShareOfCarry is the least share of what the regions without a fault
	// can carry that regionwarden must serve while the provisioned region is
	// down.
	MinShareOfCarry = 0.95
	// MaxStreamGap is how much less of its streamed calls than of its unary
	// ones regionwarden may serve when half the calls of a brownout are
	// streams.
	MaxStreamGap = 0.02
	// MaxDownAttempts is the most attempts per call while the provisioned
	// region is down.
	MaxDownAttempts = 1.1
	// MaxOutageAttempts is the most attempts per call while every region is
	// down.
	MaxOutageAttempts = 1.0
	// MaxOutageRecovery is how soon after a total outage success must be
	// back to its baseline.
	MaxOutageRecovery = 10 * time.Second
	// MaxWindowSpill is the most that metering a small PT over its window
	// may spill to pay-as-you-go in the bursts on a small PT, as a share of
	// what metering it over one second spills.
	MaxWindowSpill = 0.5
	// MaxNearDeadlineShed is the most of the calls regionwarden may shed
	// while the provisioned region answers half its calls past their
	// deadline: it has room and answers the others in time, so a call
	// refused there is lost for nothing.
	MaxNearDeadlineShed = 0.01
)

// Check is one target of a scenario and what a policy measured against it.
type Check struct {
	// Target says what must hold, naming the policy.
	Target string
	// Measured is what the replay measured.
	Measured string
	// Pass says the target was met; Skipped that the policy did not run.
	Pass, Skipped bool
}

// regionwardenPolicies are the columns the targets hold regionwarden to.
var regionwardenPolicies = []string{NameRegionwarden, NameRouter}

// regionTargets are the scenarios whose one target is what the regions can
// carry while some of them fail: the check and what it says failed.
var regionTargets = map[string]struct {
	check func(r *Result, rep *Report, what string) Check
	what  string
}{
	ScenarioProvisionedDown: {downCheck, "the provisioned region is down"},
	// The carry is judged moment by moment (faultSpan): all of the load
	// while the region answers, the quotas' while it fails.
	ScenarioProvisionedFlapping: {downCheck, "the provisioned region fails by turns"},
	ScenarioSharedHangs:         {downCheck, "a pay-as-you-go region answers after every deadline and, for two minutes of it, the provisioned region is down"},
	// The same target as the region down, and then its paid capacity back:
	// success at its baseline soon after the region answers again.
	ScenarioUnreachable: {backCheck, "the provisioned region refuses connections"},
	// The same again for a quota, back before its ejection ends.
	ScenarioSharedDown: {backCheck, "a pay-as-you-go region is down"},
	// The same for a quota that answers it does not serve the model.
	ScenarioModelNotServed:       {backCheck, "a pay-as-you-go location does not serve the model"},
	ScenarioProvisionedThrottled: {throttledCheck, "the provisioned region answers part of its calls 429"},
	// The PT still serves its share of what it is sent, and the calls it
	// fails fall back to the quotas: together they can carry the load,
	// which a router that loses the calls the demoted PT fails (their
	// retries finding the budget spent) does not serve.
	ScenarioProvisionedBrownout: {throttledCheck, "the provisioned region fails most of its calls"},
	// The same, half the calls streams: see streamCheck too.
	ScenarioBrownoutStreams:  {throttledCheck, "the provisioned region fails most of its calls, half of them streams"},
	ScenarioSharedContention: {throttledCheck, "the provisioned region is down and the pay-as-you-go regions answer half their calls 429"},
}

// Checks returns the targets of the report's scenario, if it is one of the
// scenarios named above, for the policies the report holds.
func Checks(rep *Report) []Check {
	var cs []Check
	each := func(names []string, f func(r *Result) Check) {
		for _, r := range rep.Results {
			for _, n := range names {
				if r.Policy != n {
					continue
				}
				if r.Skipped != "" {
					c := f(&Result{Policy: r.Policy})
					cs = append(cs, Check{Target: c.Target, Measured: "skipped", Skipped: true})
					continue
				}
				cs = append(cs, f(r))
			}
		}
	}
	if t, ok := regionTargets[rep.Scenario]; ok {
		each(regionwardenPolicies, func(r *Result) Check { return t.check(r, rep, t.what) })
	}
	switch rep.Scenario {
	case ScenarioBrownoutStreams:
		each(regionwardenPolicies, streamCheck)
	case ScenarioProvisionedIncident:
		each(regionwardenPolicies, func(r *Result) Check {
			return Check{
				Target:   fmt.Sprintf("%s serves at least %s of calls with no \"no regions\" error", r.Policy, pct(MinSuccess)),
				Measured: fmt.Sprintf("%s, %d \"no regions\"", pct(r.SuccessRate()), r.NoRegions),
				Pass:     r.SuccessRate() >= MinSuccess && r.NoRegions == 0,
			}
		})
		// The outage is what the blocklist does while the faults last:
		// before them the provisioned region serves every call under any
		// policy, so the whole run's success says as much about how long
		// the replay runs before and after the faults as about the outage.
		each([]string{NameBlocklist}, func(r *Result) Check {
			success, measured := r.SuccessRate(), pct(r.SuccessRate())
			if r.Fault.Requests > 0 {
				success = r.Fault.Success
				measured = fmt.Sprintf("%s while the faults last (%s of all calls)", pct(success), pct(r.SuccessRate()))
			}
			return Check{
				Target:   fmt.Sprintf("the %s reproduces the outage (under %s success)", r.Policy, pct(MaxOutageSuccess)),
				Measured: fmt.Sprintf("%s, %d \"no regions\"", measured, r.NoRegions),
				Pass:     success < MaxOutageSuccess,
			}
		})
	case ScenarioCascadingFailover:
		each(regionwardenPolicies, func(r *Result) Check {
			worst, name := 0, ""
			var parts []string
			for _, rl := range r.Regions {
				parts = append(parts, fmt.Sprintf("%s %d s", rl.Name, rl.LongestOver))
				if rl.LongestOver > worst || name == "" {
					worst, name = rl.LongestOver, rl.Name
				}
			}
			return Check{
				Target:   fmt.Sprintf("under %s no region receives more than its capacity for longer than %d s", r.Policy, MaxSecondsOver),
				Measured: "longest run over capacity: " + strings.Join(parts, ", "),
				Pass:     worst <= MaxSecondsOver,
			}
		})
	case ScenarioRetrySurge:
		each(regionwardenPolicies, func(r *Result) Check {
			c := Check{Target: fmt.Sprintf("%s makes at most %.1f attempts per call during the surge and is back to its baseline success within %s after it", r.Policy, MaxSurgeAttempts, fmtDuration(MaxRecovery))}
			if len(r.Phases) == 0 {
				c.Measured = "no surge in the replayed time"
				return c
			}
			c.Pass = true
			var parts []string
			for _, p := range r.Phases {
				back := "not back"
				if p.RecoveredAfter >= 0 {
					back = "back after " + fmtDuration(p.RecoveredAfter)
				}
				parts = append(parts, fmt.Sprintf("%.3f attempts per call, %s (baseline %s)", p.AttemptsPerRequest, back, pct(p.Baseline)))
				c.Pass = c.Pass && p.AttemptsPerRequest <= MaxSurgeAttempts && p.RecoveredAfter >= 0 && p.RecoveredAfter <= MaxRecovery
			}
			c.Measured = strings.Join(parts, "; ")
			return c
		})
	case ScenarioDownPriorities:
		each(regionwardenPolicies, func(r *Result) Check { return downCheck(r, rep, "the provisioned region is down") })
		each(regionwardenPolicies, func(r *Result) Check { return shortageCheck(r, rep) })
	case ScenarioProvisionedSlow:
		each(regionwardenPolicies, func(r *Result) Check {
			return Check{
				Target:   fmt.Sprintf("%s serves every call and sheds none while the provisioned region answers 3 s slower (%s to %s)", r.Policy, fmtDuration(rep.Fault.From), fmtDuration(rep.Fault.To)),
				Measured: fmt.Sprintf("%s of %d calls served (%s while it was slow), %d shed", pct(r.SuccessRate()), r.Requests, pct(r.Fault.Success), r.Shed),
				Pass:     r.Requests > 0 && r.Succeeded == r.Requests && r.Shed == 0,
			}
		})
	case ScenarioNearDeadline:
		each(regionwardenPolicies, func(r *Result) Check {
			return Check{
				Target: fmt.Sprintf("%s sheds at most %s of the calls while the provisioned region answers half of its calls past their deadline (%s to %s)",
					r.Policy, pct(MaxNearDeadlineShed), fmtDuration(rep.Fault.From), fmtDuration(rep.Fault.To)),
				Measured: fmt.Sprintf("%d of %d calls shed; %s served while it was slow", r.Shed, r.Requests, pct(r.Fault.Success)),
				Pass:     r.Requests > 0 && float64(r.Shed) <= MaxNearDeadlineShed*float64(r.Requests),
			}
		})
	case ScenarioTotalOutage:
		each(regionwardenPolicies, func(r *Result) Check {
			f := r.Fault
			back, ok := backWithin(f, MaxOutageRecovery)
			return Check{
				Target: fmt.Sprintf("while every region is down (%s to %s), %s makes at most %.1f attempt per call, and its success is back to its baseline within %s after the outage",
					fmtDuration(rep.Fault.From), fmtDuration(rep.Fault.To), r.Policy, MaxOutageAttempts, fmtDuration(MaxOutageRecovery)),
				Measured: fmt.Sprintf("%.3f attempts per call; success %s (baseline %s, the first 10 s window within one point of it)", f.AttemptsPerRequest, back, pct(f.Baseline)),
				Pass:     f.Requests > 0 && f.AttemptsPerRequest <= MaxOutageAttempts && ok,
			}
		})
	case ScenarioSpillFailing:
		// A router that refuses the calls a failing region would take when
		// no other region has room serves less than every call sent once,
		// where there is room (Report.FaultCarryOnce).
		each(regionwardenPolicies, func(r *Result) Check {
			f, want := r.Fault, rep.FaultCarryOnce
			return Check{
				Target: fmt.Sprintf("while the pay-as-you-go regions fail half their calls (%s to %s), %s serves at least %s of calls, what first attempts alone serve when every call the PT cannot take goes to one of them, and no \"no regions\"",
					fmtDuration(rep.Fault.From), fmtDuration(rep.Fault.To), r.Policy, pct(want)),
				Measured: fmt.Sprintf("%s served while the faults lasted, %.3f attempts per call, %d shed, %d \"no regions\"", pct(f.Success), f.AttemptsPerRequest, r.Shed, r.NoRegions),
				Pass:     f.Requests > 0 && f.Success >= want && r.NoRegions == 0,
			}
		})
	case ScenarioSmallPTBursts:
		perSecond := rep.result(NamePerSecond)
		each(regionwardenPolicies, func(r *Result) Check {
			return windowCheck(r, perSecond)
		})
	case ScenarioPriorityPayGo:
		priorityChecks(rep, each)
	}
	// Routers that share capacity are held to one router's success and to
	// the regions' capacities wherever they are replayed (--routers-in),
	// not only in many-routers.
	cs = append(cs, replicaChecks(rep)...)
	return cs
}

// downCheck is the target while regions fail every call (what, "the
// provisioned region is down"): what the regions can carry (faultSpan)
// carried, within MaxDownAttempts, no "no regions".
func downCheck(r *Result, rep *Report, what string) Check {
	f, want := r.Fault, MinShareOfCarry*rep.FaultCarry
	return Check{
		Target: fmt.Sprintf("while %s (%s to %s), %s serves at least %s of what the regions can carry (%s of calls, so %s) with at most %.1f attempts per call and no \"no regions\"",
			what, fmtDuration(rep.Fault.From), fmtDuration(rep.Fault.To), r.Policy, pct(MinShareOfCarry), pct(rep.FaultCarry), pct(want), MaxDownAttempts),
		Measured: fmt.Sprintf("%s served (%s of what they can carry), %.3f attempts per call, %d \"no regions\"",
			pct(f.Success), pct(shareOf(f.Success, rep.FaultCarry)), f.AttemptsPerRequest, r.NoRegions),
		Pass: f.Requests > 0 && f.Success >= want && f.AttemptsPerRequest <= MaxDownAttempts && r.NoRegions == 0,
	}
}

// backCheck is downCheck and then success back to its baseline within
// MaxRecovery of the region answering again.
func backCheck(r *Result, rep *Report, what string) Check {
	c := downCheck(r, rep, what)
	back, ok := backWithin(r.Fault, MaxRecovery)
	c.Target += fmt.Sprintf(", and its success is back to its baseline within %s after", fmtDuration(MaxRecovery))
	c.Measured += fmt.Sprintf("; success %s (baseline %s)", back, pct(r.Fault.Baseline))
	c.Pass = c.Pass && ok
	return c
}

// backWithin says when success was back to its baseline after the fault,
// and whether that was within d.
func backWithin(f SpanResult, d time.Duration) (string, bool) {
	if f.BackAfter() < 0 {
		return "not back within the replay", false
	}
	return "back " + fmtDuration(f.BackAfter()) + " after it", f.BackAfter() <= d
}

// throttledCheck holds a column, while regions refuse part of their calls
// with 429 (what says how), to serving at least MinShareOfCarry of what the
// regions can carry (Report.FaultCarry: what each answers, up to its quota),
// and to sending the pay-as-you-go regions, where 429s spill, no more than
// their quota for more than one second in a row.
func throttledCheck(r *Result, rep *Report, what string) Check {
	carry := rep.FaultCarry
	want := MinShareOfCarry * carry
	c := Check{Target: fmt.Sprintf("while %s (%s to %s), %s serves at least %s of what the regions answer within their quotas (%s of calls, so %s), and no pay-as-you-go region receives more than its quota for more than 1 s in a row",
		what, fmtDuration(rep.Fault.From), fmtDuration(rep.Fault.To), r.Policy, pct(MinShareOfCarry), pct(carry), pct(want))}
	worst := 0
	var parts []string
	for _, rl := range r.Regions {
		if rl.Tier == string(table.TierProvisioned) {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %d s", rl.Name, rl.LongestOver))
		worst = max(worst, rl.LongestOver)
	}
	f := r.Fault
	c.Measured = fmt.Sprintf("%s served while the faults lasted (%s of what can be carried), %.3f attempts per call; longest run over quota: %s",
		pct(f.Success), pct(shareOf(f.Success, carry)), f.AttemptsPerRequest, strings.Join(parts, ", "))
	c.Pass = f.Requests > 0 && f.Success >= want && worst <= 1
	return c
}

// streamCheck holds a column to serving its streamed calls within
// MaxStreamGap of its unary ones. A region refuses a stream before its
// first chunk as it refuses a unary call, and nothing has reached the caller
// then: the stream can be retried as the unary call is, so the two are
// served alike but for the streams a deadline cuts after they began.
func streamCheck(r *Result) Check {
	streams, unary := r.StreamSuccess(), r.UnarySuccess()
	return Check{
		Target: fmt.Sprintf("%s serves its streamed calls within %.0f points of its unary ones", r.Policy, 100*MaxStreamGap),
		Measured: fmt.Sprintf("streams %s served of %d, unary calls %s of %d",
			pct(streams), r.Streams, pct(unary), r.Requests-r.Streams),
		Pass: r.Streams > 0 && r.Requests > r.Streams && streams >= unary-MaxStreamGap,
	}
}

// windowCheck holds a column that meters a small PT over its window to
// spilling at most MaxWindowSpill of what the per-second column spills to
// pay-as-you-go, with no 429 from the PT. The comparison needs the
// per-second column to spill something: otherwise the replay shows nothing.
func windowCheck(r, perSecond *Result) Check {
	c := Check{Target: fmt.Sprintf("%s, metering the PT over its window, spills to pay-as-you-go at most %s of the calls %s spills, and the PT answers it no 429",
		r.Policy, pct(MaxWindowSpill), NamePerSecond)}
	if perSecond == nil || perSecond.Skipped != "" {
		c.Measured = "no per-second column to compare with"
		return c
	}
	spill, base, throttled := r.PayGo(), perSecond.PayGo(), r.ptThrottled()
	c.Measured = fmt.Sprintf("%d calls spilled against %d (%s), %d 429s from the PT", spill, base, pct(shareOf(float64(spill), float64(base))), throttled)
	c.Pass = base > 0 && float64(spill) <= MaxWindowSpill*float64(base) && throttled == 0
	return c
}

// priorityChecks adds, through each, the targets of the priority-paygo
// scenario: while the PT is full and standard pay-as-you-go throttles, regionwarden serves every
// critical call, the overflow through Priority PayGo; a policy that knows
// no pay-as-you-go tiers loses critical calls in the same conditions, which
// shows the conditions bite. The conditions are checked as well as the
// outcome: the load asks more of the PT than it has, and standard
// pay-as-you-go answered 429s in the policy's own run.
func priorityChecks(rep *Report, each func(names []string, f func(r *Result) Check)) {
	ptFull := rep.Rate > rep.PTCalls
	conditions := fmt.Sprintf("while the PT is full (the load asks %s calls/s of a PT that serves %s) and standard pay-as-you-go throttles",
		trimFloat(rep.Rate), trimFloat(rep.PTCalls))
	measure := func(r *Result) (crit PriorityResult, standard429 int64, msg string) {
		if p := r.Priority(table.PriorityCritical); p != nil {
			crit = *p
		}
		for _, rl := range r.Regions {
			standard429 += rl.Full[emulator.TierStandard]
		}
		var parts []string
		for _, p := range r.Priorities {
			parts = append(parts, fmt.Sprintf("%s %s of %d (PT %d, Priority PayGo %d, standard %d, Flex %d)", p.Priority, pct(p.SuccessRate()), p.Requests,
				p.ByTraffic[trafficProvisioned], p.ByTraffic[trafficPriority], p.ByTraffic[trafficStandard], p.ByTraffic[trafficFlex]))
		}
		msg = fmt.Sprintf("%s; critical calls lost: %s; the PT served %.2f calls/s; standard pay-as-you-go answered %d 429s",
			strings.Join(parts, "; "), failures(crit.Errors), ratio(r.Provisioned, int64(rep.Duration/time.Second)), standard429)
		return crit, standard429, msg
	}
	each(regionwardenPolicies, func(r *Result) Check {
		crit, standard429, msg := measure(r)
		return Check{
			Target:   fmt.Sprintf("%s, %s serves 100%% of critical calls, what the PT cannot take through Priority PayGo", conditions, r.Policy),
			Measured: msg,
			Pass:     ptFull && standard429 > 0 && crit.Requests > 0 && crit.Succeeded == crit.Requests && crit.ByTraffic[trafficPriority] > 0,
		}
	})
	each([]string{NameBlocklist, NameAllowlist}, func(r *Result) Check {
		crit, standard429, _ := measure(r)
		return Check{
			Target:   fmt.Sprintf("the %s, which knows no pay-as-you-go tiers, loses critical calls in the same conditions (under 100%%)", r.Policy),
			Measured: fmt.Sprintf("critical %s of %d; standard pay-as-you-go answered %d 429s", pct(crit.SuccessRate()), crit.Requests, standard429),
			Pass:     ptFull && standard429 > 0 && crit.Requests > 0 && crit.Succeeded < crit.Requests,
		}
	})
}

// shortageCheck is the target of a shortage of calls of several
// priorities: while the faults last, critical calls are served at least
// MinShareOfCarry of what the regions can carry of them when their room goes
// to the highest priority first (Report.PriorityCarry), and each priority is
// served at least as much as the one below it: the lowest is shed first.
func shortageCheck(r *Result, rep *Report) Check {
	want := MinShareOfCarry * rep.PriorityCarry[table.PriorityCritical]
	c := Check{Target: fmt.Sprintf("while the provisioned region is down (%s to %s), %s serves at least %s of critical calls (%s of what the other regions can carry of them, their room going to critical calls first), and every priority at least as much as the one below it",
		fmtDuration(rep.Fault.From), fmtDuration(rep.Fault.To), r.Policy, pct(want), pct(MinShareOfCarry))}
	var parts []string
	prev, ok := 2.0, true
	for _, pr := range highestFirst {
		p := r.Priority(pr)
		if p == nil || p.FaultRequests == 0 {
			ok = false
			parts = append(parts, fmt.Sprintf("no %s calls while the faults lasted", pr))
			continue
		}
		got := p.FaultSuccess()
		parts = append(parts, fmt.Sprintf("%s %s of %d (a priority queue: %s)", pr, pct(got), p.FaultRequests, pct(rep.PriorityCarry[pr])))
		ok = ok && got <= prev
		if pr == table.PriorityCritical {
			ok = ok && got >= want
		}
		prev = got
	}
	c.Measured = "served while the faults lasted: " + strings.Join(parts, ", ")
	c.Pass = ok
	return c
}

// shareOf is the share a is of b, 0 when b is 0.
func shareOf(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
