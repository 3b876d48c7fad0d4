package monitoring

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/regionwarden/regionwarden/controllers"
	"github.com/regionwarden/regionwarden/router/metrics"
	"github.com/regionwarden/regionwarden/router/policy"
)

// exported maps every series name that may be queried to its label names.
type exported map[string][]string

// targetLabels are added by Prometheus to every series it scrapes from a
// Kubernetes pod (Prometheus Operator's PodMonitor and ServiceMonitor).
var targetLabels = []string{"namespace", "pod", "job", "instance", "container", "service", "endpoint"}

// kubeStateMetrics are the kube-state-metrics series the alerts rely on,
// with the labels they carry (kube-state-metrics v2, deployment metrics).
var kubeStateMetrics = exported{
	"kube_deployment_spec_replicas":             {"namespace", "deployment"},
	"kube_deployment_status_replicas_available": {"namespace", "deployment"},
}

// prometheusBuiltins are the series Prometheus writes itself. ALERTS carries
// each alert's own labels too.
var prometheusBuiltins = exported{
	"up":     {},
	"ALERTS": {"alertname", "alertstate", "severity", "pool", "name", "location", "model", "reason", "deployment"},
}

// routerSeries gathers the router's registry after recording one of
// everything it records, so every family and its label names are present.
func routerSeries(t *testing.T) exported {
	t.Helper()
	m := metrics.New()
	const pool = "acme/google/gemini"
	m.Request(pool, "generateContent", 200, time.Millisecond)
	m.Attempt(pool, "europe-west1", "provisioned", policy.Success, time.Millisecond)
	m.RetryRefused(pool, "budget")
	m.Shed(pool, policy.PriorityDefault, "shed")
	m.InFlight(pool).Inc()
	m.LiveSessions(pool).Inc()
	m.TrafficType(pool, "europe-west1", "PROVISIONED_THROUGHPUT")
	m.TokenSeries(pool, "global", "provisioned", "priority", "ON_DEMAND_PRIORITY", metrics.DirectionOutput).Add(1)
	m.Loaded("", "0123abcd")
	m.Rejected("", "invalid", nil)
	m.ShareStoreUp().Set(1)
	m.WatchPools(func() []policy.Snapshot {
		return []policy.Snapshot{{Project: "acme", Publisher: "google", Model: "gemini",
			Regions: []policy.RegionSnapshot{{Name: "europe-west1", Tier: "provisioned", Demotion: &policy.Demotion{Since: time.Now()}}}}}
	})
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := exported{}
	for _, f := range families {
		var labels []string
		for _, l := range f.GetMetric()[0].GetLabel() {
			labels = append(labels, l.GetName())
		}
		addFamily(out, f.GetName(), f.GetType(), labels)
	}
	return out
}

// operatorSeries describes the operator's own collectors. They are vectors
// whose series exist only once an object is reconciled, so they are read
// from their descriptions, not gathered.
func operatorSeries(t *testing.T) exported {
	t.Helper()
	nameRE := regexp.MustCompile(`fqName: "([^"]+)"`)
	labelsRE := regexp.MustCompile(`variableLabels: \{([^}]*)\}`)
	out := exported{}
	for _, c := range controllers.Collectors() {
		typ := dto.MetricType_GAUGE
		switch c.(type) {
		case *prometheus.CounterVec:
			typ = dto.MetricType_COUNTER
		case *prometheus.HistogramVec:
			typ = dto.MetricType_HISTOGRAM
		}
		ch := make(chan *prometheus.Desc, 16)
		c.Describe(ch)
		close(ch)
		for d := range ch {
			s := d.String()
			name, labels := nameRE.FindStringSubmatch(s), labelsRE.FindStringSubmatch(s)
			if name == nil || labels == nil {
				t.Fatalf("cannot read the description %s (has client_golang changed its format?)", s)
			}
			var ls []string
			for _, l := range strings.Split(labels[1], ",") {
				if l = strings.TrimSuffix(strings.TrimPrefix(l, "c("), ")"); l != "" {
					ls = append(ls, l)
				}
			}
			addFamily(out, name[1], typ, ls)
		}
	}
	if len(out) < 6 {
		t.Fatalf("the operator describes only %v", keys(out))
	}
	return out
}

// addFamily adds a metric family's series: a histogram's _bucket (with le),
// _sum and _count, a summary's quantiles, _sum and _count.
func addFamily(out exported, name string, typ dto.MetricType, labels []string) {
	switch typ {
	case dto.MetricType_HISTOGRAM:
		out[name+"_bucket"] = append(slices.Clone(labels), "le")
		out[name+"_sum"] = labels
		out[name+"_count"] = labels
	case dto.MetricType_SUMMARY:
		out[name] = append(slices.Clone(labels), "quantile")
		out[name+"_sum"] = labels
		out[name+"_count"] = labels
	default:
		out[name] = labels
	}
}

func keys(e exported) []string {
	var k []string
	for n := range e {
		k = append(k, n)
	}
	slices.Sort(k)
	return k
}

// allSeries is everything a query may name.
func allSeries(t *testing.T) exported {
	t.Helper()
	all := exported{}
	for _, e := range []exported{routerSeries(t), operatorSeries(t), kubeStateMetrics, prometheusBuiltins} {
		for n, l := range e {
			all[n] = l
		}
	}
	return all
}

// checkQuery returns what in expr names no exported series or label: every
// selector's metric must be exported with every label its matchers use, and
// every grouping label must be a label of one of its metrics or a target label.
func checkQuery(expr string, series exported) []error {
	q, err := parsePromQL(expr)
	if err != nil {
		return []error{err}
	}
	if len(q.Selectors) == 0 {
		return []error{fmt.Errorf("%q names no series", expr)}
	}
	var errs []error
	known := slices.Clone(targetLabels)
	for _, s := range q.Selectors {
		labels, ok := series[s.Metric]
		if !ok {
			errs = append(errs, fmt.Errorf("%s is exported by neither the router nor the operator", s.Metric))
			continue
		}
		known = append(known, labels...)
		for _, l := range s.Labels {
			if !slices.Contains(labels, l) && !slices.Contains(targetLabels, l) {
				errs = append(errs, fmt.Errorf("%s has no label %q (it has %v)", s.Metric, l, labels))
			}
		}
	}
	for _, l := range q.Grouping {
		if !slices.Contains(known, l) {
			errs = append(errs, fmt.Errorf("no series of %q has the label %q it groups or matches by", expr, l))
		}
	}
	return errs
}

// TestAlertSeriesExported checks every alert's expression against the series
// the router and the operator really export.
func TestAlertSeriesExported(t *testing.T) {
	series := allSeries(t)
	for _, r := range loadRules(t) {
		for _, err := range checkQuery(r.Expr, series) {
			t.Errorf("alert %s%s: %v", r.Alert, r.Record, err)
		}
	}
}

// TestCheckQueryRefuses checks that the check can fail: a misspelled metric, a
// label the metric does not have, and a grouping label nothing carries.
func TestCheckQueryRefuses(t *testing.T) {
	series := allSeries(t)
	for _, expr := range []string{
		`rate(regionwarden_router_request_total[5m])`,
		`regionwarden_router_attempts_total{zone="a"}`,
		`sum by (zone) (regionwarden_router_attempts_total)`,
		`regionwarden_router_request_duration_seconds_bucket{region="x"}`,
		`regionwarden_provisionedthroughput_condition{kind="Ready"}`,
	} {
		if errs := checkQuery(expr, series); len(errs) == 0 {
			t.Errorf("%s: no error", expr)
		}
	}
	for _, expr := range []string{
		`histogram_quantile(0.5, sum by (le, region) (rate(regionwarden_router_attempt_duration_seconds_bucket{pool=~"$pool"}[$__rate_interval])))`,
		`regionwarden_provisionedthroughput_condition{type="Ready", status="False", reason="Expired", namespace="x"}`,
		`sum by (pod) (regionwarden_discovered_provisioned_regions)`,
	} {
		if errs := checkQuery(expr, series); len(errs) != 0 {
			t.Errorf("%s: %v", expr, errs)
		}
	}
}
