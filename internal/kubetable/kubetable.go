// Package kubetable reads a list of resources as `kubectl get` does, as the
// API server's Table (the CRD's printer columns, evaluated by the server),
// and prints it as kubectl prints it, so that the demo and the tests show
// what a person would see without a kubectl binary.
package kubetable

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/rest"
)

// Get lists resource gvr in namespace as a server-side Table.
func Get(ctx context.Context, cfg *rest.Config, gvr schema.GroupVersionResource, namespace string) (*metav1.Table, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	url := fmt.Sprintf("%s/apis/%s/%s/namespaces/%s/%s", strings.TrimRight(cfg.Host, "/"), gvr.Group, gvr.Version, namespace, gvr.Resource)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", gvr.Resource, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("listing %s: HTTP %d: %s", gvr.Resource, resp.StatusCode, body)
	}
	var tbl metav1.Table
	if err := json.NewDecoder(resp.Body).Decode(&tbl); err != nil {
		return nil, fmt.Errorf("listing %s: %w", gvr.Resource, err)
	}
	return &tbl, nil
}

// Cell is the value of row's column called name (as the CRD names it), as
// kubectl prints it; ok is false when the table has no such column.
func Cell(tbl *metav1.Table, row int, name string, now time.Time) (value string, ok bool) {
	for i, c := range tbl.ColumnDefinitions {
		if c.Name == name {
			return format(c, tbl.Rows[row].Cells[i], now), true
		}
	}
	return "", false
}

// Options say how Print prints.
type Options struct {
	// Wide prints the columns of priority above 0 too, as `-o wide` does.
	Wide bool
	// Kind, when set, prefixes each name as `kind/name`, as kubectl does
	// when it prints several resources at once.
	Kind string
	// Indent starts every line.
	Indent string
	// Now is the time ages are counted to; zero means time.Now().
	Now time.Time
}

// Print prints tbl as kubectl does: upper-case headers, columns of
// priority 0 (and, wide, the others), three spaces apart, ages as kubectl
// writes them and <none> for a missing value.
func Print(w io.Writer, tbl *metav1.Table, o Options) error {
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	var cols []int
	for i, c := range tbl.ColumnDefinitions {
		if c.Priority == 0 || o.Wide {
			cols = append(cols, i)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	cells := make([]string, len(cols))
	for j, i := range cols {
		cells[j] = strings.ToUpper(tbl.ColumnDefinitions[i].Name)
	}
	fmt.Fprintln(tw, o.Indent+strings.Join(cells, "\t"))
	for _, r := range tbl.Rows {
		for j, i := range cols {
			var v any
			if i < len(r.Cells) {
				v = r.Cells[i]
			}
			cells[j] = format(tbl.ColumnDefinitions[i], v, now)
		}
		if len(cols) > 0 && cols[0] == 0 && o.Kind != "" {
			cells[0] = o.Kind + "/" + cells[0]
		}
		fmt.Fprintln(tw, o.Indent+strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// format writes one cell as kubectl does.
func format(c metav1.TableColumnDefinition, v any, now time.Time) string {
	if v == nil {
		return "<none>"
	}
	if c.Type == "date" {
		if s, ok := v.(string); ok {
			if t, err := time.Parse(time.RFC3339, s); err == nil {
				return duration.HumanDuration(now.Sub(t))
			}
		}
	}
	if f, ok := v.(float64); ok && c.Type == "integer" {
		return fmt.Sprint(int64(f))
	}
	return fmt.Sprint(v)
}
