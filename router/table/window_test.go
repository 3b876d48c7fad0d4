package table

import (
	"testing"
	"time"
)

// TestProvisionedWindow: an order's window is the lower bound of Google's
// range for its size unless the pool sets one, and an unknown size gets the
// shortest.
func TestProvisionedWindow(t *testing.T) {
	for _, tc := range []struct {
		gsus int64
		set  time.Duration
		want time.Duration
	}{
		{0, 0, time.Second},
		{1, 0, 40 * time.Second},
		{3, 0, 40 * time.Second},
		{4, 0, 5 * time.Second},
		{49, 0, 5 * time.Second},
		{50, 0, time.Second},
		{5000, 0, time.Second},
		{2, 90 * time.Second, 90 * time.Second},
		{64, 10 * time.Second, 10 * time.Second},
	} {
		p := Provisioned{Window: Duration{tc.set}}
		if got := p.WindowFor(tc.gsus); got != tc.want {
			t.Errorf("window of %d GSUs with %v set = %v, want %v", tc.gsus, tc.set, got, tc.want)
		}
	}
}

// TestProvisionedWindowTable: a table that omits the window renders none and
// parses to the size-based default; one that sets it keeps it through a
// render and a parse.
func TestProvisionedWindowTable(t *testing.T) {
	omitted := doc(pool(`{"name": "us-east5", "tier": "provisioned", "capacity": {"gsus": 2}}`))
	tb, err := Parse([]byte(omitted))
	if err != nil {
		t.Fatal(err)
	}
	p := tb.Pools[0]
	if got := p.Policy.Provisioned.WindowFor(p.Regions[0].Capacity.GSUs); got != SmallPTWindow {
		t.Errorf("window of a 2-GSU order = %v, want %v", got, SmallPTWindow)
	}
	out, err := Render(tb)
	if err != nil {
		t.Fatal(err)
	}
	if tb2, err := Parse(out); err != nil || tb2.Pools[0].Policy.Provisioned.Window.Duration != 0 {
		t.Errorf("an omitted window rendered as %s", out)
	}
	set := doc(pool(`{"name": "us-east5", "tier": "provisioned", "capacity": {"gsus": 2}}`, `"policy": {"provisioned": {"window": "90s"}}`))
	tb, err = Parse([]byte(set))
	if err != nil {
		t.Fatal(err)
	}
	out, err = Render(tb)
	if err != nil {
		t.Fatal(err)
	}
	tb2, err := Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	p = tb2.Pools[0]
	if got := p.Policy.Provisioned.WindowFor(p.Regions[0].Capacity.GSUs); got != 90*time.Second {
		t.Errorf("a set window of 90s is %v after a render and a parse", got)
	}
}
