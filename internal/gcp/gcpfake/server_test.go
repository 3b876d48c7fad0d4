package gcpfake_test

import (
	"context"
	"testing"
	"time"

	monitoring "cloud.google.com/go/monitoring/apiv3/v2"
	"cloud.google.com/go/monitoring/apiv3/v2/monitoringpb"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/regionwarden/regionwarden/internal/gcp/gcpfake"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// newClient starts the fake on loopback and dials it with the real client.
func newClient(t *testing.T, s *gcpfake.MetricServer) *monitoring.MetricClient {
	t.Helper()
	addr, stop, err := gcpfake.Start(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	c, err := monitoring.NewMetricClient(context.Background(),
		option.WithEndpoint(addr),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func list(c *monitoring.MetricClient, project, filter string, start, end time.Time, pageSize int32) ([]*monitoringpb.TimeSeries, error) {
	it := c.ListTimeSeries(context.Background(), &monitoringpb.ListTimeSeriesRequest{
		Name:     "projects/" + project,
		Filter:   filter,
		Interval: &monitoringpb.TimeInterval{StartTime: timestamppb.New(start), EndTime: timestamppb.New(end)},
		PageSize: pageSize,
	}, gax.WithRetry(nil))
	var out []*monitoringpb.TimeSeries
	for ts, err := range it.All() {
		if err != nil {
			return out, err
		}
		out = append(out, ts)
	}
	return out, nil
}

func newServer() *gcpfake.MetricServer {
	s := gcpfake.NewMetricServer()
	s.SetNow(func() time.Time { return t0 })
	s.SetPT(gcpfake.PT{Project: "p1", Location: "europe-west1", Publisher: "google", Model: "gemini-2.5-flash-lite-001",
		GSUs: 5, TokensPerSecond: 8000, Consumed: map[string]float64{"dedicated": 100, "spillover": 10}})
	s.SetPT(gcpfake.PT{Project: "p1", Location: "us-central1", Publisher: "google", Model: "gemini-2.5-pro", GSUs: 2})
	s.SetPT(gcpfake.PT{Project: "p2", Location: "europe-west1", Publisher: "google", Model: "gemini-2.5-pro", GSUs: 9})
	return s
}

func TestListTimeSeriesShapesSeriesLikeGoogle(t *testing.T) {
	s := newServer()
	c := newClient(t, s)

	gsu, err := list(c, "p1", `metric.type = "`+gcpfake.MetricGSULimit+`" AND resource.type = "`+gcpfake.ResourceType+`" AND resource.labels.resource_container = "p1"`, t0.Add(-10*time.Minute), t0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(gsu) != 2 {
		t.Fatalf("got %d gsu series for p1, want 2", len(gsu))
	}
	first := gsu[0]
	if got := first.GetResource().GetLabels(); got["location"] != "europe-west1" || got["model_user_id"] != "gemini-2.5-flash-lite-001" || got["model_version_id"] != "001" || got["resource_container"] != "p1" {
		t.Errorf("resource labels = %v", got)
	}
	if n := len(first.GetPoints()); n != 10 {
		t.Errorf("got %d points over 10 minutes, want 10", n)
	}
	if v := first.GetPoints()[0].GetValue().GetInt64Value(); v != 5 {
		t.Errorf("gsu = %d, want 5", v)
	}
	if end := first.GetPoints()[0].GetInterval().GetEndTime().AsTime(); !end.Equal(t0) {
		t.Errorf("newest point at %v, want %v", end, t0)
	}

	tok, err := list(c, "p1", `metric.type = "`+gcpfake.MetricTokenLimit+`" AND resource.labels.resource_container = "p1"`, t0.Add(-10*time.Minute), t0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(tok) != 1 || tok[0].GetPoints()[0].GetValue().GetDoubleValue() != 8000 {
		t.Errorf("token limit series = %v, want one of 8000", tok)
	}

	used, err := list(c, "p1", `metric.type = "`+gcpfake.MetricConsumed+`" AND metric.labels.request_type = "spillover"`, t0.Add(-5*time.Minute), t0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(used) != 1 {
		t.Fatalf("got %d spillover series, want 1", len(used))
	}
	p := used[0].GetPoints()[0]
	secs := p.GetInterval().GetEndTime().AsTime().Sub(p.GetInterval().GetStartTime().AsTime()).Seconds()
	if rate := float64(p.GetValue().GetInt64Value()) / secs; rate != 10 {
		t.Errorf("spillover rate = %v tokens/s, want 10", rate)
	}
}

func TestListTimeSeriesPages(t *testing.T) {
	s := gcpfake.NewMetricServer()
	s.SetNow(func() time.Time { return t0 })
	const n = 7
	for i := range n {
		s.SetPT(gcpfake.PT{Project: "p", Location: "europe-west1", Publisher: "google", Model: "m" + string(rune('a'+i)), GSUs: int64(i + 1)})
	}
	c := newClient(t, s)
	got, err := list(c, "p", `metric.type = "`+gcpfake.MetricGSULimit+`"`, t0.Add(-time.Minute), t0, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("got %d series over pages, want %d", len(got), n)
	}
	seen := map[string]bool{}
	for _, ts := range got {
		seen[ts.GetResource().GetLabels()["model_user_id"]] = true
	}
	if len(seen) != n {
		t.Errorf("pages repeated or lost series: %v", seen)
	}
	if calls := s.Calls("p"); calls != 3 {
		t.Errorf("calls = %d, want 3 pages of 3", calls)
	}
}

func TestListTimeSeriesRefusesWhatItCannotAnswer(t *testing.T) {
	c := newClient(t, newServer())
	for _, filter := range []string{
		``,
		`metric.type = "` + gcpfake.MetricGSULimit + `" OR resource.labels.location = "x"`,
		`metric.type != "` + gcpfake.MetricGSULimit + `"`,
		`metric.type = starts_with("aiplatform")`,
		`resource.labels.location = "europe-west1"`,
		`metric.type = "aiplatform.googleapis.com/publisher/online_serving/no_such_metric"`,
		`metric.type = "` + gcpfake.MetricGSULimit + `" AND resource.type = "aiplatform.googleapis.com/Endpoint"`,
		`metric.type = "` + gcpfake.MetricGSULimit + `" AND resource.labels.project_id = "p1"`,
		`metric.type = "` + gcpfake.MetricGSULimit + `" AND metric.labels.request_type = "dedicated"`,
		`metric.type = "` + gcpfake.MetricGSULimit + `" AND`,
	} {
		_, err := list(c, "p1", filter, t0.Add(-time.Minute), t0, 0)
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("filter %q: got %v, want InvalidArgument", filter, err)
		}
	}
}

func TestListTimeSeriesHonoursIntervalAndDeletion(t *testing.T) {
	s := newServer()
	c := newClient(t, s)
	filter := `metric.type = "` + gcpfake.MetricGSULimit + `" AND resource.labels.resource_container = 'p2'`

	got, err := list(c, "p2", filter, t0.Add(time.Hour), t0.Add(2*time.Hour), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Errorf("got %d series for an interval in the future, want none", len(got))
	}
	got, err = list(c, "p2", filter, t0, t0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || len(got[0].GetPoints()) != 1 {
		t.Fatalf("point-in-time query = %v, want one series of one point", got)
	}

	s.DeletePT("p2", "europe-west1", "google", "gemini-2.5-pro")
	got, err = list(c, "p2", filter, t0.Add(-time.Minute), t0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Errorf("got %d series after DeletePT, want none", len(got))
	}
}

func TestSetErrorFailsOnlyThatProject(t *testing.T) {
	s := newServer()
	c := newClient(t, s)
	filter := `metric.type = "` + gcpfake.MetricGSULimit + `"`
	s.SetError("p1", status.Error(codes.PermissionDenied, "monitoring.timeSeries.list denied"))

	if _, err := list(c, "p1", filter, t0.Add(-time.Minute), t0, 0); status.Code(err) != codes.PermissionDenied {
		t.Errorf("p1: got %v, want PermissionDenied", err)
	}
	if _, err := list(c, "p2", filter, t0.Add(-time.Minute), t0, 0); err != nil {
		t.Errorf("p2: %v", err)
	}
	s.SetError("p1", nil)
	if _, err := list(c, "p1", filter, t0.Add(-time.Minute), t0, 0); err != nil {
		t.Errorf("p1 after clearing: %v", err)
	}
	if s.Calls("p1") != 2 || s.Calls("p2") != 1 || s.TotalCalls() != 3 {
		t.Errorf("calls p1=%d p2=%d total=%d, want 2, 1, 3", s.Calls("p1"), s.Calls("p2"), s.TotalCalls())
	}
}
