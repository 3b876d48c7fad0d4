package gcpfake

import (
	"fmt"
	"strconv"
	"strings"
)

// clause is one `field = "value"` term of a Monitoring filter.
type clause struct {
	field string
	value string
}

// parseFilter reads the subset of the Cloud Monitoring filter language that
// the fake understands: equality clauses on metric.type, resource.type,
// resource.labels.NAME and metric.labels.NAME with a quoted value, joined by
// AND. Anything else (OR, NOT, parentheses, functions, other operators) is an
// error, so a query the fake cannot answer faithfully fails loudly instead of
// matching too much.
func parseFilter(filter string) ([]clause, error) {
	toks, err := tokenize(filter)
	if err != nil {
		return nil, err
	}
	if len(toks) == 0 {
		return nil, fmt.Errorf("empty filter")
	}
	var out []clause
	for i := 0; ; {
		if i+3 > len(toks) {
			return nil, fmt.Errorf("incomplete clause at the end of %q", filter)
		}
		field, op, val := toks[i], toks[i+1], toks[i+2]
		if field.kind != tokIdent || field.text == "AND" {
			return nil, fmt.Errorf("expected a field name, got %q", field.text)
		}
		if op.kind != tokEquals {
			return nil, fmt.Errorf("expected = after %s, got %q (only equality is supported)", field.text, op.text)
		}
		if val.kind != tokString {
			return nil, fmt.Errorf("expected a quoted value after %s =, got %q", field.text, val.text)
		}
		out = append(out, clause{field: field.text, value: val.text})
		i += 3
		if i == len(toks) {
			return out, nil
		}
		if toks[i].kind != tokIdent || toks[i].text != "AND" {
			return nil, fmt.Errorf("expected AND, got %q (only AND joins clauses)", toks[i].text)
		}
		i++
	}
}

type tokKind int

const (
	tokIdent tokKind = iota
	tokEquals
	tokString
)

type token struct {
	kind tokKind
	text string
}

func isIdentByte(c byte, first bool) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
		return true
	case c >= '0' && c <= '9', c == '.':
		return !first
	}
	return false
}

// tokenize splits a filter into identifiers, '=' and quoted strings; any
// other character is an error.
func tokenize(s string) ([]token, error) {
	var toks []token
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '=':
			toks = append(toks, token{kind: tokEquals, text: "="})
			i++
		case c == '"' || c == '\'':
			end := i + 1
			for end < len(s) && s[end] != c {
				if s[end] == '\\' {
					end++
				}
				end++
			}
			if end >= len(s) {
				return nil, fmt.Errorf("unterminated string at offset %d", i)
			}
			raw := s[i : end+1]
			if c == '\'' {
				raw = `"` + strings.ReplaceAll(raw[1:len(raw)-1], `"`, `\"`) + `"`
			}
			v, err := strconv.Unquote(raw)
			if err != nil {
				return nil, fmt.Errorf("bad string %s: %w", s[i:end+1], err)
			}
			toks = append(toks, token{kind: tokString, text: v})
			i = end + 1
		case isIdentByte(c, true):
			end := i + 1
			for end < len(s) && isIdentByte(s[end], false) {
				end++
			}
			toks = append(toks, token{kind: tokIdent, text: s[i:end]})
			i = end
		default:
			return nil, fmt.Errorf("unsupported character %q at offset %d", c, i)
		}
	}
	return toks, nil
}
