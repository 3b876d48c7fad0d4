package replay

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/regionwarden/regionwarden/internal/emulator"
	"github.com/regionwarden/regionwarden/router/policy"
	"github.com/regionwarden/regionwarden/router/table"
)

// TestRestResult classifies the router's REST answers: its own refusals
// apart from a region's errors that it passes on.
func TestRestResult(t *testing.T) {
	for _, tc := range []struct {
		name string
		code int
		body string
		want CallResult
	}{
		{"PT answer", 200, `{"usageMetadata":{"trafficType":"PROVISIONED_THROUGHPUT"}}`, CallResult{Provisioned: true, Traffic: "PROVISIONED_THROUGHPUT"}},
		{"on-demand answer", 200, `{"usageMetadata":{"trafficType":"ON_DEMAND"}}`, CallResult{Traffic: "ON_DEMAND"}},
		{"Priority PayGo answer", 200, `{"usageMetadata":{"trafficType":"ON_DEMAND_PRIORITY"}}`, CallResult{Traffic: "ON_DEMAND_PRIORITY"}},
		{"unreadable answer", 200, `{`, CallResult{Err: Other}},
		{"over capacity", 429, `{"error":{"code":429,"message":"over capacity: no region has headroom (priority default); retry after 1s"}}`, CallResult{Err: Shed}},
		{"shed", 429, `{"error":{"code":429,"message":"shed: calls of a higher priority go first (priority default); retry after 1s"}}`, CallResult{Err: Shed}},
		{"region 429", 429, `{"error":{"code":429,"message":"Resource exhausted. Please try again later."}}`, CallResult{Err: Throttled}},
		{"no regions", 503, `{"error":{"code":503,"message":"no regions to run"}}`, CallResult{Err: NoRegions}},
		{"region 504", 504, `{"error":{"code":504,"message":"Deadline expired before operation could complete."}}`, CallResult{Err: Timeout}},
		{"region 503", 503, `{"error":{"code":503,"message":"The service is currently unavailable."}}`, CallResult{Err: Failed}},
		{"caller fault", 400, `{"error":{"code":400,"message":"bad"}}`, CallResult{Err: Other}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := restResult(tc.code, []byte(tc.body)); got != tc.want {
				t.Errorf("restResult(%d, %s) = %+v, want %+v", tc.code, tc.body, got, tc.want)
			}
		})
	}
}

// TestPickError: a refusal after an attempt is answered with that
// attempt's failure, as the router answers it, whatever the policy refused
// the retry for; only a call refused before any attempt is shed.
func TestPickError(t *testing.T) {
	for _, tc := range []struct {
		err      error
		last     ErrorKind
		attempts int
		want     ErrorKind
	}{
		{policy.ErrShed, Other, 0, Shed},
		{policy.ErrOverCapacity, Other, 0, Shed},
		{policy.ErrOverCapacity, Failed, 1, Failed},
		{policy.ErrShed, Throttled, 2, Throttled},
		{policy.ErrBudgetExhausted, Timeout, 1, Timeout},
		{policy.ErrDeadlineExceeded, Other, 0, Timeout},
		{fmt.Errorf("blocklist: %w", ErrNoRegions), Failed, 3, NoRegions},
	} {
		if got := pickError(tc.err, tc.last, tc.attempts); got != tc.want {
			t.Errorf("pickError(%v, %v, %d) = %v, want %v", tc.err, tc.last, tc.attempts, got, tc.want)
		}
	}
}

// TestSSEResult classifies a stream of server-sent events answered 200 as
// the router relays them: served when a chunk finished the generation, with
// the traffic type the chunks name; failed when it ended early or with an
// error event (the router's break-off), timed out when that event speaks of
// a deadline.
func TestSSEResult(t *testing.T) {
	const (
		first = "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"a \"}]}}],\"usageMetadata\":{\"trafficType\":\"ON_DEMAND\"}}\r\n\r\n"
		last  = "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"b\"}]},\"finishReason\":\"STOP\"}],\"usageMetadata\":{\"trafficType\":\"PROVISIONED_THROUGHPUT\"}}\r\n\r\n"
	)
	for _, tc := range []struct {
		name string
		body string
		want CallResult
	}{
		{"whole stream", first + last, CallResult{Provisioned: true, Traffic: "PROVISIONED_THROUGHPUT"}},
		{"LF framing", strings.ReplaceAll(first+last, "\r\n", "\n"), CallResult{Provisioned: true, Traffic: "PROVISIONED_THROUGHPUT"}},
		{"ended before its last chunk", first, CallResult{Err: Failed}},
		{"broken off", first + "\r\n\r\ndata: {\"error\":{\"code\":503,\"message\":\"the region's stream broke off: connection reset\",\"status\":\"UNAVAILABLE\"}}\r\n\r\n", CallResult{Err: Failed}},
		{"cut at the deadline", first + "\r\n\r\ndata: {\"error\":{\"code\":503,\"message\":\"the region's stream broke off: context deadline exceeded\",\"status\":\"UNAVAILABLE\"}}\r\n\r\n", CallResult{Err: Timeout}},
		{"unreadable chunk", "data: {\r\n\r\n", CallResult{Err: Other}},
		{"nothing", "", CallResult{Err: Failed}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := sseResult([]byte(tc.body)); got != tc.want {
				t.Errorf("sseResult(%q) = %+v, want %+v", tc.body, got, tc.want)
			}
		})
	}
}

// TestStreamCheck holds a column's streams to its unary calls: within
// MaxStreamGap passes, further behind fails, and a run that streamed
// nothing shows nothing.
func TestStreamCheck(t *testing.T) {
	for _, tc := range []struct {
		name                               string
		streams, streamsOK, unary, unaryOK int64
		pass                               bool
	}{
		{"streams served as unary calls", 1000, 985, 1000, 990, true},
		{"streams served more", 1000, 1000, 1000, 900, true},
		{"streams behind", 1000, 900, 1000, 990, false},
		{"no streams", 0, 0, 1000, 990, false},
		{"only streams", 1000, 990, 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Result{Policy: NameRegionwarden, Requests: tc.streams + tc.unary, Succeeded: tc.streamsOK + tc.unaryOK,
				Streams: tc.streams, StreamsSucceeded: tc.streamsOK}
			if c := streamCheck(r); c.Pass != tc.pass {
				t.Errorf("streamCheck: %s (%s): pass %v, want %v", c.Target, c.Measured, c.Pass, tc.pass)
			}
		})
	}
}

// TestRegionPool renders a scenario's table as the operator would: the PT
// region provisioned and never ejectable, shared regions hinted with their
// quota, provisioned first.
func TestRegionPool(t *testing.T) {
	sc, p := scenarioPool(t, ScenarioProvisionedIncident)
	first := p.Regions[0]
	if first.Name != "europe-west1" || first.Tier != table.TierProvisioned || first.Ejectable || first.Capacity.TokensPerSecond != 15000 || first.Capacity.GSUs != 6 {
		t.Errorf("first region %+v, want the provisioned europe-west1 with 6 GSUs and 15000 tokens/s, not ejectable", first)
	}
	for _, r := range p.Regions[1:] {
		want := sc.RequestsPerSecond(sc.Region(r.Name))
		if r.Tier != table.TierShared || !r.Ejectable || r.Capacity.RequestsPerSecond != want {
			t.Errorf("region %+v, want shared, ejectable, hint %v", r, want)
		}
		if r.Endpoint == "" || !strings.HasPrefix(r.Endpoint, "127.0.0.1:") {
			t.Errorf("region %s endpoint %q, want the emulated region", r.Name, r.Endpoint)
		}
	}
}

// testScenario is test/scenarios/<name>.yaml, loaded as make replay loads it.
func testScenario(t *testing.T, name string) *emulator.Scenario {
	t.Helper()
	sc, err := emulator.LoadScenario("../../test/scenarios/" + name + ".yaml")
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// valid is sc, which a test has cut or moved, once it is checked to be a
// scenario still.
func valid(t *testing.T, sc *emulator.Scenario) *emulator.Scenario {
	t.Helper()
	if err := sc.Validate(); err != nil {
		t.Fatal(err)
	}
	return sc
}

// scenarioPool loads test/scenarios/<name>.yaml and renders its table, with
// made-up loopback endpoints, as regionPool does for a replay; the pool
// must validate.
func scenarioPool(t *testing.T, name string) (*emulator.Scenario, table.Pool) {
	t.Helper()
	sc := testScenario(t, name)
	var addrs []emulator.RegionAddr
	for i, r := range sc.Regions {
		addrs = append(addrs, emulator.RegionAddr{Name: r.Name, GRPC: fmt.Sprintf("127.0.0.1:%d", 9000+i)})
	}
	p := regionPool(sc, addrs)
	if err := p.Validate(); err != nil {
		t.Fatalf("%s: pool does not validate: %v", name, err)
	}
	return sc, p
}

// TestPhaseRecovery measures a surge from per-second counts: attempts per
// call and success during it, the baseline before it, and when success is
// back within one point of the baseline.
func TestPhaseRecovery(t *testing.T) {
	for _, tc := range []struct {
		name     string
		failFor  int // seconds after the phase that still fail half the calls
		want     time.Duration
		attempts int64
	}{
		{"back at once", 0, 10 * time.Second, 1},
		{"back after 15 s", 15, 25 * time.Second, 2},
		{"never back", 1000, -1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRecorder(10 * time.Minute)
			for s := range 600 {
				ok := int64(10)
				if s >= 240 && s < 300+tc.failFor {
					ok = 5
				}
				r.seconds[s] = secondCount{requests: 10, ok: ok, attempts: 10 * tc.attempts}
			}
			got := r.span(Span{From: 4 * time.Minute, To: 5 * time.Minute})
			if got.RecoveredAfter != tc.want {
				t.Errorf("recovered after %v, want %v", got.RecoveredAfter, tc.want)
			}
			if got.Baseline != 1 || got.Success != 0.5 || got.AttemptsPerRequest != float64(tc.attempts) {
				t.Errorf("baseline %v, success %v, attempts %v; want 1, 0.5, %d", got.Baseline, got.Success, got.AttemptsPerRequest, tc.attempts)
			}
		})
	}
}

// TestSessionPool gives each call to an idle session, opens a session only
// when none is idle, and ends a session after its last call.
func TestSessionPool(t *testing.T) {
	var p sessionPool
	opened := 0
	size := func() int { opened++; return 2 }
	a := p.take(size)
	b := p.take(size) // a is busy: a second session opens
	if a == b || opened != 2 {
		t.Fatalf("two concurrent calls share a session or %d sessions opened", opened)
	}
	if done, _ := p.release(a, true); done {
		t.Fatal("a session of two calls ended after one")
	}
	if c := p.take(size); c != a || opened != 2 {
		t.Fatalf("an idle session was not reused")
	}
	if done, clean := p.release(a, false); !done || clean {
		t.Errorf("session after its last call: done %v clean %v, want done and not clean", done, clean)
	}
}

// TestWriteTimeline: with a timeline width the page shows, per policy, each
// region's calls summed over each span of that width (the last one cut
// short by the scenario's end), the 429s of a full PT told apart, and
// nothing of it without one.
func TestWriteTimeline(t *testing.T) {
	sec := func(s int, sent, served, throttled, failed, cancelled int64) emulator.SecondStats {
		return emulator.SecondStats{Second: s, Requests: sent, Served: served, Throttled: throttled, Failed: failed, Cancelled: cancelled}
	}
	rep := &Report{
		Scenario: "timeline", Duration: 25 * time.Second, Scale: 10, Rate: 5,
		Results: []*Result{{Policy: NameRegionwarden, Requests: 40, Succeeded: 30, Regions: []RegionLoad{
			{Name: "europe-west1", Seconds: []emulator.SecondStats{sec(0, 3, 3, 0, 0, 0), sec(9, 4, 2, 1, 1, 0), sec(10, 5, 0, 0, 0, 5), sec(24, 1, 1, 0, 0, 0)}},
			{Name: "europe-west4", Seconds: []emulator.SecondStats{sec(12, 2, 1, 1, 0, 0), {Second: 15, Requests: 4, Throttled: 3, PTFull: 2, Failed: 1}}},
		}}},
	}
	var b strings.Builder
	if err := WriteMarkdown(&b, Page{Reports: []*Report{rep}, Timeline: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"Each region, 10s at a time, " + NameRegionwarden + ": calls sent / served / 429 / failed / cancelled;",
		"| From | europe-west1 | europe-west4 |",
		"| 0s | 7 / 5 / 1 / 1 / 0 | 0 / 0 / 0 / 0 / 0 |",
		"| 10s | 5 / 0 / 0 / 0 / 5 | 6 / 1 / 4 (PT 2) / 1 / 0 |",
		"| 20s | 1 / 1 / 0 / 0 / 0 | 0 / 0 / 0 / 0 / 0 |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("page lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	if err := WriteMarkdown(&b, Page{Reports: []*Report{rep}}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "at a time") {
		t.Errorf("a page without a timeline width shows one:\n%s", b.String())
	}
}

// TestWriteMarkdown writes a skipped policy as skipped, with its reason,
// and a scenario's targets with their verdicts.
func TestWriteMarkdown(t *testing.T) {
	rep := &Report{
		Scenario: ScenarioProvisionedIncident, Duration: 30 * time.Minute, Scale: 30, Rate: 25,
		Results: []*Result{
			{Policy: NameBlocklist, Requests: 100, Succeeded: 5, NoRegions: 90},
			{Policy: NameRegionwarden, Requests: 100, Succeeded: 100, Provisioned: 90, Streams: 40, StreamsSucceeded: 40},
			{Policy: NameRouter, Skipped: "no router binary was given"},
		},
	}
	var b strings.Builder
	if err := WriteMarkdown(&b, Page{Reports: []*Report{rep}, ChartDir: "replays"}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"| " + NameRouter + " | skipped: no router binary was given |",
		"| " + NameBlocklist + " | 100 | 5.00% |",
		"serves at least 99.90% of calls with no \"no regions\" error: 100.00%, 0 \"no regions\" (met)",
		"reproduces the outage (under 20.00% success): 5.00%, 90 \"no regions\" (met)",
		NameRouter + " serves at least 99.90% of calls with no \"no regions\" error: skipped (not measured)",
		"](replays/" + ScenarioProvisionedIncident + ".png)",
		// Only the column that streamed has a row of streams.
		"| " + NameRegionwarden + " | 40 | 100.00% | 60 | 100.00% |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("page lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "| "+NameBlocklist+" | 0 |") {
		t.Errorf("page has a row of streams for a column that streamed none:\n%s", out)
	}
}

// TestFaultSpan finds a scenario's faults and what the regions can carry,
// moment by moment where the faults come and go by turns: the
// shared quotas' 18 of 40 calls a second while the provisioned region is
// down, nothing when every region is, all of it while the provisioned region
// answers 55% of its calls and the shared quotas take the rest; of a region
// with errors what it answers of its capacity, of one slower than the
// deadline nothing. And what they serve when every call is sent once, to
// the regions that answer most first (carryOnce): in spill-regions-failing
// the PT's 27 of 40 calls a second and half of the 13 the pay-as-you-go
// regions take; with 429s the PT's 55% of the calls it takes before the
// shared quotas have room for the rest.
func TestFaultSpan(t *testing.T) {
	for _, tc := range []struct {
		name     string
		dur      time.Duration
		want     Span
		wantCarr float64
		wantOnce float64
	}{
		{ScenarioProvisionedDown, 4 * time.Minute, Span{2 * time.Minute, 150 * time.Second}, 0.45, 0.45},
		{ScenarioUnreachable, 6 * time.Minute, Span{90 * time.Second, 270 * time.Second}, 0.45, 0.45},
		{ScenarioDownPriorities, 4 * time.Minute, Span{time.Minute, 3 * time.Minute}, 0.6, 0.6},
		{ScenarioTotalOutage, 4 * time.Minute, Span{2 * time.Minute, 140 * time.Second}, 0, 0},
		{ScenarioTotalOutage, 130 * time.Second, Span{2 * time.Minute, 130 * time.Second}, 0, 0},
		{ScenarioTotalOutage, time.Minute, Span{}, 0, 0},
		{ScenarioProvisionedThrottled, 5 * time.Minute, Span{90 * time.Second, 210 * time.Second}, 1, 0.7975},
		{ScenarioSharedContention, 8 * time.Minute, Span{2 * time.Minute, 6 * time.Minute}, 0.5, 0.5},
		{ScenarioSpillFailing, 6 * time.Minute, Span{time.Minute, 4 * time.Minute}, 0.975, 0.8375},
		// The PT's 20 calls/s and europe-north1's 8 of the 40.
		{ScenarioSharedDown, 6 * time.Minute, Span{time.Minute, 4 * time.Minute}, 0.7, 0.7},
		// 40% of the PT's 33 calls/s and the quotas' 15 carry the 25; sent
		// once, the quotas' 15 and 40% of the other 10.
		{ScenarioProvisionedBrownout, 5 * time.Minute, Span{time.Minute, 4 * time.Minute}, 1, 0.76},
		// Moment by moment: all of the load for the 60 s the PT answers,
		// the quotas' 45% for the 80 s it fails.
		{ScenarioProvisionedFlapping, 5 * time.Minute, Span{time.Minute, 200 * time.Second}, 96.0 / 140, 96.0 / 140},
		// The PT's all for the 60 s it answers; two quotas' 12 of 40 for
		// the 120 s it is down and the third one hangs.
		{ScenarioSharedHangs, 5 * time.Minute, Span{time.Minute, 4 * time.Minute}, 96.0 / 180, 96.0 / 180},
		// The PT answers half of what it is sent within the 5 s deadline,
		// its median 600 ms answer coming then: half of the whole load,
		// and the quotas' 45%, carry 95%. Sent once, the quotas' 45% and
		// half of the other 55%.
		{ScenarioNearDeadline, 4 * time.Minute, Span{time.Minute, 3 * time.Minute}, 0.95, 0.725},
	} {
		// The regions' own latency tails past the deadline count too
		// (answeredAt): here they are under 1e-3 of the calls.
		sc := testScenario(t, tc.name)
		sp, carry := faultSpan(sc, tc.dur)
		if sp != tc.want || math.Abs(carry-tc.wantCarr) > 1e-3 {
			t.Errorf("%s cut to %s: faults %+v carrying %v, want %+v carrying %v", tc.name, tc.dur, sp, carry, tc.want, tc.wantCarr)
		}
		if once := carryOnce(sc, sp); math.Abs(once-tc.wantOnce) > 1e-3 {
			t.Errorf("%s cut to %s: %v carried once, want %v", tc.name, tc.dur, once, tc.wantOnce)
		}
	}
	// A PT whose latency ramps to 30 s added over 2 minutes (lognormal,
	// median 600 ms, p99 2.5 s), past the 10 s deadline 40 s in: all of it
	// for at least the 30 s in which the ramp leaves it 2.5 s, the quotas'
	// 45% after; less than all of it for the full 40 s, as its slower
	// answers miss the deadline before the ramp reaches it.
	ramp := testScenario(t, "provisioned-region-backing-up")
	if sp, carry := faultSpan(ramp, 5*time.Minute); carry < (30+90*0.45)/120 || carry >= 76.0/120 {
		t.Errorf("provisioned-region-backing-up: faults %+v carrying %v, want in [%v, %v)", sp, carry, (30+90*0.45)/120, 76.0/120)
	}
	// 20 calls/s: half of europe-west1's 10 answered, none of
	// europe-west4's (slower than the deadline), europe-north1's 4, and
	// europe-west2's 4 while its ramp leaves its 300 ms latency within the
	// deadline, 48.5 s into the minute: 13 of 20 in the 48 one-second steps
	// before, then 9 in the 12 after, 732 of 1,200.
	sc := inlineScenario(t, "partial", `
load: {requestsPerSecond: 20, deadline: 10s}
regions:
- name: europe-west1
  tier: shared
  capacity: {requestsPerSecond: 10}
  faults: [{from: 1m, to: 2m, errorRate: 0.5, code: 503}]
- name: europe-west4
  tier: shared
  capacity: {requestsPerSecond: 10}
  faults: [{from: 1m, to: 2m, addedLatency: 10s}]
- name: europe-west2
  tier: shared
  capacity: {requestsPerSecond: 4}
  faults: [{from: 1m, to: 2m, addedLatencyEnd: 12s}]
- name: europe-north1
  tier: shared
  capacity: {requestsPerSecond: 4}
`)
	sp, carry := faultSpan(sc, 2*time.Minute)
	if want := 732.0 / 1200; math.Abs(carry-want) > 1e-9 {
		t.Errorf("errors and latency: carrying %v, want %v", carry, want)
	}
	// Sent once, in the table's order europe-west1 would take 10 and answer
	// 5, europe-west4 the other 10 and answer none: a quarter. The regions
	// that answer most take first: europe-north1's 4 and europe-west2's
	// while it answers, then half of europe-west1's 10: the same.
	if once, want := carryOnce(sc, sp), 732.0/1200; math.Abs(once-want) > 1e-9 {
		t.Errorf("errors and latency: %v carried once, want %v", once, want)
	}
	// A region whose own latency (lognormal, median 1.5 s, p99 6 s) runs
	// past the 3-s deadline for about an eighth of its calls, with no
	// fault adding to it, answers the rest: of the 80% a fault leaves,
	// 0.8 × what its latency answers within 3 s (emulator.Latency.Within,
	// which the emulator's tests hold to its draws). Counted as answered,
	// those late calls made the bound 80%, which no routing could reach.
	tail := inlineScenario(t, "tail", `
load: {requestsPerSecond: 5, deadline: 3s}
regions:
- name: europe-west1
  tier: shared
  capacity: {requestsPerSecond: 10}
  latency: {distribution: lognormal, p50: 1.5s, p99: 6s}
  faults: [{from: 1m, to: 2m, errorRate: 0.2, code: 503}]
`)
	want := 0.8 * tail.Regions[0].Latency.Within(3*time.Second)
	if sp, carry := faultSpan(tail, 2*time.Minute); math.Abs(carry-want) > 1e-3 || math.Abs(carryOnce(tail, sp)-want) > 1e-3 {
		t.Errorf("a latency tail past the deadline: carrying %v (once %v), want %v", carry, carryOnce(tail, sp), want)
	}
	// Quotas count whole calls over their window: over a two-second window
	// 1.86 calls a second is 3 calls in any two seconds (1.5 a second),
	// 3.5 a second is 7 (all of it), and a PT of 1,500 tokens a second over
	// its 40-s window is 60,000 tokens, 85 calls of 700 tokens (2.125 a
	// second), of which the fault fails a ten-thousandth.
	whole := inlineScenario(t, "whole", `
capacityWindow: 2s
load: {requestsPerSecond: 10, inputTokens: 500, outputTokens: 200}
regions:
- name: europe-west1
  tier: provisioned
  provisioned: {gsus: 3, tokensPerSecond: 1500, window: 40s}
  faults: [{from: 1m, to: 2m, errorRate: 0.0001, code: 503}]
- name: europe-west4
  tier: shared
  capacity: {requestsPerSecond: 1.86}
- name: europe-west2
  tier: shared
  capacity: {requestsPerSecond: 3.5}
`)
	want = (0.9999*85.0/40 + 1.5 + 3.5) / 10
	if _, carry := faultSpan(whole, 2*time.Minute); math.Abs(carry-want) > 1e-6 {
		t.Errorf("quotas in whole calls: carrying %v, want %v", carry, want)
	}
	// A token quota under one call a window (100 tokens a second, calls of
	// 500) grants none: it carries nothing, not the whole load as a region
	// without a limit would.
	under := inlineScenario(t, "under", `
load: {requestsPerSecond: 10, inputTokens: 400, outputTokens: 100}
regions:
- name: europe-west4
  tier: shared
  capacity: {tokensPerSecond: 100}
  faults: [{from: 1m, to: 2m, errorRate: 0.0001, code: 503}]
`)
	if _, carry := faultSpan(under, 2*time.Minute); carry != 0 {
		t.Errorf("a quota under one call a window: carrying %v, want 0", carry)
	}
}

// inlineScenario parses a two-minute scenario of project p and model m
// named name, the rest written in the test.
func inlineScenario(t *testing.T, name, yaml string) *emulator.Scenario {
	t.Helper()
	sc, err := emulator.ParseScenario([]byte("name: " + name + "\nproject: p\nmodel: m\nduration: 2m\n" + yaml))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// throttledLoads are the regions of a provisioned-region-throttled replay:
// the provisioned one over its capacity for 5 s in a row (it answers 429
// then, which the target allows), a shared one for over seconds.
func throttledLoads(over int) []RegionLoad {
	return []RegionLoad{
		{Name: "europe-west1", Tier: string(table.TierProvisioned), LongestOver: 5},
		{Name: "europe-west4", Tier: string(table.TierShared), LongestOver: over},
	}
}

// TestFaultChecks judges the failure shapes' targets on known results, and
// writes how every policy did while the faults lasted.
func TestFaultChecks(t *testing.T) {
	fault := Span{2 * time.Minute, 150 * time.Second}
	in := func(success, attempts float64, back time.Duration) SpanResult {
		return SpanResult{Span: fault, Requests: 1200, Success: success, AttemptsPerRequest: attempts, Baseline: 1, RecoveredAfter: back + bucketWidth}
	}
	for _, tc := range []struct {
		scenario string
		r        Result
		want     bool
	}{
		{ScenarioProvisionedDown, Result{Requests: 9000, Fault: in(0.44, 0.75, 3*time.Second)}, true},
		{ScenarioProvisionedDown, Result{Requests: 9000, Fault: in(0.42, 0.75, 3*time.Second)}, false},   // under 95% of 45%
		{ScenarioProvisionedDown, Result{Requests: 9000, Fault: in(0.44, 1.2, 3*time.Second)}, false},    // too many attempts
		{ScenarioProvisionedDown, Result{Requests: 9000, NoRegions: 1, Fault: in(0.44, 0.75, 0)}, false}, // "no regions"
		{ScenarioUnreachable, Result{Requests: 9000, Fault: in(0.44, 0.75, 12*time.Second)}, true},
		{ScenarioUnreachable, Result{Requests: 9000, Fault: in(0.42, 0.75, 12*time.Second)}, false},  // under 95% of 45%
		{ScenarioUnreachable, Result{Requests: 9000, Fault: in(0.44, 1.2, 12*time.Second)}, false},   // too many attempts
		{ScenarioUnreachable, Result{Requests: 9000, NoRegions: 1, Fault: in(0.44, 0.75, 0)}, false}, // "no regions"
		{ScenarioUnreachable, Result{Requests: 9000, Fault: in(0.44, 0.75, 57*time.Second)}, false},  // paid capacity back too late
		{ScenarioUnreachable, Result{Requests: 9000, Fault: in(0.44, 0.75, -1-bucketWidth)}, false},  // never back
		{ScenarioSharedDown, Result{Requests: 9000, Fault: in(0.44, 0.75, 5*time.Second)}, true},
		{ScenarioSharedDown, Result{Requests: 9000, Fault: in(0.44, 0.75, 36*time.Second)}, false}, // its quota back too late
		{ScenarioSharedDown, Result{Requests: 9000, Fault: in(0.42, 0.75, 5*time.Second)}, false},  // under 95% of 45%
		{ScenarioSpillFailing, Result{Requests: 9000, Fault: in(0.90, 1.1, 0)}, true},
		{ScenarioSpillFailing, Result{Requests: 9000, Fault: in(0.83, 1.0, 0)}, false},               // refused what a failing region would take
		{ScenarioSpillFailing, Result{Requests: 9000, NoRegions: 1, Fault: in(0.90, 1.1, 0)}, false}, // "no regions"
		{ScenarioProvisionedSlow, Result{Requests: 9000, Succeeded: 9000, Fault: in(1, 1, 0)}, true},
		{ScenarioProvisionedSlow, Result{Requests: 9000, Succeeded: 8999, Fault: in(1, 1, 0)}, false},
		{ScenarioProvisionedSlow, Result{Requests: 9000, Succeeded: 9000, Shed: 1, Fault: in(1, 1, 0)}, false},
		{ScenarioNearDeadline, Result{Requests: 9000, Shed: 90, Fault: in(0.64, 1, 0)}, true},
		{ScenarioNearDeadline, Result{Requests: 9000, Shed: 91, Fault: in(0.64, 1, 0)}, false}, // refused what the slow PT answers half of
		{ScenarioTotalOutage, Result{Requests: 9000, Fault: in(0, 0.6, 3*time.Second)}, true},
		{ScenarioTotalOutage, Result{Requests: 9000, Fault: in(0, 1.01, 3*time.Second)}, false},
		{ScenarioTotalOutage, Result{Requests: 9000, Fault: in(0, 0.6, 11*time.Second)}, false},
		{ScenarioProvisionedThrottled, Result{Requests: 9000, Fault: in(0.44, 1.4, 0), Regions: throttledLoads(1)}, true},
		{ScenarioProvisionedThrottled, Result{Requests: 9000, Fault: in(0.42, 1.4, 0), Regions: throttledLoads(1)}, false}, // under 95% of 45%
		{ScenarioProvisionedThrottled, Result{Requests: 9000, Fault: in(0.44, 1.4, 0), Regions: throttledLoads(2)}, false}, // a quota overrun for 2 s
	} {
		r := tc.r
		r.Policy = NameRegionwarden
		rep := &Report{Scenario: tc.scenario, Duration: 4 * time.Minute, Scale: 10, Rate: 40, Fault: fault, FaultCarry: 0.45, FaultCarryOnce: 0.8375, Results: []*Result{&r}}
		cs := Checks(rep)
		if len(cs) != 1 || cs[0].Pass != tc.want {
			t.Errorf("%s with %+v: checks %+v, want one that passes: %v", tc.scenario, r, cs, tc.want)
		}
	}
	rep := &Report{Scenario: ScenarioProvisionedDown, Duration: 4 * time.Minute, Scale: 10, Rate: 40, Fault: fault, FaultCarry: 0.45, Results: []*Result{
		{Policy: NameAllowlist, Requests: 9000, Fault: in(0.3, 1.2, 12*time.Second)},
		{Policy: NameRegionwarden, Requests: 9000, Fault: in(0.44, 0.75, 3*time.Second)},
	}}
	var b strings.Builder
	if err := WriteMarkdown(&b, Page{Reports: []*Report{rep}}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"While the faults last, from 2m to 2m30s (the regions can carry 45.00% of the calls, each only what it answers within the deadline):",
		"| " + NameAllowlist + " | 1200 | 30.00% | 1.200 | 100.00% | 12s |",
		"| " + NameRegionwarden + " | 1200 | 44.00% | 0.750 | 100.00% | 3s |",
		"44.00% served (97.78% of what they can carry), 0.750 attempts per call, 0 \"no regions\" (met)",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("page lacks %q:\n%s", want, b.String())
		}
	}
}

// maxTestLag is how late (p99, scenario time) a short replay in the tests
// may send its load and still say something about the policy under test.
// The replays run on a compressed clock: a generator that waits for a CPU
// sends its backlog at once, a burst no scenario asked for, which a policy
// that meters capacity per second must shed. On a quiet machine the lag is
// tens of milliseconds; past a quarter second the run measures the machine.
const maxTestLag = 250 * time.Millisecond

// runOnSchedule runs a short replay and, when the machine was too busy to
// send its load on schedule (some column's lag over maxTestLag), replays it
// again at a third of the scale, where the same CPU shortfall is a third as
// late in scenario time. The second run is judged whatever its lag: a test
// that skipped itself on a busy machine could never fail there.
func runOnSchedule(t *testing.T, sc *emulator.Scenario, pols []Policy, opts Options) (*Report, error) {
	t.Helper()
	rep, err := Run(context.Background(), sc, pols, opts)
	if err != nil || opts.Scale <= 1 {
		return rep, err
	}
	for _, r := range rep.Results {
		if r.LagP99 > maxTestLag {
			t.Logf("%s sent its load %s late (p99) at scale %g: the machine is busy; replaying at scale %g",
				r.Policy, r.LagP99, opts.Scale, opts.Scale/3)
			opts.Scale /= 3
			return Run(context.Background(), sc, pols, opts)
		}
	}
	return rep, nil
}

// TestOutageCheck judges the count blocklist's outage while the faults last
// when the report has them: a run that serves every call before and after
// the faults still reproduces the outage if it fails during them, and one
// that serves during them does not.
func TestOutageCheck(t *testing.T) {
	fault := Span{3 * time.Minute, 27 * time.Minute}
	for _, tc := range []struct {
		name            string
		overall, during float64
		want            bool
	}{
		{"fails during the faults only", 0.26, 0.08, true},
		{"serves during the faults", 0.26, 0.5, false},
	} {
		r := &Result{Policy: NameBlocklist, Requests: 1000, Succeeded: int64(tc.overall * 1000), NoRegions: 700,
			Fault: SpanResult{Span: fault, Requests: 800, Success: tc.during}}
		rep := &Report{Scenario: ScenarioProvisionedIncident, Duration: 30 * time.Minute, Fault: fault, Results: []*Result{r}}
		cs := Checks(rep)
		if len(cs) != 1 || cs[0].Pass != tc.want || !strings.Contains(cs[0].Measured, "while the faults last") {
			t.Errorf("%s: checks %+v, want one that passes: %v, measured while the faults last", tc.name, cs, tc.want)
		}
	}
}

// TestPriorityCarry: the room of a shortage goes to critical calls first,
// then default ones, then sheddable ones: with a fifth of the calls critical
// and three tenths sheddable, a carry of 60% serves every critical call,
// four fifths of the default ones and no sheddable one.
func TestPriorityCarry(t *testing.T) {
	mix := emulator.PriorityMix{Critical: 0.2, Sheddable: 0.3}
	for _, tc := range []struct {
		carry                float64
		crit, def, sheddable float64
	}{
		{0.6, 1, 0.8, 0},
		{1, 1, 1, 1},
		{0.85, 1, 1, 0.5},
		{0.1, 0.5, 0, 0},
		{0, 0, 0, 0},
	} {
		got := priorityCarry(mix, tc.carry)
		for pr, want := range map[table.Priority]float64{table.PriorityCritical: tc.crit, table.PriorityDefault: tc.def, table.PrioritySheddable: tc.sheddable} {
			if math.Abs(got[pr]-want) > 1e-9 {
				t.Errorf("carry %v: %s %v, want %v", tc.carry, pr, got[pr], want)
			}
		}
	}
	if got := priorityCarry(emulator.PriorityMix{}, 0.6); got != nil {
		t.Errorf("one priority: %v, want nil", got)
	}
}

// TestShortageChecks judges the shortage's priority target on known
// results: critical calls served within 95% of what a priority queue gives
// them, and no priority served more than the one above it.
func TestShortageChecks(t *testing.T) {
	fault := Span{time.Minute, 3 * time.Minute}
	prios := func(crit, def, sheddable float64) []PriorityResult {
		var ps []PriorityResult
		for pr, got := range map[table.Priority]float64{table.PriorityCritical: crit, table.PriorityDefault: def, table.PrioritySheddable: sheddable} {
			if got >= 0 {
				ps = append(ps, PriorityResult{Priority: pr, FaultRequests: 1000, FaultSucceeded: int64(got * 1000)})
			}
		}
		return ps
	}
	for _, tc := range []struct {
		ps   []PriorityResult
		want bool
	}{
		{prios(0.99, 0.7, 0.02), true},
		{prios(1, 0.8, 0), true},
		{prios(0.94, 0.7, 0.02), false},  // critical calls lost
		{prios(0.99, 0.3, 0.5), false},   // sheddable served before default
		{prios(0.6, 0.6, 0.6), false},    // first come
		{prios(0.99, 0.7, -1), false},    // no sheddable calls: nothing shows
		{prios(0.99, 0.995, 0.5), false}, // default served before critical
	} {
		r := Result{Policy: NameRegionwarden, Requests: 6000, Fault: SpanResult{Span: fault, Requests: 3000, Success: 0.59, AttemptsPerRequest: 0.6}, Priorities: tc.ps}
		rep := &Report{Scenario: ScenarioDownPriorities, Duration: 4 * time.Minute, Fault: fault, FaultCarry: 0.6,
			PriorityCarry: priorityCarry(emulator.PriorityMix{Critical: 0.2, Sheddable: 0.3}, 0.6), Results: []*Result{&r}}
		cs := Checks(rep)
		if len(cs) != 2 || !cs[0].Pass || cs[1].Pass != tc.want {
			t.Errorf("%+v: %+v, want the down target met and the priority one %v", tc.ps, cs, tc.want)
		}
	}
}
