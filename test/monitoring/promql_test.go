package monitoring

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode"
)

// selector is one vector selector of a PromQL expression: a metric name and
// the label names its matchers use.
type selector struct {
	Metric string
	Labels []string
}

// query is what a PromQL expression names: its selectors, and the label names
// of its by, without, on, ignoring, group_left and group_right clauses.
type query struct {
	Selectors []selector
	Grouping  []string
}

// PromQL words that are not metric names where they stand alone.
var promqlKeywords = map[string]bool{
	"and": true, "or": true, "unless": true, "bool": true, "offset": true, "atan2": true,
	"inf": true, "nan": true, "start": true, "end": true,
}

var groupingKeywords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
}

// parsePromQL finds the selectors and grouping labels of a PromQL expression
// as Prometheus's lexer reads it: strings, numbers, durations and ranges are
// skipped; an identifier followed by "(" is a function or an aggregation; a
// grouping keyword's parenthesised list holds label names; every other
// identifier is a metric name, with its matchers in the braces after it.
// Grafana's variables ($pool, ${pool}, $__rate_interval) stand where strings
// or durations do and are skipped. It is no full parser: it reads the
// expressions this repository ships, and errs on what it does not know.
func parsePromQL(expr string) (query, error) {
	toks, err := lexPromQL(expr)
	if err != nil {
		return query{}, err
	}
	var q query
	for i := 0; i < len(toks); i++ {
		tok := toks[i]
		next := ""
		if i+1 < len(toks) {
			next = toks[i+1]
		}
		switch {
		case tok == "{":
			// A selector without a name before its braces.
			return query{}, fmt.Errorf("a selector without a metric name in %q", expr)
		case !isIdent(tok):
			continue
		case groupingKeywords[strings.ToLower(tok)]:
			if next != "(" {
				if strings.HasPrefix(tok, "group_") {
					continue // group_left without labels
				}
				return query{}, fmt.Errorf("%s without a label list in %q", tok, expr)
			}
			i += 2
			for ; i < len(toks) && toks[i] != ")"; i++ {
				if toks[i] != "," {
					q.Grouping = append(q.Grouping, toks[i])
				}
			}
		case promqlKeywords[strings.ToLower(tok)], next == "(", next == "by", next == "without":
			// A keyword, a function, or an aggregation (sum by (x) (...)).
			continue
		default:
			s := selector{Metric: tok}
			if next == "{" {
				i += 2
				for ; i < len(toks) && toks[i] != "}"; i++ {
					if toks[i] == "," {
						continue
					}
					if i+2 >= len(toks) || !isIdent(toks[i]) || !isMatchOp(toks[i+1]) {
						return query{}, fmt.Errorf("cannot read the matchers of %s in %q", tok, expr)
					}
					s.Labels = append(s.Labels, toks[i])
					i += 2
				}
			}
			q.Selectors = append(q.Selectors, s)
		}
	}
	return q, nil
}

func isIdent(tok string) bool {
	r := []rune(tok)
	return len(r) > 0 && (unicode.IsLetter(r[0]) || r[0] == '_' || r[0] == ':')
}

func isMatchOp(tok string) bool { return tok == "=" || tok == "!=" || tok == "=~" || tok == "!~" }

// lexPromQL splits an expression into identifiers, punctuation and operators;
// strings, numbers, durations, ranges and Grafana variables come out as one
// token each ("" for a string, "0" for a number, "[]" for a range).
func lexPromQL(s string) ([]string, error) {
	var toks []string
	r := []rune(s)
	for i := 0; i < len(r); {
		c := r[i]
		switch {
		case unicode.IsSpace(c):
			i++
		case c == '#': // a comment, to the end of the line
			for i < len(r) && r[i] != '\n' {
				i++
			}
		case c == '"' || c == '\'' || c == '`':
			j := i + 1
			for ; j < len(r) && r[j] != c; j++ {
				if r[j] == '\\' && c != '`' {
					j++
				}
			}
			if j >= len(r) {
				return nil, fmt.Errorf("unterminated string in %q", s)
			}
			toks = append(toks, `""`)
			i = j + 1
		case c == '[': // a range or a subquery's resolution: durations and variables
			j := i
			for j < len(r) && r[j] != ']' {
				j++
			}
			if j >= len(r) {
				return nil, fmt.Errorf("unterminated range in %q", s)
			}
			toks = append(toks, "[]")
			i = j + 1
		case c == '$': // a Grafana variable: $name or ${name}
			j := i + 1
			if j < len(r) && r[j] == '{' {
				for j < len(r) && r[j] != '}' {
					j++
				}
				j++
			} else {
				for j < len(r) && (unicode.IsLetter(r[j]) || unicode.IsDigit(r[j]) || r[j] == '_') {
					j++
				}
			}
			toks = append(toks, "0")
			i = j
		case unicode.IsDigit(c) || (c == '.' && i+1 < len(r) && unicode.IsDigit(r[i+1])):
			j := i
			for j < len(r) && (unicode.IsDigit(r[j]) || unicode.IsLetter(r[j]) || r[j] == '.' ||
				((r[j] == '+' || r[j] == '-') && (r[j-1] == 'e' || r[j-1] == 'E'))) {
				j++
			}
			toks = append(toks, "0")
			i = j
		case unicode.IsLetter(c) || c == '_' || c == ':':
			j := i
			for j < len(r) && (unicode.IsLetter(r[j]) || unicode.IsDigit(r[j]) || r[j] == '_' || r[j] == ':') {
				j++
			}
			toks = append(toks, string(r[i:j]))
			i = j
		default:
			if i+1 < len(r) {
				if two := string(r[i : i+2]); two == "!=" || two == "=~" || two == "!~" || two == "==" || two == ">=" || two == "<=" {
					toks = append(toks, two)
					i += 2
					continue
				}
			}
			if !strings.ContainsRune("{}(),=<>+-*/%^@", c) {
				return nil, fmt.Errorf("unexpected %q in %q", c, s)
			}
			toks = append(toks, string(c))
			i++
		}
	}
	return toks, nil
}

// TestParsePromQL checks the reader on the shapes the shipped queries use.
func TestParsePromQL(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want query
	}{
		{`up`, query{Selectors: []selector{{Metric: "up"}}}},
		{`sum by (namespace, pool) (rate(a_total{traffic_type=~"ON_DEMAND.*", pool="x"}[5m])) / ignoring(code) b`,
			query{Selectors: []selector{{"a_total", []string{"traffic_type", "pool"}}, {Metric: "b"}}, Grouping: []string{"namespace", "pool", "code"}}},
		{`histogram_quantile(0.99, sum by (le, region) (rate(x_bucket{pool=~"$pool"}[$__rate_interval])))`,
			query{Selectors: []selector{{"x_bucket", []string{"pool"}}}, Grouping: []string{"le", "region"}}},
		{`absent(t == 1) or (k{deployment="r"} > 0 unless on (namespace, deployment) k2{deployment="r"} > 0)`,
			query{Selectors: []selector{{Metric: "t"}, {"k", []string{"deployment"}}, {"k2", []string{"deployment"}}}, Grouping: []string{"namespace", "deployment"}}},
		{`c unless c offset 10m`, query{Selectors: []selector{{Metric: "c"}, {Metric: "c"}}}},
		{`sum(rate(a[1m])) by (pool) > 1e-3 and bool 2`, query{Selectors: []selector{{Metric: "a"}}, Grouping: []string{"pool"}}},
		{`a * on (pool) group_left (tier) b`, query{Selectors: []selector{{Metric: "a"}, {Metric: "b"}}, Grouping: []string{"pool", "tier"}}},
		{"# a comment\nlabel_replace(a{x='y'}, \"dst\", \"$1\", \"x\", \"(.*)\")", query{Selectors: []selector{{"a", []string{"x"}}}}},
	} {
		got, err := parsePromQL(tc.expr)
		if err != nil {
			t.Errorf("%s: %v", tc.expr, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.expr, got, tc.want)
		}
	}
	for _, bad := range []string{`{__name__="a"}`, `a{b}`, `sum by x`, `"open`} {
		if q, err := parsePromQL(bad); err == nil {
			t.Errorf("%s: read as %+v, want an error", bad, q)
		}
	}
}
