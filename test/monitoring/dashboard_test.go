package monitoring

import (
	"encoding/json"
	"regexp"
	"testing"

	"sigs.k8s.io/yaml"
)

const dashboardFile = "../../config/grafana/regionwarden.json"

// dashboard is the part of a Grafana dashboard this package reads.
type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string          `json:"name"`
			Type  string          `json:"type"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	Title   string  `json:"title"`
	Type    string  `json:"type"`
	Panels  []panel `json:"panels"` // a collapsed row's
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	var d dashboard
	readFile(t, dashboardFile, &d, yaml.Unmarshal)
	if d.UID == "" || d.Title == "" {
		t.Fatalf("%s needs a uid and a title", dashboardFile)
	}
	return d
}

// TestDashboardSeriesExported checks every query of the dashboard, and of its
// variables, against the series the router and the operator really export.
func TestDashboardSeriesExported(t *testing.T) {
	d := loadDashboard(t)
	series := allSeries(t)
	queries := 0
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				queries++
				for _, err := range checkQuery(tg.Expr, series) {
					t.Errorf("panel %q: %v", p.Title, err)
				}
			}
		}
	}
	walk(d.Panels)
	labelValues := regexp.MustCompile(`^label_values\(\s*([^,]+?)\s*,\s*(\w+)\s*\)$`)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			_ = json.Unmarshal(v.Query, &q.Query) // older dashboards: a plain string
		}
		m := labelValues.FindStringSubmatch(q.Query)
		if m == nil {
			t.Errorf("variable %s: cannot read its query %q", v.Name, q.Query)
			continue
		}
		queries++
		for _, err := range checkQuery("sum by ("+m[2]+") ("+m[1]+")", series) {
			t.Errorf("variable %s: %v", v.Name, err)
		}
	}
	if queries < 20 {
		t.Errorf("the dashboard has %d queries; did the test stop reading its panels?", queries)
	}
}

// TestDashboardShowsWhatIssuesAsk checks that the dashboard keeps a panel on
// each question an SRE asks of it.
func TestDashboardShowsWhatIssuesAsk(t *testing.T) {
	d := loadDashboard(t)
	uses := map[string]bool{}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			for _, tg := range p.Targets {
				q, _ := parsePromQL(tg.Expr)
				for _, s := range q.Selectors {
					uses[s.Metric] = true
				}
			}
		}
	}
	walk(d.Panels)
	for _, m := range []string{
		"regionwarden_router_traffic_type_total",              // served by traffic type
		"regionwarden_router_tokens_total",                    // tokens by traffic type and direction
		"regionwarden_router_attempts_total",                  // by tier, per-region success
		"regionwarden_provisionedthroughput_utilization",      // PT utilization
		"regionwarden_provisionedthroughput_spillover_ratio",  // spillover
		"regionwarden_router_attempt_duration_seconds_bucket", // per-region latency
		"regionwarden_router_region_ejected",                  // ejections
		"regionwarden_router_region_demoted",                  // demotions
		"regionwarden_router_shed_total",                      // shed
		"regionwarden_router_retries_refused_total",           // retries
		"regionwarden_router_table_loads_total",               // table loads
		"regionwarden_router_table_rejections_total",          // table refusals
	} {
		if !uses[m] {
			t.Errorf("no panel queries %s", m)
		}
	}
}
