package metrics

import (
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/regionwarden/regionwarden/router/policy"
	"github.com/regionwarden/regionwarden/router/table"
)

// samples gathers the registry and returns "name{labels} value" lines.
func samples(t *testing.T, r *prometheus.Registry) string {
	t.Helper()
	mfs, err := r.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			b.WriteString(mf.GetName())
			for _, l := range m.GetLabel() {
				b.WriteString(" " + l.GetName() + "=" + l.GetValue())
			}
			switch {
			case m.GetCounter() != nil:
				b.WriteString(" " + ftoa(m.GetCounter().GetValue()))
			case m.GetGauge() != nil:
				b.WriteString(" " + ftoa(m.GetGauge().GetValue()))
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// hasSamples fails t for each line of want that the exposition got lacks.
func hasSamples(t *testing.T, got string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("missing %q in\n%s", w, got)
		}
	}
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func TestTableObserver(t *testing.T) {
	m := New()
	m.Loaded("file:/t", "aaaa")
	m.Loaded("file:/t", "bbbb")
	m.Rejected("file:/t", "invalid", errors.New("bad"))
	got := samples(t, m.Registry())
	hasSamples(t, got,
		"regionwarden_router_table_loads_total 2\n",
		"regionwarden_router_table_rejections_total reason=invalid 1\n",
		"regionwarden_router_table_info hash=bbbb 1\n",
	)
	if strings.Contains(got, "hash=aaaa") {
		t.Error("the replaced table's hash is still reported")
	}
}

func TestPoolStateAtScrape(t *testing.T) {
	pool := table.Pool{Project: "p", Publisher: "google", Model: "m", Policy: table.DefaultPolicy(),
		Regions: []table.Region{
			{Name: "europe-west1", Tier: table.TierProvisioned, Capacity: table.Capacity{GSUs: 2, TokensPerSecond: 5000}},
			{Name: "us-central1", Tier: table.TierShared, Ejectable: true},
		}}
	pool.Default()
	clk := time.Unix(1_700_000_000, 0)
	p, err := policy.New(pool, policy.Options{Seed: 1, Now: func() time.Time { return clk }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	m := New()
	if got := samples(t, m.Registry()); strings.Contains(got, "region_ejected") {
		t.Errorf("pool state reported before WatchPools:\n%s", got)
	}
	m.WatchPools(func() []policy.Snapshot { return []policy.Snapshot{p.Snapshot()} })
	got := samples(t, m.Registry())
	hasSamples(t, got,
		"regionwarden_router_region_ejected pool=p/google/m region=europe-west1 tier=provisioned 0\n",
		"regionwarden_router_region_ejected pool=p/google/m region=us-central1 tier=shared 0\n",
		"regionwarden_router_pool_panic pool=p/google/m 0\n",
		"regionwarden_router_region_in_flight_limit pool=p/google/m region=us-central1 tier=shared 64\n",
		"regionwarden_router_region_demoted pool=p/google/m region=europe-west1 tier=provisioned 0\n",
		"regionwarden_router_region_provisioned_window_seconds pool=p/google/m region=europe-west1 tier=provisioned 40\n",
		"regionwarden_router_region_provisioned_window_used pool=p/google/m region=europe-west1 tier=provisioned 0\n",
		"regionwarden_router_region_held capacity=provisioned pool=p/google/m region=europe-west1 tier=provisioned 0\n",
	)
	if strings.Contains(got, "provisioned_window_seconds pool=p/google/m region=us-central1") {
		t.Errorf("a window for a region without a PT:\n%s", got)
	}
	if strings.Contains(got, "region_demoted_since") {
		t.Errorf("a demotion time while no region is demoted:\n%s", got)
	}

	// The provisioned region fails every call: demoted, since now.
	for range 1000 {
		c := p.Start(policy.Request{})
		a, err := c.Pick()
		if err != nil {
			t.Fatal(err)
		}
		if a.Region != "europe-west1" {
			a.Done(policy.Success)
			continue
		}
		a.Done(policy.Failure)
		if p.Snapshot().Regions[0].Demotion != nil {
			break
		}
	}
	got = samples(t, m.Registry())
	hasSamples(t, got,
		"regionwarden_router_region_demoted pool=p/google/m region=europe-west1 tier=provisioned 1\n",
		"regionwarden_router_region_demotions_total pool=p/google/m region=europe-west1 tier=provisioned 1\n",
		"regionwarden_router_region_demoted_since_timestamp_seconds pool=p/google/m region=europe-west1 tier=provisioned 1.7e+09\n",
		"regionwarden_router_region_ejected pool=p/google/m region=europe-west1 tier=provisioned 0\n",
	)
}

// TestRegionHeldAtScrape: a region held behind another in one of its
// capacities reports 1 for that capacity and 0 for the others it offers.
func TestRegionHeldAtScrape(t *testing.T) {
	m := New()
	m.WatchPools(func() []policy.Snapshot {
		return []policy.Snapshot{{Project: "p", Publisher: "google", Model: "m", Regions: []policy.RegionSnapshot{
			{Name: "europe-west4", Tier: table.TierShared, PayGoTiers: []table.PayGoTier{table.PayGoStandard, table.PayGoPriority},
				HeldBehind: map[string]string{"standard": "europe-west1"}},
			{Name: "europe-west1", Tier: table.TierShared, PayGoTiers: []table.PayGoTier{table.PayGoStandard}},
		}}}
	})
	hasSamples(t, samples(t, m.Registry()),
		"regionwarden_router_region_held capacity=standard pool=p/google/m region=europe-west4 tier=shared 1\n",
		"regionwarden_router_region_held capacity=priority pool=p/google/m region=europe-west4 tier=shared 0\n",
		"regionwarden_router_region_held capacity=standard pool=p/google/m region=europe-west1 tier=shared 0\n",
	)
}
