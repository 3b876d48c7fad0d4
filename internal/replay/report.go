package replay

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/regionwarden/regionwarden/internal/emulator"
	"github.com/regionwarden/regionwarden/router/table"
)

// Report is one scenario replayed against a set of policies.
type Report struct {
	// Scenario and Description are the scenario's.
	Scenario, Description string
	// Duration is the scenario time replayed; Scale the compression (a
	// policy with a lower MaxScale has its own, in Result.Scale); Wall the
	// real time the replay took, every pass included, and SlowWall the part of
	// it spent in passes at a lower scale.
	Duration time.Duration
	Scale    float64
	Wall     time.Duration
	SlowWall time.Duration
	// Seed is the seed every policy got.
	Seed uint64
	// Rate is the scenario's base rate of calls per second.
	Rate float64
	// Phases are the scenario's load phases within Duration.
	Phases []Phase
	// Fault is the span of the scenario's faults within Duration, from the
	// first one's start to the last one's end; zero when it has none.
	Fault Span
	// FaultCarry is the share of the load during Fault that the regions can
	// carry (their capacity over the load's rate, at most 1), each region
	// only what it answers of it within the load's deadline, under its
	// faults and with its own latency's tail (faultSpan): what a policy can
	// serve then.
	FaultCarry float64
	// FaultCarryOnce is the share of the load during Fault that the regions
	// serve when every call is sent once, and not retried, to the region
	// with room that answers most of what it is sent (carryOnce).
	FaultCarryOnce float64
	// PriorityCarry is, for a load of several priorities, the share of each
	// priority's calls during Fault that the regions can carry when their
	// room goes to the highest priority first (critical, then default,
	// then sheddable), as a priority queue would give it (priorityCarry).
	PriorityCarry map[table.Priority]float64
	// PTCalls is what the scenario's PTs can serve together, in calls per
	// second of the scenario's typical size.
	PTCalls float64
	// Results are one per policy, in the order given to Run.
	Results []*Result
}

// Result is what one policy made of a scenario.
type Result struct {
	// Policy is the policy's name.
	Policy string
	// Skipped says why the policy did not run; every other field is then zero.
	Skipped string
	// Scale is the time scale the policy was replayed at.
	Scale float64
	// Requests is the number of calls made; Succeeded how many succeeded;
	// Provisioned how many of those the PT served.
	Requests, Succeeded, Provisioned int64
	// Attempts is the number of calls that reached a region, retries included.
	Attempts int64
	// NoRegions counts calls refused with "no regions to run"; Shed those the
	// policy refused early with a Retry-After.
	NoRegions, Shed int64
	// Errors counts failed calls by ErrorKind name.
	Errors map[string]int64
	// P50 and P99 are the latencies of successful calls, scenario time,
	// retries included.
	P50, P99 time.Duration
	// LagP99 and LagMax are how late (scenario time) the load generator
	// sent calls against its schedule: a measure of the replay's fidelity
	// on a busy machine, where a stalled process sends a backlog at once.
	LagP99, LagMax time.Duration
	// Sessions counts finished client sessions; CleanSessions those in which
	// every call succeeded.
	Sessions, CleanSessions int64
	// Streams counts the calls made as streams (the load's streamShare);
	// StreamsSucceeded those served to their last chunk.
	Streams, StreamsSucceeded int64
	// Priorities are the calls of each priority the load sent (critical,
	// default, sheddable; those it sent none of are absent).
	Priorities []PriorityResult
	// Regions is the load each region received, in the scenario's order.
	Regions []RegionLoad
	// Series is the run in bucketWidth buckets of call start time.
	Series []Bucket
	// Phases measure each load phase of the report.
	Phases []PhaseResult
	// Fault measures the report's fault span, if it has one.
	Fault SpanResult
}

// SuccessRate is the share of calls that succeeded.
func (r *Result) SuccessRate() float64 { return ratio(r.Succeeded, r.Requests) }

// PayGo is how many successful calls pay-as-you-go served: the calls a PT
// did not.
func (r *Result) PayGo() int64 { return r.Succeeded - r.Provisioned }

// ptThrottled is how many calls the regions answered 429 because a PT was
// full.
func (r *Result) ptThrottled() int64 {
	var n int64
	for _, rl := range r.Regions {
		n += rl.Full[emulator.FullProvisioned]
	}
	return n
}

// result is the result of the named policy, or nil.
func (rep *Report) result(name string) *Result {
	for _, r := range rep.Results {
		if r.Policy == name {
			return r
		}
	}
	return nil
}

// StreamSuccess is the share of the calls made as streams that were served.
func (r *Result) StreamSuccess() float64 { return ratio(r.StreamsSucceeded, r.Streams) }

// UnarySuccess is the share of the calls not made as streams that were
// served.
func (r *Result) UnarySuccess() float64 {
	return ratio(r.Succeeded-r.StreamsSucceeded, r.Requests-r.Streams)
}

// PTShare is the share of successful calls that the PT served.
func (r *Result) PTShare() float64 { return ratio(r.Provisioned, r.Succeeded) }

// AttemptsPerRequest is how many calls reached a region per call made.
func (r *Result) AttemptsPerRequest() float64 { return ratio(r.Attempts, r.Requests) }

// Region returns the load of the named region, or nil.
func (r *Result) Region(name string) *RegionLoad {
	for i := range r.Regions {
		if r.Regions[i].Name == name {
			return &r.Regions[i]
		}
	}
	return nil
}

// Priority returns the calls of priority pr, or nil when the load sent none.
func (r *Result) Priority(pr table.Priority) *PriorityResult {
	for i := range r.Priorities {
		if r.Priorities[i].Priority == pr {
			return &r.Priorities[i]
		}
	}
	return nil
}

// PriorityResult is how the calls of one priority went.
type PriorityResult struct {
	Priority table.Priority
	// Requests is the calls made; Succeeded how many succeeded.
	Requests, Succeeded int64
	// ByTraffic counts the successful calls by the traffic type that served
	// them (usageMetadata.trafficType).
	ByTraffic map[string]int64
	// Errors counts the failed calls by ErrorKind name.
	Errors map[string]int64
	// FaultRequests and FaultSucceeded are the calls that started while the
	// scenario's faults lasted (Report.Fault), and how many succeeded.
	FaultRequests, FaultSucceeded int64
}

// highestFirst are the priorities a load sends, critical first: the order
// in which the report lists them and a shortage serves them.
var highestFirst = []table.Priority{table.PriorityCritical, table.PriorityDefault, table.PrioritySheddable}

// SuccessRate is the share of the priority's calls that succeeded.
func (p *PriorityResult) SuccessRate() float64 { return ratio(p.Succeeded, p.Requests) }

// FaultSuccess is the share of the priority's calls that started while the
// faults lasted that succeeded.
func (p *PriorityResult) FaultSuccess() float64 { return ratio(p.FaultSucceeded, p.FaultRequests) }

// RegionLoad is what one region received from one policy, counted by
// scenario second of arrival at the region.
type RegionLoad struct {
	Name, Tier string
	// Capacity is the region's PT plus pay-as-you-go capacity in calls per
	// second of the scenario's typical size; zero is unlimited.
	Capacity float64
	// Requests is every call that reached the region; Peak the most in one second.
	Requests, Peak int64
	// SecondsOver counts the seconds in which more calls arrived than
	// Capacity; LongestOver is the longest run of such seconds.
	SecondsOver, LongestOver int
	// Full counts the region's 429s by the capacity that was full: its PT
	// (emulator.FullProvisioned) or a pay-as-you-go tier.
	Full map[string]int64
	// Seconds are the region's counts second by second of scenario time,
	// for the page's timeline (Page.Timeline).
	Seconds []emulator.SecondStats
}

// NewRegionLoad is the load an emulated region's stats show. Cut the stats
// with RegionStats.Until to count only the seconds a replay covers.
func NewRegionLoad(rs emulator.RegionStats) RegionLoad {
	return RegionLoad{
		Name: rs.Name, Tier: string(rs.Tier), Capacity: rs.CapacityRequestsPerSecond,
		Requests: rs.Requests, Peak: rs.PeakRequestsPerSecond,
		SecondsOver: rs.SecondsOverCapacity, LongestOver: rs.LongestOverCapacity,
		Full: rs.Full, Seconds: rs.PerSecond,
	}
}

// Bucket is one bucketWidth of a run, by call start time.
type Bucket struct {
	Start                         time.Duration
	Requests, Succeeded, Attempts int64
}

// Span is a stretch of scenario time, From inclusive, To exclusive.
type Span struct {
	From, To time.Duration
}

// Phase is a span of multiplied load.
type Phase struct {
	Span
	Multiplier float64
}

// SpanResult is how one policy did in and after a span, by the start time of
// its calls.
type SpanResult struct {
	Span
	// Requests is the calls that started in the span.
	Requests int64
	// AttemptsPerRequest and Success are measured over the span: attempts
	// that reached a region in it, per call that started in it.
	AttemptsPerRequest, Success float64
	// Baseline is the success rate of the two minutes before the span.
	Baseline float64
	// RecoveredAfter is the time from the span's end to the end of the first
	// 10 s window whose success is within one point of Baseline; -1 if none.
	RecoveredAfter time.Duration
}

// BackAfter is the time from the span's end to the start of the first 10 s
// window back within one point of Baseline: from then on, success is back.
// It is negative when success never came back within the replay.
func (s SpanResult) BackAfter() time.Duration {
	if s.RecoveredAfter < 0 {
		return -1
	}
	return s.RecoveredAfter - bucketWidth
}

// PhaseResult is how one policy did in and after a load phase.
type PhaseResult struct {
	SpanResult
	Multiplier float64
}

// Page is the docs page of a set of replays.
type Page struct {
	// Command is how the page was made, shown at its top.
	Command string
	// ChartDir is where the charts are, relative to the page; empty leaves
	// the charts out.
	ChartDir string
	// Notes are extra paragraphs after the introduction (e.g. skipped
	// policies, the machine).
	Notes []string
	// Reports are the scenarios, in order.
	Reports []*Report
	// Repeats, when set, holds for each report of Reports (same index) its
	// scenario replayed with each seed of a run of them, the report itself
	// first: each scenario's page then says each policy's success over the
	// seeds (mean, least and most), and the page's top its mean over every
	// scenario and seed (writeSummary).
	Repeats [][]*Report
	// Timeline, when set, is the width of the buckets of scenario time in
	// which each scenario's page shows, for each policy, what each region
	// was sent and how it answered (writeTimeline): where a policy's calls
	// went as a fault came and went, which the totals do not say.
	Timeline time.Duration
}

// ChartFile is the file name of a scenario's chart.
func ChartFile(scenario string) string { return scenario + ".png" }

// WriteMarkdown writes the page: per scenario a table of the policies, the
// load each region received, the load phases and the targets the scenario
// must show, and its chart.
func WriteMarkdown(w io.Writer, pg Page) error {
	var b strings.Builder
	b.WriteString("# Incident replays\n\n")
	b.WriteString("Each scenario in `test/scenarios` is replayed against every policy: the same open-loop load " +
		"(Poisson arrivals, client sessions of 50 to 100 sequential calls, one deadline per call; generateContent calls, " +
		"and streamGenerateContent for the share of them a scenario's streamShare makes streams) with the same seed: " +
		"every policy gets the same calls, the same ones streamed (each policy's schedule shifted by a fraction of the mean gap between calls, " +
		"so that the policies' calls do not reach the machine in batches), " +
		"on one compressed clock, each policy against its own set of emulated regions (`internal/emulator`): the policies in " +
		"process call them over gRPC with the real aiplatform client, the router binary over Vertex REST, the caller's calls " +
		"as they came. Times are scenario time. Percentages are of calls; a shed call is one " +
		"the policy refused early with a Retry-After; \"no regions\" is the blocklist's \"no regions to run\".\n\n")
	if pg.Command != "" {
		fmt.Fprintf(&b, "Regenerate with `%s`.\n\n", pg.Command)
	}
	for _, n := range pg.Notes {
		b.WriteString(n + "\n\n")
	}
	writeSummary(&b, pg)
	for i, rep := range pg.Reports {
		writeReport(&b, rep, pg.ChartDir, pg.Timeline)
		if i < len(pg.Repeats) {
			writeRepeats(&b, pg.Repeats[i])
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeReport(b *strings.Builder, rep *Report, chartDir string, timeline time.Duration) {
	fmt.Fprintf(b, "## %s\n\n", rep.Scenario)
	if rep.Description != "" {
		fmt.Fprintf(b, "%s\n\n", strings.TrimSpace(rep.Description))
	}
	fmt.Fprintf(b, "%s of scenario time at %s calls/s, replayed at scale %g in %s, seed %d.",
		fmtDuration(rep.Duration), trimFloat(rep.Rate), rep.Scale, (rep.Wall - rep.SlowWall).Round(time.Second), rep.Seed)
	if rep.SlowWall > 0 {
		fmt.Fprintf(b, " Policies that cannot keep up at that scale replayed after, in a pass of their own: %s more.", rep.SlowWall.Round(time.Second))
	}
	b.WriteString("\n\n")
	b.WriteString("| Policy | Calls | Success | p50 | p99 | Served by PT | Attempts per call | \"No regions\" | Shed | Other failures | Sessions with no failed call | Load sent late, p99 (max) |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|\n")
	for _, r := range rep.Results {
		if r.Skipped != "" {
			fmt.Fprintf(b, "| %s | skipped: %s | | | | | | | | | | |\n", r.Policy, escape(r.Skipped))
			continue
		}
		name := r.Policy
		if r.Scale != 0 && r.Scale != rep.Scale {
			name += fmt.Sprintf(" (at scale %g)", r.Scale)
		}
		fmt.Fprintf(b, "| %s | %d | %s | %s | %s | %s | %.3f | %d | %d | %s | %s | %s (%s) |\n",
			name, r.Requests, pct(r.SuccessRate()), fmtLatency(r.P50), fmtLatency(r.P99), pct(r.PTShare()),
			r.AttemptsPerRequest(), r.NoRegions, r.Shed, otherErrors(r.Errors), sessions(r),
			fmtSeconds(r.LagP99), fmtSeconds(r.LagMax))
	}
	b.WriteString("\n")
	writeStreams(b, rep)
	writeRegions(b, rep)
	writeTimeline(b, rep, timeline)
	writePriorities(b, rep)
	writeFault(b, rep)
	writePhases(b, rep)
	writeChecks(b, rep)
	if chartDir != "" {
		fmt.Fprintf(b, "![Success rate over time, %s](%s/%s)\n\n", rep.Scenario, chartDir, ChartFile(rep.Scenario))
	}
}

// ran is the results of the policies that ran (were not skipped) and of
// which has holds what a section shows.
func (rep *Report) ran(has func(*Result) bool) []*Result {
	var out []*Result
	for _, r := range rep.Results {
		if r.Skipped == "" && has(r) {
			out = append(out, r)
		}
	}
	return out
}

// writeStreams writes, where the load streamed some of its calls, how the
// streams fared against the unary calls of the same run: a stream that
// breaks off after its first chunk cannot be retried, so a policy's streams
// may be served less than its unary calls.
func writeStreams(b *strings.Builder, rep *Report) {
	ran := rep.ran(func(r *Result) bool { return r.Streams > 0 })
	if len(ran) == 0 {
		return
	}
	b.WriteString("Streamed calls (streamGenerateContent) and unary ones (generateContent), each served to the end:\n\n")
	b.WriteString("| Policy | Streams | Streams served | Unary calls | Unary calls served |\n|---|---:|---:|---:|---:|\n")
	for _, r := range ran {
		fmt.Fprintf(b, "| %s | %d | %s | %d | %s |\n", r.Policy, r.Streams, pct(r.StreamSuccess()), r.Requests-r.Streams, pct(r.UnarySuccess()))
	}
	b.WriteString("\n")
}

// writeRegions writes what each policy sent to each region against its capacity.
func writeRegions(b *strings.Builder, rep *Report) {
	ran := rep.ran(func(r *Result) bool { return len(r.Regions) > 0 })
	if len(ran) == 0 {
		return
	}
	b.WriteString("Load sent to each region: calls that reached it, the busiest second, and the seconds in which it " +
		"received more than its capacity (the longest run of such seconds in brackets).\n\n")
	b.WriteString("| Policy |")
	for _, rl := range ran[0].Regions {
		capacity := "unlimited"
		if rl.Capacity > 0 {
			capacity = trimFloat(rl.Capacity) + "/s"
		}
		fmt.Fprintf(b, " %s (%s, %s) |", rl.Name, rl.Tier, capacity)
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(ran[0].Regions)) + "\n")
	for _, r := range ran {
		fmt.Fprintf(b, "| %s |", r.Policy)
		for _, rl := range r.Regions {
			fmt.Fprintf(b, " %d calls, peak %d/s, over %d s (%d s) |", rl.Requests, rl.Peak, rl.SecondsOver, rl.LongestOver)
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
}

// writeTimeline writes, for each policy, a table of the calls each region
// was sent in each bucket of scenario time of width (none when width is
// zero), and how it answered them: served, 429, failed, cancelled (the
// caller's deadline ran out first).
func writeTimeline(b *strings.Builder, rep *Report, width time.Duration) {
	if width <= 0 {
		return
	}
	ran := rep.ran(func(r *Result) bool { return len(r.Regions) > 0 })
	buckets := int((rep.Duration + width - 1) / width)
	for _, r := range ran {
		fmt.Fprintf(b, "Each region, %s at a time, %s: calls sent / served / 429 / failed / cancelled; \"(PT n)\" after the 429s: n of them because the region's PT was full.\n\n", fmtDuration(width), r.Policy)
		b.WriteString("| From |")
		for _, rl := range r.Regions {
			fmt.Fprintf(b, " %s |", rl.Name)
		}
		b.WriteString("\n|---|" + strings.Repeat("---:|", len(r.Regions)) + "\n")
		sums := make([][]emulator.SecondStats, len(r.Regions))
		for i, rl := range r.Regions {
			sums[i] = make([]emulator.SecondStats, buckets)
			for _, s := range rl.Seconds {
				k := int(time.Duration(s.Second) * time.Second / width)
				if k >= buckets {
					continue
				}
				t := &sums[i][k]
				t.Requests += s.Requests
				t.Served += s.Served
				t.Throttled += s.Throttled
				t.PTFull += s.PTFull
				t.Failed += s.Failed
				t.Cancelled += s.Cancelled
			}
		}
		for k := range buckets {
			fmt.Fprintf(b, "| %s |", fmtDuration(time.Duration(k)*width))
			for i := range r.Regions {
				t := sums[i][k]
				full := ""
				if t.PTFull > 0 {
					full = fmt.Sprintf(" (PT %d)", t.PTFull)
				}
				fmt.Fprintf(b, " %d / %d / %d%s / %d / %d |", t.Requests, t.Served, t.Throttled, full, t.Failed, t.Cancelled)
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
}

// writePriorities writes, for a load that sends priorities, how the calls of
// each priority went and which traffic type served them.
func writePriorities(b *strings.Builder, rep *Report) {
	ran := rep.ran(func(r *Result) bool {
		return len(r.Priorities) > 1 || (len(r.Priorities) == 1 && r.Priorities[0].Priority != table.PriorityDefault)
	})
	if len(ran) == 0 {
		return
	}
	b.WriteString("Calls by priority (X-Regionwarden-Priority): success, and the traffic type that served them " +
		"(PT: PROVISIONED_THROUGHPUT, standard: ON_DEMAND, Priority: ON_DEMAND_PRIORITY, Flex: ON_DEMAND_FLEX).\n\n")
	during := func(p *PriorityResult) string { return "" }
	if f := rep.Fault; f.To > 0 {
		during = func(p *PriorityResult) string { return " " + pct(p.FaultSuccess()) + " |" }
		fmt.Fprintf(b, "| Policy | Priority | Calls | Success | Success while the faults last (%s to %s) | PT | Standard | Priority | Flex | Failures |\n", fmtDuration(f.From), fmtDuration(f.To))
		b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n")
	} else {
		b.WriteString("| Policy | Priority | Calls | Success | PT | Standard | Priority | Flex | Failures |\n")
		b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---|\n")
	}
	for _, r := range ran {
		for i := range r.Priorities {
			p := &r.Priorities[i]
			fmt.Fprintf(b, "| %s | %s | %d | %s |%s %d | %d | %d | %d | %s |\n", r.Policy, p.Priority, p.Requests, pct(p.SuccessRate()), during(p),
				p.ByTraffic[trafficProvisioned], p.ByTraffic[trafficStandard], p.ByTraffic[trafficPriority], p.ByTraffic[trafficFlex], failures(p.Errors))
		}
	}
	b.WriteString("\n")
}

// writeFault writes how each policy did while the scenario's faults lasted,
// and how soon after them its success was back.
func writeFault(b *strings.Builder, rep *Report) {
	f := rep.Fault
	if f.To == 0 {
		return
	}
	fmt.Fprintf(b, "While the faults last, from %s to %s (the regions can carry %s of the calls, each only what it answers within the deadline):\n\n", fmtDuration(f.From), fmtDuration(f.To), pct(rep.FaultCarry))
	b.WriteString("| Policy | Calls | Success during | Attempts per call during | Success in the 2 min before | Back to that after |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|\n")
	for _, r := range rep.Results {
		if r.Skipped != "" {
			continue
		}
		back := "not within the replay"
		if r.Fault.BackAfter() >= 0 {
			back = fmtDuration(r.Fault.BackAfter())
		}
		fmt.Fprintf(b, "| %s | %d | %s | %.3f | %s | %s |\n", r.Policy, r.Fault.Requests, pct(r.Fault.Success), r.Fault.AttemptsPerRequest, pct(r.Fault.Baseline), back)
	}
	b.WriteString("\n")
}

// writePhases writes how each policy did in and after each load phase.
func writePhases(b *strings.Builder, rep *Report) {
	for i, ph := range rep.Phases {
		fmt.Fprintf(b, "Load ×%s from %s to %s:\n\n", trimFloat(ph.Multiplier), fmtDuration(ph.From), fmtDuration(ph.To))
		b.WriteString("| Policy | Attempts per call during | Success during | Success in the 2 min before | Back to that within |\n")
		b.WriteString("|---|---:|---:|---:|---:|\n")
		for _, r := range rep.Results {
			if r.Skipped != "" || i >= len(r.Phases) {
				continue
			}
			p := r.Phases[i]
			back := "not within the replay"
			if p.RecoveredAfter >= 0 {
				back = fmtDuration(p.RecoveredAfter)
			}
			fmt.Fprintf(b, "| %s | %.3f | %s | %s | %s |\n", r.Policy, p.AttemptsPerRequest, pct(p.Success), pct(p.Baseline), back)
		}
		b.WriteString("\n")
	}
}

// writeChecks writes the scenario's targets and whether each was met.
func writeChecks(b *strings.Builder, rep *Report) {
	cs := Checks(rep)
	if len(cs) == 0 {
		return
	}
	b.WriteString("What this scenario must show:\n\n")
	for _, c := range cs {
		mark := "met"
		switch {
		case c.Skipped:
			mark = "not measured"
		case !c.Pass:
			mark = "**missed**"
		}
		fmt.Fprintf(b, "- %s: %s (%s).\n", c.Target, c.Measured, mark)
	}
	b.WriteString("\n")
}

// failures writes every kind of failure with its count, "0" for none.
func failures(m map[string]int64) string {
	keys := slices.Sorted(maps.Keys(m))
	var parts []string
	for _, k := range keys {
		if m[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", m[k], k))
		}
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, ", ")
}

func otherErrors(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		if k != NoRegions.String() && k != Shed.String() && m[k] > 0 {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return "0"
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d %s", m[k], k)
	}
	return strings.Join(parts, ", ")
}

func sessions(r *Result) string {
	if r.Sessions == 0 {
		return "none finished"
	}
	return fmt.Sprintf("%s of %d", pct(ratio(r.CleanSessions, r.Sessions)), r.Sessions)
}

// pct formats a share as a percentage with two decimals.
func pct(x float64) string { return fmt.Sprintf("%.2f%%", 100*x) }

func fmtSeconds(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

func fmtLatency(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

// fmtDuration writes a duration in minutes and seconds: 30m, 10m30s, 20s.
func fmtDuration(d time.Duration) string {
	d = d.Round(time.Second)
	m, sec := int64(d/time.Minute), int64(d%time.Minute/time.Second)
	switch {
	case m == 0:
		return fmt.Sprintf("%ds", sec)
	case sec == 0:
		return fmt.Sprintf("%dm", m)
	default:
		return fmt.Sprintf("%dm%02ds", m, sec)
	}
}

func trimFloat(x float64) string { return strings.TrimSuffix(fmt.Sprintf("%g", x), ".0") }

func escape(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "|", "\\|"), "\n", " ") }

// Spread is one policy's success over several runs (one scenario's seeds,
// or several scenarios): the mean, the least and the most, of its success
// over the whole replay and during the faults (Result.Fault). The During
// figures are NaN when no run had a fault span.
type Spread struct {
	Policy                              string
	Runs                                int
	Mean, Least, Most                   float64
	DuringMean, DuringLeast, DuringMost float64
	faultRuns                           int
}

// Spreads is each policy's Spread over reports, in the order the policies
// first appear; a run a policy was skipped in does not count for it.
func Spreads(reports []*Report) []Spread {
	var runs []successRun
	for _, rep := range reports {
		for _, r := range rep.Results {
			if r.Skipped != "" {
				continue
			}
			pr := successRun{policy: r.Policy, success: r.SuccessRate()}
			if rep.Fault.To > 0 {
				pr.during = &r.Fault.Success
			}
			runs = append(runs, pr)
		}
	}
	return spreadsOf(runs)
}

// successRun is one policy's success in one run, and during the run's faults
// when it had a fault span.
type successRun struct {
	policy  string
	success float64
	during  *float64
}

// spreadsOf is each policy's Spread over runs, in the order the policies
// first appear.
func spreadsOf(runs []successRun) []Spread {
	var out []Spread
	at := map[string]int{}
	for _, r := range runs {
		i, ok := at[r.policy]
		if !ok {
			i = len(out)
			at[r.policy] = i
			out = append(out, Spread{Policy: r.policy})
		}
		out[i].add(r.success, r.during)
	}
	for i := range out {
		out[i].finish()
	}
	return out
}

// add counts one run: its success x, and its success during the faults
// when it had a fault span.
func (sp *Spread) add(x float64, during *float64) {
	if sp.Runs == 0 {
		sp.Least, sp.Most = x, x
	}
	sp.Runs++
	sp.Mean += x
	sp.Least, sp.Most = min(sp.Least, x), max(sp.Most, x)
	if during == nil {
		return
	}
	d := *during
	if sp.faultRuns == 0 {
		sp.DuringLeast, sp.DuringMost = d, d
	}
	sp.faultRuns++
	sp.DuringMean += d
	sp.DuringLeast, sp.DuringMost = min(sp.DuringLeast, d), max(sp.DuringMost, d)
}

// finish turns the sums add kept into means.
func (sp *Spread) finish() {
	sp.Mean /= float64(sp.Runs)
	if sp.faultRuns == 0 {
		sp.DuringMean, sp.DuringLeast, sp.DuringMost = math.NaN(), math.NaN(), math.NaN()
		return
	}
	sp.DuringMean /= float64(sp.faultRuns)
}

// writeRepeats writes each policy's success over the seeds a scenario was
// replayed with (runs: the page's report first).
func writeRepeats(b *strings.Builder, runs []*Report) {
	if len(runs) < 2 {
		return
	}
	first, last := runs[0].Seed, runs[len(runs)-1].Seed
	fmt.Fprintf(b, "Over %d replays with seeds %d to %d (the tables above are seed %d's): success, the mean and, in brackets, the least and the most.\n\n", len(runs), first, last, first)
	writeSpreads(b, "Replays", Spreads(runs))
}

// writeSpreads writes a table of spreads, runs counted under the column
// named runs.
func writeSpreads(b *strings.Builder, runs string, spreads []Spread) {
	fmt.Fprintf(b, "| Policy | %s | Success | Success during the faults |\n|---|---:|---:|---:|\n", runs)
	for _, sp := range spreads {
		during := "-"
		if !math.IsNaN(sp.DuringMean) {
			during = spreadCell(sp.DuringMean, sp.DuringLeast, sp.DuringMost)
		}
		fmt.Fprintf(b, "| %s | %d | %s | %s |\n", sp.Policy, sp.Runs, spreadCell(sp.Mean, sp.Least, sp.Most), during)
	}
	b.WriteString("\n")
}

// spreadCell is a mean with its least and most.
func spreadCell(mean, least, most float64) string {
	return fmt.Sprintf("%s (%s to %s)", pct(mean), pct(least), pct(most))
}

// String is the spread on one line: its success, and its success during
// the faults when the runs had any.
func (sp Spread) String() string {
	line := spreadCell(sp.Mean, sp.Least, sp.Most)
	if !math.IsNaN(sp.DuringMean) {
		line += ", during the faults " + spreadCell(sp.DuringMean, sp.DuringLeast, sp.DuringMost)
	}
	return line
}

// writeSummary writes, for a page of several scenarios, each policy's mean
// success over them (each scenario weighing the same: the mean of its
// seeds, when it has several), the least and the most of those per-scenario
// means: one line to compare policies, or two builds, by. Only the policies
// that ran in every scenario are in it: a mean over other scenarios than
// the others' compares nothing.
func writeSummary(b *strings.Builder, pg Page) {
	if len(pg.Reports) < 2 {
		return
	}
	var means []successRun
	for i, rep := range pg.Reports {
		runs := []*Report{rep}
		if i < len(pg.Repeats) && len(pg.Repeats[i]) > 0 {
			runs = pg.Repeats[i]
		}
		for _, sp := range Spreads(runs) {
			pr := successRun{policy: sp.Policy, success: sp.Mean}
			if !math.IsNaN(sp.DuringMean) {
				pr.during = &sp.DuringMean
			}
			means = append(means, pr)
		}
	}
	var all []Spread
	for _, sp := range spreadsOf(means) {
		if sp.Runs == len(pg.Reports) {
			all = append(all, sp)
		}
	}
	if len(all) == 0 {
		return
	}
	fmt.Fprintf(b, "Over the %d scenarios of this page (each the mean of its replays), the policies that ran in all of them: success, the mean and, in brackets, the scenario with the least and the one with the most.\n\n", len(pg.Reports))
	writeSpreads(b, "Scenarios", all)
}
