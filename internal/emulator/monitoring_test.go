package emulator_test

import (
	"context"
	"errors"
	"testing"
	"time"

	monitoring "cloud.google.com/go/monitoring/apiv3/v2"
	"cloud.google.com/go/monitoring/apiv3/v2/monitoringpb"
	"google.golang.org/api/iterator"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/regionwarden/regionwarden/internal/gcp/gcpfake"
)

// latestPoints reads the newest point of every series of a metric, keyed by
// location and request_type.
func latestPoints(t *testing.T, c *monitoring.MetricClient, metric string) map[[2]string]*monitoringpb.TypedValue {
	t.Helper()
	now := time.Now()
	it := c.ListTimeSeries(t.Context(), &monitoringpb.ListTimeSeriesRequest{
		Name:     "projects/demo-project",
		Filter:   `metric.type = "` + metric + `" AND resource.type = "` + gcpfake.ResourceType + `"`,
		Interval: &monitoringpb.TimeInterval{StartTime: timestamppb.New(now.Add(-5 * time.Minute)), EndTime: timestamppb.New(now)},
	})
	out := map[[2]string]*monitoringpb.TypedValue{}
	for {
		ts, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return out
		}
		if err != nil {
			t.Fatalf("list %s: %v", metric, err)
		}
		if len(ts.GetPoints()) == 0 {
			continue
		}
		key := [2]string{ts.GetResource().GetLabels()["location"], ts.GetMetric().GetLabels()["request_type"]}
		out[key] = ts.GetPoints()[0].GetValue()
	}
}

func TestMonitoringReportsDeclaredPT(t *testing.T) {
	sc, e, clock := startBase(t)
	c, err := monitoring.NewMetricClient(context.Background(), dialOptions(e.MonitoringAddr())...)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()

	gsus := latestPoints(t, c, gcpfake.MetricGSULimit)
	if len(gsus) != 1 || gsus[[2]string{"europe-west1", ""}].GetInt64Value() != 2 {
		t.Fatalf("dedicated_gsu_limit %v, want 2 GSUs in europe-west1 only", gsus)
	}
	tokens := latestPoints(t, c, gcpfake.MetricTokenLimit)
	if tokens[[2]string{"europe-west1", ""}].GetDoubleValue() != 100000 {
		t.Fatalf("dedicated_token_limit %v, want 100000 tokens/s in europe-west1", tokens)
	}

	// In minute 1, serve 5 PT calls and 3 spillover calls each second for
	// 10 seconds; minute 2 then reports the average rate over minute 1.
	pc := client(t, e, "europe-west1")
	var ptTokens, spillTokens int64
	for s := range 10 {
		clock.Set(time.Minute + time.Duration(s)*time.Second)
		for range 8 {
			resp, err := generate(t, pc, sc, "europe-west1", "")
			if err != nil {
				t.Fatal(err)
			}
			u := resp.GetUsageMetadata()
			if u.GetTrafficType() == pt {
				ptTokens += int64(u.GetTotalTokenCount())
			} else {
				spillTokens += int64(u.GetTotalTokenCount())
			}
		}
	}
	clock.Set(2 * time.Minute)
	e.RefreshMonitoring()
	consumed := latestPoints(t, c, gcpfake.MetricConsumed)
	for _, tt := range []struct {
		requestType string
		tokens      int64
	}{{"dedicated", ptTokens}, {"spillover", spillTokens}} {
		// A point holds the tokens of one 60 s sample.
		got := consumed[[2]string{"europe-west1", tt.requestType}].GetInt64Value()
		if got != tt.tokens {
			t.Errorf("consumed_token_throughput{request_type=%s} = %d tokens per sample, want %d", tt.requestType, got, tt.tokens)
		}
	}
}
