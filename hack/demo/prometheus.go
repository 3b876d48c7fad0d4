package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image/color"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/prometheus/common/model"
	"sigs.k8s.io/yaml"

	"github.com/regionwarden/regionwarden/internal/replay"
)

// demoPrometheus is the Prometheus server (Debian's package) that scrapes the
// demo's router and operator and evaluates the alert rules that ship in
// config/prometheus, on the demo's compressed clock.
type demoPrometheus struct {
	url   string
	scale float64
}

// The demo's scrape and evaluation interval, in real time: at a time scale
// of 30 it is 30 s of scenario time, as in a production Prometheus.
const promInterval = time.Second

// startPrometheus writes the scaled rules and a scrape configuration for the
// router and the operator into <work>/prometheus, starts Prometheus with a
// fresh database and waits until it is ready.
func startPrometheus(ctx context.Context, procs *processes, root, work string, scale float64, router, operator string) (*demoPrometheus, error) {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		return nil, fmt.Errorf("the prometheus server is not on the PATH: run `make demo`, which installs Debian's prometheus package (`make prometheus`): %w", err)
	}
	dir := filepath.Join(work, "prometheus")
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	src, err := os.ReadFile(filepath.Join(root, "config", "prometheus", "rules.yaml"))
	if err != nil {
		return nil, err
	}
	rules, err := scaleRules(src, scale)
	if err != nil {
		return nil, fmt.Errorf("config/prometheus/rules.yaml: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), rules, 0o644); err != nil {
		return nil, err
	}
	cfg := fmt.Sprintf(`# Written by the demo: scrape the router and the operator every %[1]s (%[2]s of scenario time).
global:
  scrape_interval: %[1]s
  evaluation_interval: %[1]s
rule_files: [rules.yaml]
scrape_configs:
- job_name: router
  static_configs: [{targets: [%[3]q]}]
- job_name: operator
  # The operator's series carry the namespace of the object they describe.
  honor_labels: true
  static_configs: [{targets: [%[4]q]}]
`, model.Duration(promInterval), model.Duration(time.Duration(float64(promInterval)*scale)), router, operator)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	addr, err := replay.FreeAddr()
	if err != nil {
		return nil, err
	}
	if err := procs.start(ctx, work, "prometheus", bin, nil,
		"--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn"); err != nil {
		return nil, err
	}
	p := &demoPrometheus{url: "http://" + addr, scale: scale}
	// Ready, both targets scraped and the rules evaluated on what was
	// scraped. Prometheus makes its first scrapes a few seconds after it
	// starts (that delay is not compressed), and until then every series is
	// absent: RegionwardenNoRouterReady, whose for: is 4 s at scale 30, fires
	// on nothing and resolves at the first evaluation after the scrapes.
	deadline := time.Now().Add(time.Minute)
	for {
		if err := procs.exited(); err != nil {
			return nil, err
		}
		up, err1 := p.count(ctx, `up == 1`)
		table, err2 := p.count(ctx, `regionwarden_router_table_info`)
		alerts, err3 := p.count(ctx, `ALERTS{alertname="RegionwardenNoRouterReady"}`)
		if err := errors.Join(err1, err2, err3); err == nil && up == 2 && table > 0 && alerts == 0 {
			return p, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("prometheus did not scrape the router and the operator at %s (see %s)", p.url, filepath.Join(work, "prometheus.log"))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// scaleRules rewrites a rules file for a clock that runs scale times faster
// than real time: every duration the rules hold (each rule's for:, and each
// range and offset in its expression) is divided by scale, so "for 10m"
// holds for ten minutes of scenario time. Nothing else changes.
func scaleRules(src []byte, scale float64) ([]byte, error) {
	var f struct {
		Groups []struct {
			Name  string           `json:"name"`
			Rules []map[string]any `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(src, &f); err != nil {
		return nil, err
	}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if s, ok := r["for"].(string); ok {
				d, err := scaleDuration(s, scale)
				if err != nil {
					return nil, fmt.Errorf("%s: for: %w", r["alert"], err)
				}
				r["for"] = d
			}
			expr, err := scaleExpr(fmt.Sprint(r["expr"]), scale)
			if err != nil {
				return nil, fmt.Errorf("%s: expr: %w", r["alert"], err)
			}
			r["expr"] = expr
		}
	}
	out, err := yaml.Marshal(f)
	if err != nil {
		return nil, err
	}
	header := fmt.Sprintf("# config/prometheus/rules.yaml with every duration divided by %g, the demo's time scale.\n", scale)
	return append([]byte(header), out...), nil
}

// PromQL's durations: a range or subquery in brackets, or an offset.
var (
	rangeRE  = regexp.MustCompile(`\[([0-9a-z]+)(:([0-9a-z]*))?\]`)
	offsetRE = regexp.MustCompile(`\boffset\s+([0-9a-z]+)`)
)

func scaleExpr(expr string, scale float64) (string, error) {
	var err error
	scaled := func(s string) string {
		d, e := scaleDuration(s, scale)
		if e != nil {
			err = e
		}
		return d
	}
	expr = rangeRE.ReplaceAllStringFunc(expr, func(m string) string {
		p := rangeRE.FindStringSubmatch(m)
		out := "[" + scaled(p[1])
		if p[2] != "" {
			out += ":"
			if p[3] != "" {
				out += scaled(p[3])
			}
		}
		return out + "]"
	})
	expr = offsetRE.ReplaceAllStringFunc(expr, func(m string) string {
		return "offset " + scaled(offsetRE.FindStringSubmatch(m)[1])
	})
	return expr, err
}

func scaleDuration(s string, scale float64) (string, error) {
	d, err := model.ParseDuration(s)
	if err != nil {
		return "", err
	}
	return model.Duration(max(time.Millisecond, time.Duration(float64(d)/scale).Round(time.Millisecond))).String(), nil
}

// window is a range of scenario time d, in real time, for the demo's queries.
func (p *demoPrometheus) window(d time.Duration) string {
	s, _ := scaleDuration(model.Duration(d).String(), p.scale)
	return s
}

// sample is one point of a range query.
type sample struct {
	at time.Time
	v  float64
}

// series is one series of a range query's answer.
type series struct {
	labels  map[string]string
	samples []sample
}

// percentPoints are samples of a share as points of a chart, in percent, at
// the scenario time at gives each; a sample that is not a number is left
// out, a gap in the line. Prometheus answers NaN for a ratio of two rates
// that are both zero (a window with no calls yet, at the replay's start),
// and Inf for one over zero: as its own graphs do, the chart shows neither
// (the plotter refuses them, and one would make the axis NaN).
func percentPoints(samples []sample, at func(time.Time) time.Duration) []replay.Point {
	var out []replay.Point
	for _, s := range samples {
		if math.IsNaN(s.v) || math.IsInf(s.v, 0) {
			continue
		}
		out = append(out, replay.Point{At: at(s.at), Y: 100 * s.v})
	}
	return out
}

// queryRange asks Prometheus for expr from start to end, one point per step.
func (p *demoPrometheus) queryRange(ctx context.Context, expr string, start, end time.Time, step time.Duration) ([]series, error) {
	q := url.Values{"query": {expr}, "start": {unix(start)}, "end": {unix(end)}, "step": {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url+"/api/v1/query_range?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Values [][2]any          `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("query %s: %w", expr, err)
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("query %s: %s", expr, body.Error)
	}
	var out []series
	for _, r := range body.Data.Result {
		s := series{labels: r.Metric}
		for _, v := range r.Values {
			ts, _ := v[0].(float64)
			f, err := strconv.ParseFloat(fmt.Sprint(v[1]), 64)
			if err != nil {
				continue
			}
			s.samples = append(s.samples, sample{at: time.Unix(0, int64(ts*1e9)), v: f})
		}
		out = append(out, s)
	}
	return out, nil
}

// count is how many series expr returns now.
func (p *demoPrometheus) count(ctx context.Context, expr string) (int, error) {
	now := time.Now()
	ss, err := p.queryRange(ctx, expr, now, now, promInterval)
	return len(ss), err
}

func unix(t time.Time) string { return strconv.FormatFloat(float64(t.UnixNano())/1e9, 'f', 3, 64) }

// firing is one stretch of time an alert fired, in scenario time.
type firing struct {
	alert, severity, labels string
	from, to                time.Duration
	open                    bool // still firing at the end
}

// alertsFired reads from Prometheus's ALERTS series when each alert fired
// between zero (scenario time zero, in real time) and end.
func (p *demoPrometheus) alertsFired(ctx context.Context, zero, end time.Time) ([]firing, error) {
	ss, err := p.queryRange(ctx, `ALERTS{alertstate="firing"}`, zero, end, promInterval)
	if err != nil {
		return nil, err
	}
	scenario := func(t time.Time) time.Duration { return time.Duration(float64(t.Sub(zero)) * p.scale) }
	var out []firing
	for _, s := range ss {
		var labels []string
		for k, v := range s.labels {
			if k != "__name__" && k != "alertname" && k != "alertstate" && k != "severity" {
				labels = append(labels, k+"="+v)
			}
		}
		sort.Strings(labels)
		for i := 0; i < len(s.samples); {
			j := i
			for j+1 < len(s.samples) && s.samples[j+1].at.Sub(s.samples[j].at) <= 2*promInterval {
				j++
			}
			out = append(out, firing{
				alert: s.labels["alertname"], severity: s.labels["severity"], labels: strings.Join(labels, ","),
				from: scenario(s.samples[i].at), to: scenario(s.samples[j].at),
				open: end.Sub(s.samples[j].at) <= 2*promInterval,
			})
			i = j + 1
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].from < out[j].from })
	return out, nil
}

// printAlerts prints the alerts that fired, in scenario time.
func printAlerts(fired []firing, end time.Duration) {
	if len(fired) == 0 {
		fmt.Println("    no alert fired")
		return
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "    ALERT\tSEVERITY\tFIRED (scenario time)\tRESOLVED\tLABELS")
	for _, f := range fired {
		resolved := fmtMinutes(f.to)
		if f.open {
			resolved = "still firing at " + fmtMinutes(end)
		}
		fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\t%s\n", f.alert, f.severity, fmtMinutes(f.from), resolved, f.labels)
	}
	_ = tw.Flush()
}

func fmtMinutes(d time.Duration) string {
	d = d.Round(time.Second)
	return fmt.Sprintf("%d:%02d", int(d.Minutes()), int(d.Seconds())%60)
}

// chartSeries are the key series of the demo's chart, over the same window
// the spillover alert uses.
func (p *demoPrometheus) chartSeries() []struct{ label, expr string } {
	w := p.window(5 * time.Minute)
	return []struct{ label, expr string }{
		{"answers paid as pay-as-you-go (RegionwardenSpillover's share)",
			`sum(rate(regionwarden_router_traffic_type_total{traffic_type=~"ON_DEMAND.*"}[` + w + `])) / sum(rate(regionwarden_router_traffic_type_total{traffic_type=~"ON_DEMAND.*|PROVISIONED_THROUGHPUT"}[` + w + `]))`},
		{"attempts failing in the provisioned region",
			`sum(rate(regionwarden_router_attempts_total{tier="provisioned", outcome="failure"}[` + w + `])) / sum(rate(regionwarden_router_attempts_total{tier="provisioned"}[` + w + `]))`},
		{"calls shed",
			`(sum(rate(regionwarden_router_shed_total[` + w + `])) or vector(0)) / sum(rate(regionwarden_router_requests_total[` + w + `]))`},
		{"calls answered with an error",
			`sum(rate(regionwarden_router_requests_total{code!="200"}[` + w + `])) / sum(rate(regionwarden_router_requests_total[` + w + `]))`},
	}
}

// writeChart draws the key series over the run, with each alert's firing
// stretches shaded, as a PNG at path.
func (p *demoPrometheus) writeChart(ctx context.Context, path, scenario string, zero, end time.Time, fired []firing) error {
	scenarioTime := func(t time.Time) time.Duration { return time.Duration(float64(t.Sub(zero)) * p.scale) }
	c := replay.Chart{
		Title:    fmt.Sprintf("%s through the router, as Prometheus scraped it (5 min windows, scenario time)", scenario),
		YLabel:   "share (%)",
		Duration: scenarioTime(end),
	}
	top := 0.0
	for _, s := range p.chartSeries() {
		ss, err := p.queryRange(ctx, s.expr, zero, end, promInterval)
		if err != nil {
			return err
		}
		l := replay.Line{Label: s.label}
		if len(ss) > 0 {
			l.Points = percentPoints(ss[0].samples, scenarioTime)
		}
		for _, pt := range l.Points {
			top = max(top, pt.Y)
		}
		c.Lines = append(c.Lines, l)
	}
	c.YMax = max(10, 1.25*top)
	shades := []color.NRGBA{{R: 255, G: 120, B: 120, A: 60}, {R: 120, G: 160, B: 255, A: 60}, {R: 120, G: 220, B: 120, A: 60}}
	seen := map[string]color.NRGBA{}
	for _, f := range fired {
		col, ok := seen[f.alert]
		label := ""
		if !ok {
			col = shades[len(seen)%len(shades)]
			seen[f.alert] = col
			label = f.alert + " firing"
		}
		c.Bands = append(c.Bands, replay.Band{From: f.from, To: f.to, Label: label, Color: col})
	}
	return c.Save(path)
}
