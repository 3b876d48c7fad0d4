package monitoring

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const (
	rulesFile          = "../../config/prometheus/rules.yaml"
	prometheusRuleFile = "../../config/prometheus/prometheusrule.yaml"
	runbookFile        = "../../docs/runbook.md"
	runbookURL         = "https://github.com/regionwarden/regionwarden/blob/main/docs/runbook.md#"
)

// ruleGroups is a Prometheus rules file.
type ruleGroups struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []rule `json:"rules"`
	} `json:"groups"`
}

type rule struct {
	Alert       string            `json:"alert,omitempty"`
	Record      string            `json:"record,omitempty"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// readFile reads the YAML or JSON file path into v with unmarshal
// (yaml.Unmarshal, or yaml.UnmarshalStrict to refuse fields v lacks).
func readFile(t *testing.T, path string, v any, unmarshal func([]byte, any, ...yaml.JSONOpt) error) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func loadRules(t *testing.T) []rule {
	t.Helper()
	var f ruleGroups
	readFile(t, rulesFile, &f, yaml.UnmarshalStrict)
	var rules []rule
	for _, g := range f.Groups {
		rules = append(rules, g.Rules...)
	}
	if len(rules) == 0 {
		t.Fatalf("%s has no rules", rulesFile)
	}
	return rules
}

// promtool finds promtool, which `make test` installs (Debian's prometheus
// package). Its absence fails the test: the rules would go untested.
func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool is not on the PATH, so the alert rules cannot be tested: run `make prometheus` (it installs Debian's prometheus package) or `make test`: %v", err)
	}
	return path
}

// TestPromtool checks the rules file and runs every unit test of the rules
// with promtool, as Prometheus itself would evaluate them.
func TestPromtool(t *testing.T) {
	bin := promtool(t)
	tests, err := filepath.Glob("testdata/*_test.yaml")
	if err != nil || len(tests) == 0 {
		t.Fatalf("no rule tests in testdata/ (%v)", err)
	}
	for _, args := range [][]string{
		{"check", "rules", rulesFile},
		append([]string{"test", "rules"}, tests...),
	} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		} else {
			t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
		}
	}
}

// ruleTests is the part of a promtool test file this package reads.
type ruleTests struct {
	RuleFiles []string `json:"rule_files"`
	Tests     []struct {
		AlertRuleTest []struct {
			Alertname string `json:"alertname"`
			ExpAlerts []struct {
				ExpLabels map[string]string `json:"exp_labels"`
			} `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

// TestEveryAlertTested checks that every alert has a promtool test in which
// it fires and one in which it does not, so a new rule cannot ship untested.
func TestEveryAlertTested(t *testing.T) {
	fires, silent := map[string]bool{}, map[string]bool{}
	files, _ := filepath.Glob("testdata/*_test.yaml")
	for _, f := range files {
		var rt ruleTests
		readFile(t, f, &rt, yaml.Unmarshal)
		if len(rt.RuleFiles) != 1 || filepath.Clean(rt.RuleFiles[0]) != filepath.Clean("../"+rulesFile) {
			t.Errorf("%s tests %v, want %s", f, rt.RuleFiles, rulesFile)
		}
		for _, tc := range rt.Tests {
			for _, a := range tc.AlertRuleTest {
				if len(a.ExpAlerts) > 0 {
					fires[a.Alertname] = true
				} else {
					silent[a.Alertname] = true
				}
			}
		}
	}
	for _, r := range loadRules(t) {
		if r.Alert == "" {
			continue
		}
		if !fires[r.Alert] {
			t.Errorf("alert %s has no promtool test in which it fires", r.Alert)
		}
		if !silent[r.Alert] {
			t.Errorf("alert %s has no promtool test in which it stays silent", r.Alert)
		}
	}
}

// TestAlertsHaveRunbooks checks that every alert carries a severity that pages
// (critical) or tickets (warning), a summary, and a runbook_url whose anchor
// is a heading of docs/runbook.md.
func TestAlertsHaveRunbooks(t *testing.T) {
	runbook, err := os.ReadFile(runbookFile)
	if err != nil {
		t.Fatal(err)
	}
	anchors := markdownAnchors(runbook)
	for _, r := range loadRules(t) {
		if r.Alert == "" {
			continue
		}
		if s := r.Labels["severity"]; s != "critical" && s != "warning" {
			t.Errorf("%s: severity %q, want critical (page) or warning (ticket)", r.Alert, s)
		}
		if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
			t.Errorf("%s: needs a summary and a description", r.Alert)
		}
		u := r.Annotations["runbook_url"]
		anchor, ok := strings.CutPrefix(u, runbookURL)
		if !ok {
			t.Errorf("%s: runbook_url %q does not point into docs/runbook.md", r.Alert, u)
			continue
		}
		if !anchors[anchor] {
			t.Errorf("%s: runbook_url anchor #%s is no heading of docs/runbook.md", r.Alert, anchor)
		}
	}
}

// markdownAnchors returns the anchors GitHub gives the headings of a
// Markdown page: lower case, spaces to hyphens, other punctuation dropped.
func markdownAnchors(md []byte) map[string]bool {
	drop := regexp.MustCompile(`[^a-z0-9 _-]`)
	out := map[string]bool{}
	for _, line := range bytes.Split(md, []byte("\n")) {
		s := string(line)
		if !strings.HasPrefix(s, "#") {
			continue
		}
		s = strings.TrimSpace(strings.TrimLeft(s, "#"))
		s = drop.ReplaceAllString(strings.ToLower(s), "")
		out[strings.ReplaceAll(s, " ", "-")] = true
	}
	return out
}

// TestPrometheusRuleMatchesRules checks that the PrometheusRule holds exactly
// the rules of the rules file promtool tests.
func TestPrometheusRuleMatchesRules(t *testing.T) {
	var pr struct {
		APIVersion string     `json:"apiVersion"`
		Kind       string     `json:"kind"`
		Spec       ruleGroups `json:"spec"`
	}
	readFile(t, prometheusRuleFile, &pr, yaml.Unmarshal)
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" {
		t.Fatalf("%s is a %s %s", prometheusRuleFile, pr.APIVersion, pr.Kind)
	}
	var want ruleGroups
	readFile(t, rulesFile, &want, yaml.Unmarshal)
	if !reflect.DeepEqual(pr.Spec, want) {
		t.Errorf("%s differs from %s: run `make prometheus-rule`", prometheusRuleFile, rulesFile)
	}
}
