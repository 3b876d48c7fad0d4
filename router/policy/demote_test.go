package policy

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/regionwarden/regionwarden/router/table"
)

// TestDemotionLogged checks that a demotion and a restoration are logged once
// each, with why, however many failures and probes there are.
func TestDemotionLogged(t *testing.T) {
	clk := newClock()
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	p, err := New(pool(provisioned("europe-west4", table.Capacity{}), shared("europe-west1", 0)), Options{Now: clk.Now, Seed: 1, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	report(p, 0, Failure, 100)
	for range 30 {
		_, a := pick(t, p, PriorityDefault)
		a.Done(Success)
		clk.Advance(500 * time.Millisecond)
	}
	out := buf.String()
	t.Log(out)
	if n := strings.Count(out, `msg="provisioned region demoted`); n != 1 {
		t.Errorf("%d demotion lines, want 1", n)
	}
	if n := strings.Count(out, `msg="provisioned region restored`); n != 1 {
		t.Errorf("%d restoration lines, want 1", n)
	}
	for _, want := range []string{"level=WARN", "region=europe-west4", "failureRate=1", "answered=20", "threshold=0.5", "level=INFO", "demotedFor=3.5s"} {
		if !strings.Contains(out, want) {
			t.Errorf("log has no %q", want)
		}
	}
}

// TestSuccessfulProbeProbesAgainAtOnce: failures pace a demoted region's
// probes, successes do not: once a probe succeeds the next calls probe it at
// once, and it is restored after restoreAfter calls, not restoreAfter probe
// intervals.
func TestSuccessfulProbeProbesAgainAtOnce(t *testing.T) {
	clk := newClock()
	p := mustNew(t, pool(provisioned("europe-west4", table.Capacity{}), shared("europe-west1", 0)), clk)
	report(p, 0, Failure, 100)
	if p.Snapshot().Regions[0].Demotion == nil {
		t.Fatal("not demoted after 100 failures")
	}
	clk.Advance(time.Duration(p.st.Load().probeEvery))
	for i := range p.st.Load().restoreAfter {
		if _, a := pick(t, p, PriorityDefault); a.Region != "europe-west4" {
			t.Fatalf("call %d after a successful probe went to %s, want a probe of europe-west4", i+1, a.Region)
		} else {
			a.Done(Success)
		}
	}
	if d := p.Snapshot().Regions[0].Demotion; d != nil {
		t.Errorf("still demoted after %d successful probes at one moment", p.st.Load().restoreAfter)
	}
}
