package gcp

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/monitoring/apiv3/v2/monitoringpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/regionwarden/regionwarden/internal/gcp/gcpfake"
)

// wantFacts is what a declared PT should read back as.
func wantFacts(pt gcpfake.PT) Facts {
	f := Facts{Location: pt.Location, Publisher: pt.Publisher, Model: pt.Model, GSUs: pt.GSUs, TokensPerSecond: pt.TokensPerSecond}
	if len(pt.Consumed) > 0 {
		f.Consumed = map[string]float64{}
		for k, v := range pt.Consumed {
			f.Consumed[k] = v
		}
	}
	return f
}

func equalFacts(a, b Facts) bool {
	if a.Location != b.Location || a.Publisher != b.Publisher || a.Model != b.Model ||
		a.GSUs != b.GSUs || a.TokensPerSecond != b.TokensPerSecond || len(a.Consumed) != len(b.Consumed) {
		return false
	}
	for k, v := range a.Consumed {
		if w, ok := b.Consumed[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestDeclaredFactsReadBack(t *testing.T) {
	clk := newClock()
	fake, src := startFake(t, clk)
	// Declared out of order, to see the entries sorted.
	declared := []gcpfake.PT{
		{Project: "p1", Location: "us-central1", Publisher: "google", Model: "gemini-2.5-pro", GSUs: 2, TokensPerSecond: 1000},
		{Project: "p1", Location: "europe-west1", Publisher: "google", Model: "gemini-2.5-flash-lite", GSUs: 5, TokensPerSecond: 8000,
			Consumed: map[string]float64{RequestTypeDedicated: 6000, RequestTypeSpillover: 500, RequestTypeShared: 25}},
		{Project: "p1", Location: "europe-west1", Publisher: "google", Model: "gemini-2.0-flash-001", GSUs: 1},
	}
	for _, pt := range declared {
		fake.SetPT(pt)
	}
	fake.SetPT(gcpfake.PT{Project: "other", Location: "europe-west1", Publisher: "google", Model: "gemini-2.5-pro", GSUs: 40})

	got, err := src.ProvisionedThroughput(context.Background(), "p1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Project != "p1" || !got.FetchedAt.Equal(clk.Now()) {
		t.Errorf("project %q fetched at %v, want p1 at %v", got.Project, got.FetchedAt, clk.Now())
	}
	want := []Facts{wantFacts(declared[2]), wantFacts(declared[1]), wantFacts(declared[0])}
	if len(got.Entries) != len(want) {
		t.Fatalf("got %d entries, want %d: %+v", len(got.Entries), len(want), got.Entries)
	}
	for i := range want {
		if !equalFacts(got.Entries[i], want[i]) {
			t.Errorf("entry %d = %+v, want %+v", i, got.Entries[i], want[i])
		}
	}
	if calls := fake.Calls("p1"); calls != 3 {
		t.Errorf("made %d calls for one project, want one per metric (3)", calls)
	}

	flash, ok := got.Lookup("europe-west1", "google", "gemini-2.5-flash-lite")
	if !ok {
		t.Fatal("flash-lite not found")
	}
	if u := flash.Utilization(); u != 6000.0/8000 {
		t.Errorf("utilization = %v, want %v", u, 6000.0/8000)
	}
	if r := flash.SpilloverRatio(); r != 500.0/6500 {
		t.Errorf("spillover ratio = %v, want %v", r, 500.0/6500)
	}
}

func TestMissingGSUSeriesMeansNoEntry(t *testing.T) {
	clk := newClock()
	fake, src := startFake(t, clk)
	fake.SetPT(gcpfake.PT{Project: "p", Location: "europe-west1", Publisher: "google", Model: "gemini-2.5-pro", GSUs: 3, TokensPerSecond: 900})
	fake.SetPT(gcpfake.PT{Project: "p", Location: "us-east5", Publisher: "google", Model: "gemini-2.5-pro", GSUs: 1})

	got, err := src.ProvisionedThroughput(context.Background(), "p")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Entries) != 2 {
		t.Fatalf("got %d entries before the order ended, want 2", len(got.Entries))
	}

	fake.DeletePT("p", "europe-west1", "google", "gemini-2.5-pro")
	got, err = src.ProvisionedThroughput(context.Background(), "p")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got.Lookup("europe-west1", "google", "gemini-2.5-pro"); ok {
		t.Error("an ended order still has an entry")
	}
	if _, ok := got.Lookup("us-east5", "google", "gemini-2.5-pro"); !ok {
		t.Error("the remaining order lost its entry")
	}

	before := fake.Calls("empty")
	got, err = src.ProvisionedThroughput(context.Background(), "empty")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Entries) != 0 {
		t.Errorf("a project without PT has entries: %+v", got.Entries)
	}
	if calls := fake.Calls("empty") - before; calls != 1 {
		t.Errorf("a project without PT cost %d calls, want 1 (the GSU limits only)", calls)
	}
}

func TestErrorsKeepTheirCode(t *testing.T) {
	for _, code := range []codes.Code{codes.PermissionDenied, codes.Unavailable, codes.ResourceExhausted, codes.NotFound} {
		t.Run(code.String(), func(t *testing.T) {
			clk := newClock()
			fake, src := startFake(t, clk)
			fake.SetPT(gcpfake.PT{Project: "p", Location: "europe-west1", Publisher: "google", Model: "m", GSUs: 1})
			fake.SetError("p", status.Error(code, "from the fake"))

			_, err := src.ProvisionedThroughput(context.Background(), "p")
			if err == nil {
				t.Fatal("no error")
			}
			if got := Code(err); got != code {
				t.Errorf("Code(err) = %v, want %v (err: %v)", got, code, err)
			}
			if got := status.Code(err); got != code {
				t.Errorf("status.Code(err) = %v, want %v", got, code)
			}
			if !strings.Contains(err.Error(), "project p") {
				t.Errorf("error %q does not name the project", err)
			}
			if calls := fake.Calls("p"); calls != 1 {
				t.Errorf("made %d calls, want 1: the source does not retry", calls)
			}
		})
	}
}

func TestCodeThroughWrapping(t *testing.T) {
	base := status.Error(codes.PermissionDenied, "denied")
	for _, tc := range []struct {
		name string
		err  error
		want codes.Code
	}{
		{"nil", nil, codes.OK},
		{"status", base, codes.PermissionDenied},
		{"wrapped twice", fmt.Errorf("outer: %w", fmt.Errorf("inner: %w", base)), codes.PermissionDenied},
		{"deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), codes.DeadlineExceeded},
		{"canceled", context.Canceled, codes.Canceled},
		{"plain", fmt.Errorf("plain"), codes.Unknown},
	} {
		if got := Code(tc.err); got != tc.want {
			t.Errorf("%s: Code = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestModelVersionSuffixThroughMonitoring(t *testing.T) {
	clk := newClock()
	fake, src := startFake(t, clk)
	fake.SetPT(gcpfake.PT{Project: "p", Location: "europe-west1", Publisher: "google", Model: "gemini-2.5-flash-lite-001", GSUs: 4})
	fake.SetPT(gcpfake.PT{Project: "p", Location: "europe-west1", Publisher: "google", Model: "gemini-2.5-pro", GSUs: 7})
	got, err := src.ProvisionedThroughput(context.Background(), "p")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		model string
		gsus  int64
		found bool
	}{
		{"gemini-2.5-flash-lite", 4, true},
		{"gemini-2.5-flash-lite-001", 4, true},
		{"gemini-2.5-flash-lite-002", 0, false},
		{"gemini-2.5-pro-002", 7, true},
		{"gemini-2.5-flash", 0, false},
	} {
		f, ok := got.Lookup("europe-west1", "google", tc.model)
		if ok != tc.found || f.GSUs != tc.gsus {
			t.Errorf("Lookup(%q) = %d GSUs, found %v; want %d, %v", tc.model, f.GSUs, ok, tc.gsus, tc.found)
		}
	}
}

func TestPagesAreAllRead(t *testing.T) {
	clk := newClock()
	fake, src := startFake(t, clk)
	const n = 25
	for i := range n {
		fake.SetPT(gcpfake.PT{Project: "p", Location: "europe-west1", Publisher: "google", Model: fmt.Sprintf("model-%02d", i),
			GSUs: int64(i + 1), TokensPerSecond: float64(100 * (i + 1)), Consumed: map[string]float64{RequestTypeDedicated: float64(i)}})
	}
	const pageSize = 4
	fake.SetMaxPageSize(pageSize)

	got, err := src.ProvisionedThroughput(context.Background(), "p")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Entries) != n {
		t.Fatalf("got %d entries over pages, want %d", len(got.Entries), n)
	}
	for i, e := range got.Entries {
		if e.GSUs != int64(i+1) || e.TokensPerSecond != float64(100*(i+1)) || e.Consumed[RequestTypeDedicated] != float64(i) {
			t.Errorf("entry %d = %+v", i, e)
		}
	}
	pages := (n + pageSize - 1) / pageSize
	if calls := fake.Calls("p"); calls != 3*pages {
		t.Errorf("made %d calls, want %d pages for each of 3 metrics", calls, 3*pages)
	}
}

func TestNewMonitoringSourceWithoutCredentialsSaysWhatToDo(t *testing.T) {
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", t.TempDir()+"/missing.json")
	_, err := NewMonitoringSource(context.Background(), Options{})
	if err == nil {
		t.Fatal("no error without credentials")
	}
	for _, advice := range []string{"Workload Identity", "GOOGLE_APPLICATION_CREDENTIALS", "--gcp-insecure"} {
		if !strings.Contains(err.Error(), advice) {
			t.Errorf("error %q does not mention %s", err, advice)
		}
	}
	if _, err := NewMonitoringSource(context.Background(), Options{Insecure: true}); err == nil {
		t.Error("an insecure source without an endpoint was accepted")
	}
}

// TestPointValues checks that limits and consumption read INT64 and DOUBLE
// points alike, as Google may publish either.
func TestPointValues(t *testing.T) {
	at := func(sec int64) *timestamppb.Timestamp {
		return timestamppb.New(t0.Add(time.Duration(sec) * time.Second))
	}
	i64 := func(v int64) *monitoringpb.TypedValue {
		return &monitoringpb.TypedValue{Value: &monitoringpb.TypedValue_Int64Value{Int64Value: v}}
	}
	f64 := func(v float64) *monitoringpb.TypedValue {
		return &monitoringpb.TypedValue{Value: &monitoringpb.TypedValue_DoubleValue{DoubleValue: v}}
	}
	gauge := func(sec int64, v *monitoringpb.TypedValue) *monitoringpb.Point {
		return &monitoringpb.Point{Interval: &monitoringpb.TimeInterval{StartTime: at(sec), EndTime: at(sec)}, Value: v}
	}
	delta := func(from, to int64, v *monitoringpb.TypedValue) *monitoringpb.Point {
		return &monitoringpb.Point{Interval: &monitoringpb.TimeInterval{StartTime: at(from), EndTime: at(to)}, Value: v}
	}
	for _, tc := range []struct {
		name   string
		points []*monitoringpb.Point
		latest float64
		rate   float64
	}{
		{"int64 newest first", []*monitoringpb.Point{gauge(-60, i64(8)), gauge(-120, i64(7))}, 8, 0},
		{"double oldest first", []*monitoringpb.Point{gauge(-120, f64(1.5)), gauge(-60, f64(2.5))}, 2.5, 0},
		{"int64 deltas", []*monitoringpb.Point{delta(-60, 0, i64(600)), delta(-120, -60, i64(1200))}, 600, 15},
		{"double deltas", []*monitoringpb.Point{delta(-30, 0, f64(30)), delta(-90, -30, f64(60))}, 30, 1},
	} {
		ts := &monitoringpb.TimeSeries{Points: tc.points}
		if v, ok := latest(ts); !ok || v != tc.latest {
			t.Errorf("%s: latest = %v, %v; want %v", tc.name, v, ok, tc.latest)
		}
		if tc.rate == 0 {
			continue
		}
		if r, ok := rate(ts); !ok || r != tc.rate {
			t.Errorf("%s: rate = %v, %v; want %v", tc.name, r, ok, tc.rate)
		}
	}
	if _, ok := latest(&monitoringpb.TimeSeries{}); ok {
		t.Error("a series without points has a latest value")
	}
}
