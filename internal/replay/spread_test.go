package replay

import (
	"math"
	"strings"
	"testing"
	"time"
)

// spreadReport is a report of one replay: each policy's success overall, and during
// the faults when the report has a fault span (faults).
func spreadReport(seed uint64, faults bool, success map[string][2]float64, skipped ...string) *Report {
	rep := &Report{Scenario: "s", Seed: seed}
	if faults {
		rep.Fault.From, rep.Fault.To = time.Minute, 2*time.Minute
	}
	for _, name := range []string{"a", "b"} {
		x, ok := success[name]
		if !ok {
			continue
		}
		r := &Result{Policy: name, Requests: 1000, Succeeded: int64(math.Round(x[0] * 1000))}
		r.Fault.Success = x[1]
		rep.Results = append(rep.Results, r)
	}
	for _, name := range skipped {
		rep.Results = append(rep.Results, &Result{Policy: name, Skipped: "not here"})
	}
	return rep
}

// TestSpreads: a policy's success over seeds is the mean, the least and the
// most of its runs, during the faults too; a run it was skipped in does not
// count; a scenario with no faults has no success during them.
func TestSpreads(t *testing.T) {
	runs := []*Report{
		spreadReport(1, true, map[string][2]float64{"a": {0.9, 0.8}, "b": {0.5, 0.4}}),
		spreadReport(2, true, map[string][2]float64{"a": {0.7, 0.6}}, "b"),
		spreadReport(3, true, map[string][2]float64{"a": {0.8, 0.7}, "b": {0.7, 0.2}}),
	}
	got := Spreads(runs)
	if len(got) != 2 || got[0].Policy != "a" || got[1].Policy != "b" {
		t.Fatalf("spreads %+v, want a then b", got)
	}
	near := func(x, want float64) bool { return math.Abs(x-want) < 1e-9 }
	a, b := got[0], got[1]
	if a.Runs != 3 || !near(a.Mean, 0.8) || !near(a.Least, 0.7) || !near(a.Most, 0.9) ||
		!near(a.DuringMean, 0.7) || !near(a.DuringLeast, 0.6) || !near(a.DuringMost, 0.8) {
		t.Errorf("a: %+v, want 3 runs, 80%% (70 to 90), during 70%% (60 to 80)", a)
	}
	if b.Runs != 2 || !near(b.Mean, 0.6) || !near(b.Least, 0.5) || !near(b.Most, 0.7) || !near(b.DuringMean, 0.3) {
		t.Errorf("b: %+v, want 2 runs (skipped in one), 60%% (50 to 70), during 30%%", b)
	}
	calm := Spreads([]*Report{spreadReport(1, false, map[string][2]float64{"a": {1, 0}})})
	if !math.IsNaN(calm[0].DuringMean) {
		t.Errorf("no faults: during %v, want none", calm[0].DuringMean)
	}
}

// TestPageSpreads: a scenario replayed with several seeds says each
// policy's success over them, and a page of several scenarios says each
// policy's mean over the scenarios, each weighing the same whatever its
// number of seeds; a policy that did not run in every scenario has no such
// mean.
func TestPageSpreads(t *testing.T) {
	one := []*Report{
		spreadReport(1, true, map[string][2]float64{"a": {0.9, 0.8}}),
		spreadReport(2, true, map[string][2]float64{"a": {0.7, 0.6}}),
		spreadReport(3, true, map[string][2]float64{"a": {0.8, 0.7}}),
	}
	// b ran in t alone: it has no mean over the page.
	other := spreadReport(1, false, map[string][2]float64{"a": {0.6, 0}, "b": {0.1, 0}})
	other.Scenario = "t"
	var b strings.Builder
	if err := WriteMarkdown(&b, Page{Reports: []*Report{one[0], other}, Repeats: [][]*Report{one, {other}}}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{
		"Over 3 replays with seeds 1 to 3",
		"| a | 3 | 80.00% (70.00% to 90.00%) | 70.00% (60.00% to 80.00%) |",
		// s's mean, 80%, and t's 60% weigh the same; only s has faults.
		"| a | 2 | 70.00% (60.00% to 80.00%) | 70.00% (70.00% to 70.00%) |",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q:\n%s", want, page)
		}
	}
	if strings.Count(page, "Over 1 replays") != 0 {
		t.Error("a scenario replayed once has a table of its seeds")
	}
	if summary := page[:strings.Index(page, "## ")]; strings.Contains(summary, "| b |") {
		t.Errorf("a policy that ran in one scenario of two is in the page's mean:\n%s", summary)
	}
}
