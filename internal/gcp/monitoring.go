package gcp

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"cloud.google.com/go/auth/credentials"
	monitoring "cloud.google.com/go/monitoring/apiv3/v2"
	"cloud.google.com/go/monitoring/apiv3/v2/monitoringpb"
	"github.com/googleapis/gax-go/v2"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/regionwarden/regionwarden/internal/defaults"
)

// tracerName is the instrumentation scope of the spans around Cloud
// Monitoring calls. The client's gRPC calls are spans of their own (the
// Google client libraries instrument them with otelgrpc), children of these.
const tracerName = "github.com/regionwarden/regionwarden/internal/gcp"

// What Vertex AI publishes to Cloud Monitoring about PT.
const (
	// ResourceType is the monitored resource of publisher models.
	ResourceType = "aiplatform.googleapis.com/PublisherModel"
	// MetricGSULimit is the GSUs of active PT, a gauge.
	MetricGSULimit = "aiplatform.googleapis.com/publisher/online_serving/dedicated_gsu_limit"
	// MetricTokenLimit is the tokens per second that the PT buys, a gauge.
	MetricTokenLimit = "aiplatform.googleapis.com/publisher/online_serving/dedicated_token_limit"
	// MetricConsumed is the tokens used per sample, a delta labeled request_type.
	MetricConsumed = "aiplatform.googleapis.com/publisher/online_serving/consumed_token_throughput"

	// ScopeMonitoringRead is the OAuth scope that reading time series needs.
	ScopeMonitoringRead = "https://www.googleapis.com/auth/monitoring.read"
	// DefaultEndpoint is Google's Cloud Monitoring API.
	DefaultEndpoint = "monitoring.googleapis.com:443"
	// DefaultTimeout bounds one ProvisionedThroughput call.
	DefaultTimeout = 30 * time.Second

	// GaugeWindow is how far back the limits are read: Google samples them
	// every 60 s and may publish a few minutes late.
	GaugeWindow = 10 * time.Minute
	// ConsumedWindow is the window over which consumption is averaged.
	ConsumedWindow = 5 * time.Minute
)

// Options configure a MonitoringSource. Every zero value means the default.
type Options struct {
	// Endpoint is the Monitoring API's host:port; empty means DefaultEndpoint.
	Endpoint string
	// Insecure dials Endpoint in plaintext without credentials, for emulators
	// and tests. It needs an Endpoint. False means TLS with Application
	// Default Credentials, which must be found at construction.
	Insecure bool
	// Timeout bounds one ProvisionedThroughput call, all its pages included;
	// zero means DefaultTimeout.
	Timeout time.Duration
	// Now is the clock that ends the windows; nil means time.Now.
	Now func() time.Time
}

// MonitoringSource reads PT facts from Cloud Monitoring. A call makes at most
// one paged ListTimeSeries per metric, whatever the number of entries, and
// never retries: the caller's requeue is the retry, so an outage does not
// multiply calls. It is safe for concurrent use.
type MonitoringSource struct {
	client  *monitoring.MetricClient
	timeout time.Duration
	now     func() time.Time
}

var _ Source = (*MonitoringSource)(nil)

// NewMonitoringSource connects to Cloud Monitoring. Without Insecure it finds
// Application Default Credentials now, and fails with advice when there are
// none, so a misconfigured operator stops at startup rather than at the first
// verification.
func NewMonitoringSource(ctx context.Context, o Options) (*MonitoringSource, error) {
	var opts []option.ClientOption
	switch {
	case o.Insecure:
		if o.Endpoint == "" {
			return nil, errors.New("gcp: an insecure Cloud Monitoring connection needs an explicit endpoint (an emulator's host:port)")
		}
		opts = append(opts,
			option.WithEndpoint(o.Endpoint),
			option.WithoutAuthentication(),
			option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	default:
		creds, err := credentials.DetectDefault(&credentials.DetectOptions{Scopes: []string{ScopeMonitoringRead}})
		if err != nil {
			return nil, fmt.Errorf("gcp: no Google Cloud credentials for Cloud Monitoring: %w; "+
				"on GKE, enable Workload Identity and bind the operator's Kubernetes service account to a Google service account with roles/monitoring.viewer; "+
				"elsewhere, set GOOGLE_APPLICATION_CREDENTIALS to a service account key file or run 'gcloud auth application-default login'; "+
				"against an emulator, use --gcp-insecure with its endpoint", err)
		}
		opts = append(opts, option.WithAuthCredentials(creds))
		if o.Endpoint != "" {
			opts = append(opts, option.WithEndpoint(o.Endpoint))
		}
	}
	client, err := monitoring.NewMetricClient(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("gcp: Cloud Monitoring client: %w", err)
	}
	s := &MonitoringSource{client: client, timeout: o.Timeout, now: o.Now}
	defaults.Positive(&s.timeout, DefaultTimeout)
	if s.now == nil {
		s.now = time.Now
	}
	return s, nil
}

// Close releases the client's connections.
func (s *MonitoringSource) Close() error { return s.client.Close() }

type factsKey struct{ location, publisher, model string }

// ProvisionedThroughput reads the project's PT facts: the GSU limits first,
// and, only when there is some PT, the token limits and consumption. The
// project is matched against the resource_container label, so it must be given
// as Monitoring labels the project's resources.
func (s *MonitoringSource) ProvisionedThroughput(ctx context.Context, project string) (*ProjectFacts, error) {
	if project == "" || strings.ContainsAny(project, "/\"\\") {
		return nil, status.Errorf(codes.InvalidArgument, "gcp: invalid project %q", project)
	}
	ctx, span := otel.Tracer(tracerName).Start(ctx, "cloudmonitoring ProvisionedThroughput", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("cloud.provider", "gcp"), attribute.String("cloud.account.id", project)))
	defer span.End()
	out, err := s.provisionedThroughput(ctx, project)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(otelcodes.Error, Code(err).String())
		return nil, err
	}
	span.SetAttributes(attribute.Int("regionwarden.pt.entries", len(out.Entries)))
	return out, nil
}

// provisionedThroughput is ProvisionedThroughput's work, inside its span.
func (s *MonitoringSource) provisionedThroughput(ctx context.Context, project string) (*ProjectFacts, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	now := s.now()
	out := &ProjectFacts{Project: project, FetchedAt: now}

	gsus, err := s.list(ctx, project, MetricGSULimit, now.Add(-GaugeWindow), now)
	if err != nil {
		return nil, err
	}
	byKey := map[factsKey]*Facts{}
	for _, ts := range gsus {
		v, ok := latest(ts)
		if !ok {
			continue
		}
		k := seriesKey(ts)
		f := byKey[k]
		if f == nil {
			f = &Facts{Location: k.location, Publisher: k.publisher, Model: k.model}
			byKey[k] = f
		}
		// Several model versions of one model: the largest limit stands.
		f.GSUs = max(f.GSUs, int64(v))
	}
	if len(byKey) == 0 {
		return out, nil
	}

	tokens, err := s.list(ctx, project, MetricTokenLimit, now.Add(-GaugeWindow), now)
	if err != nil {
		return nil, err
	}
	for _, ts := range tokens {
		if f := byKey[seriesKey(ts)]; f != nil {
			if v, ok := latest(ts); ok {
				f.TokensPerSecond = max(f.TokensPerSecond, v)
			}
		}
	}

	used, err := s.list(ctx, project, MetricConsumed, now.Add(-ConsumedWindow), now)
	if err != nil {
		return nil, err
	}
	for _, ts := range used {
		f := byKey[seriesKey(ts)]
		if f == nil {
			continue
		}
		rt := ts.GetMetric().GetLabels()["request_type"]
		if rt == "" {
			continue
		}
		if r, ok := rate(ts); ok {
			if f.Consumed == nil {
				f.Consumed = map[string]float64{}
			}
			// Series of different model versions are concurrent traffic: they add.
			f.Consumed[rt] += r
		}
	}

	out.Entries = make([]Facts, 0, len(byKey))
	for _, f := range byKey {
		out.Entries = append(out.Entries, *f)
	}
	sort.Slice(out.Entries, func(i, j int) bool {
		a, b := out.Entries[i], out.Entries[j]
		if a.Location != b.Location {
			return a.Location < b.Location
		}
		if a.Publisher != b.Publisher {
			return a.Publisher < b.Publisher
		}
		return a.Model < b.Model
	})
	return out, nil
}

// list reads every series of one metric for the project over [start, end],
// all pages. Errors keep their gRPC status.
func (s *MonitoringSource) list(ctx context.Context, project, metricType string, start, end time.Time) ([]*monitoringpb.TimeSeries, error) {
	req := &monitoringpb.ListTimeSeriesRequest{
		Name: "projects/" + project,
		Filter: fmt.Sprintf(`metric.type = %q AND resource.type = %q AND resource.labels.resource_container = %q`,
			metricType, ResourceType, project),
		Interval: &monitoringpb.TimeInterval{StartTime: timestamppb.New(start), EndTime: timestamppb.New(end)},
		View:     monitoringpb.ListTimeSeriesRequest_FULL,
	}
	it := s.client.ListTimeSeries(ctx, req, gax.WithRetry(nil))
	var out []*monitoringpb.TimeSeries
	for ts, err := range it.All() {
		if err != nil {
			return nil, fmt.Errorf("gcp: list %s for project %s: %w", metricType[strings.LastIndexByte(metricType, '/')+1:], project, err)
		}
		out = append(out, ts)
	}
	return out, nil
}

func seriesKey(ts *monitoringpb.TimeSeries) factsKey {
	l := ts.GetResource().GetLabels()
	return factsKey{location: l["location"], publisher: l["publisher"], model: l["model_user_id"]}
}

// value reads a point's number, INT64 or DOUBLE alike.
func value(p *monitoringpb.Point) (float64, bool) {
	switch v := p.GetValue().GetValue().(type) {
	case *monitoringpb.TypedValue_Int64Value:
		return float64(v.Int64Value), true
	case *monitoringpb.TypedValue_DoubleValue:
		return v.DoubleValue, true
	}
	return 0, false
}

// latest is the value of the series' point with the latest end time.
func latest(ts *monitoringpb.TimeSeries) (float64, bool) {
	var (
		best  float64
		at    time.Time
		found bool
	)
	for _, p := range ts.GetPoints() {
		v, ok := value(p)
		if !ok {
			continue
		}
		end := p.GetInterval().GetEndTime().AsTime()
		if !found || end.After(at) {
			best, at, found = v, end, true
		}
	}
	return best, found
}

// rate turns a delta series into a per-second rate: the sum of its values over
// the sum of its points' intervals.
func rate(ts *monitoringpb.TimeSeries) (float64, bool) {
	var sum, secs float64
	for _, p := range ts.GetPoints() {
		v, ok := value(p)
		if !ok {
			continue
		}
		d := p.GetInterval().GetEndTime().AsTime().Sub(p.GetInterval().GetStartTime().AsTime()).Seconds()
		if d <= 0 {
			continue
		}
		sum += v
		secs += d
	}
	if secs == 0 {
		return 0, false
	}
	return sum / secs, true
}
