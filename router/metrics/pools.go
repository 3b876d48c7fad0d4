package metrics

import (
	"slices"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/regionwarden/regionwarden/router/policy"
	"github.com/regionwarden/regionwarden/router/table"
)

// PoolLabel is how a pool is named in metric labels: project/publisher/model.
func PoolLabel(project, publisher, model string) string {
	return project + "/" + publisher + "/" + model
}

// poolCollector turns the policy's snapshots into gauges and counters at
// scrape time.
type poolCollector struct {
	snapshots atomic.Pointer[func() []policy.Snapshot]

	ejected      *prometheus.Desc
	timesEjected *prometheus.Desc
	demoted      *prometheus.Desc
	timesDemoted *prometheus.Desc
	demotedSince *prometheus.Desc
	panic        *prometheus.Desc
	failureRate  *prometheus.Desc
	throttle     *prometheus.Desc
	regionFlight *prometheus.Desc
	regionLimit  *prometheus.Desc
	poolFlight   *prometheus.Desc
	poolWaiting  *prometheus.Desc
	poolWaits    *prometheus.Desc
	ptWindow     *prometheus.Desc
	ptWindowUsed *prometheus.Desc
	held         *prometheus.Desc
}

func newPoolCollector() *poolCollector {
	region := []string{"pool", "region", "tier"}
	d := func(name, help string, labels []string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", name), help, labels, nil)
	}
	return &poolCollector{
		ejected:      d("region_ejected", "1 while the region is ejected for its failure rate.", region),
		timesEjected: d("region_ejections_total", "Ejections of the region since the router started.", region),
		demoted:      d("region_demoted", "1 while the provisioned region is demoted for its failure rate: answering regions take first attempts, it takes the rest and probes.", region),
		timesDemoted: d("region_demotions_total", "Demotions of the provisioned region since the router started.", region),
		demotedSince: d("region_demoted_since_timestamp_seconds", "When the demoted provisioned region was demoted, in seconds since the Unix epoch; absent while it is not.", region),
		panic:        d("pool_panic", "1 while too few regions are neither ejected nor on probation for either to be honored (every region takes traffic).", []string{"pool"}),
		failureRate:  d("region_failure_rate", "Failures over answered attempts in the region's ejection interval.", region),
		throttle:     d("region_throttle_probability", "Share of calls the region's throttle (fed by 429s and failures) turns away.", region),
		regionFlight: d("region_in_flight", "Attempts in flight to the region.", region),
		regionLimit:  d("region_in_flight_limit", "The region's adaptive in-flight limit.", region),
		poolFlight:   d("pool_in_flight", "Calls in flight in the pool, as the policy counts them.", []string{"pool"}),
		poolWaiting:  d("pool_waiting_for_headroom", "Calls waiting, up to a second, for a full quota to have room, or for a call of a higher priority to take it, before an attempt.", []string{"pool"}),
		poolWaits:    d("pool_headroom_waits_total", "Calls that waited for a full quota to have room, or for a call of a higher priority to take it, since the router started.", []string{"pool"}),
		ptWindow:     d("region_provisioned_window_seconds", "The window over which the router meters the PT's token limit (the pool's, or the shortest Google gives the order's size); absent for a region without a token limit.", region),
		ptWindowUsed: d("region_provisioned_window_used", "Share of the PT's token limit × window this router admitted in the window that ends now; absent for a region without a token limit.", region),
		held:         d("region_held", "1 while the region's capacity fails a larger share of its calls than another region's of the same capacity, by more than chance, and so takes only what that one has no room for; one series per capacity the region offers.", append(region[:len(region):len(region)], "capacity")),
	}
}

func (c *poolCollector) set(f func() []policy.Snapshot) { c.snapshots.Store(&f) }

// Describe sends every descriptor.
func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.ejected, c.timesEjected, c.demoted, c.timesDemoted, c.demotedSince, c.panic, c.failureRate, c.throttle, c.regionFlight, c.regionLimit, c.poolFlight, c.poolWaiting, c.poolWaits, c.ptWindow, c.ptWindowUsed, c.held} {
		ch <- d
	}
}

// Collect reads the snapshots and sends one sample per pool and region.
func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	f := c.snapshots.Load()
	if f == nil {
		return
	}
	gauge, counter := prometheus.GaugeValue, prometheus.CounterValue
	for _, s := range (*f)() {
		pool := PoolLabel(s.Project, s.Publisher, s.Model)
		ch <- prometheus.MustNewConstMetric(c.panic, gauge, b2f(s.Panic), pool)
		ch <- prometheus.MustNewConstMetric(c.poolFlight, gauge, float64(s.InFlight), pool)
		ch <- prometheus.MustNewConstMetric(c.poolWaiting, gauge, float64(s.Waiting), pool)
		ch <- prometheus.MustNewConstMetric(c.poolWaits, counter, float64(s.HeadroomWaits), pool)
		for _, r := range s.Regions {
			l := []string{pool, r.Name, string(r.Tier)}
			ch <- prometheus.MustNewConstMetric(c.ejected, gauge, b2f(r.Ejected), l...)
			ch <- prometheus.MustNewConstMetric(c.timesEjected, counter, float64(r.TimesEjected), l...)
			ch <- prometheus.MustNewConstMetric(c.demoted, gauge, b2f(r.Demotion != nil), l...)
			ch <- prometheus.MustNewConstMetric(c.timesDemoted, counter, float64(r.TimesDemoted), l...)
			if r.Demotion != nil {
				ch <- prometheus.MustNewConstMetric(c.demotedSince, gauge, float64(r.Demotion.Since.UnixNano())/1e9, l...)
			}
			ch <- prometheus.MustNewConstMetric(c.failureRate, gauge, r.FailureRate, l...)
			ch <- prometheus.MustNewConstMetric(c.throttle, gauge, r.ThrottleProbability, l...)
			ch <- prometheus.MustNewConstMetric(c.regionFlight, gauge, float64(r.InFlight), l...)
			ch <- prometheus.MustNewConstMetric(c.regionLimit, gauge, float64(r.Limit), l...)
			if w := r.ProvisionedWindow.Duration; w > 0 {
				ch <- prometheus.MustNewConstMetric(c.ptWindow, gauge, w.Seconds(), l...)
				ch <- prometheus.MustNewConstMetric(c.ptWindowUsed, gauge, r.ProvisionedWindowUsed, l...)
			}
			for _, capacity := range capacities(r) {
				_, held := r.HeldBehind[capacity]
				ch <- prometheus.MustNewConstMetric(c.held, gauge, b2f(held), append(l, capacity)...)
			}
		}
	}
}

// capacities are the names of the capacities region r offers that the
// snapshot knows of: its PT, its pay-as-you-go tiers, and any other it is
// held in (a PT's overflow into its location's standard tier).
func capacities(r policy.RegionSnapshot) []string {
	var out []string
	if r.Tier == table.TierProvisioned {
		out = append(out, "provisioned")
	}
	for _, t := range r.PayGoTiers {
		out = append(out, string(t))
	}
	for c := range r.HeldBehind {
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
