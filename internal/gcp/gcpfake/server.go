// Package gcpfake is an in-process fake of Cloud Monitoring's MetricService,
// good enough for the real cloud.google.com/go/monitoring client to read the
// Provisioned Throughput metrics that Vertex AI publishes.
//
// A test declares PT with SetPT and reads it back through ListTimeSeries as
// series shaped like Google's: resource type aiplatform.googleapis.com/PublisherModel
// with its five resource labels, dedicated_gsu_limit as an INT64 gauge,
// dedicated_token_limit as a DOUBLE gauge and consumed_token_throughput as INT64
// delta points (tokens per 60 s sample) labeled by request_type.
//
// The fake honors the filter (equality clauses joined by AND; anything it
// cannot parse is refused with InvalidArgument, so a wrong query fails the
// test), the interval and paging. It keeps no history: a declared PT has data
// at every sample time until it is deleted, always with its current values.
// Every method is safe for concurrent use.
package gcpfake

import (
	"context"
	"fmt"
	"math"
	"net"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/monitoring/apiv3/v2/monitoringpb"
	"google.golang.org/genproto/googleapis/api/metric"
	"google.golang.org/genproto/googleapis/api/monitoredres"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Names as Google publishes them. They are spelled out here, independently of
// the code under test, so a typo on either side fails a test.
const (
	// ResourceType is the monitored resource that carries the PT metrics.
	ResourceType = "aiplatform.googleapis.com/PublisherModel"
	// MetricGSULimit is the GSUs of active PT (INT64 gauge).
	MetricGSULimit = "aiplatform.googleapis.com/publisher/online_serving/dedicated_gsu_limit"
	// MetricTokenLimit is the PT in tokens per second (DOUBLE gauge).
	MetricTokenLimit = "aiplatform.googleapis.com/publisher/online_serving/dedicated_token_limit"
	// MetricConsumed is the tokens consumed per sample (INT64 delta, label request_type).
	MetricConsumed = "aiplatform.googleapis.com/publisher/online_serving/consumed_token_throughput"
	// MetricInvocations is known to the fake but never has data.
	MetricInvocations = "aiplatform.googleapis.com/publisher/online_serving/model_invocation_count"

	// SamplePeriod is the spacing of points, as Google samples these metrics.
	SamplePeriod = 60 * time.Second
	// MaxPointsPerSeries bounds the points of one series in one answer, so a
	// query over a huge interval stays cheap; it is one day of samples.
	MaxPointsPerSeries = 1440
	// MaxPageSize is the page size used when a request asks for none or more.
	MaxPageSize = 100000
)

var resourceLabels = map[string]bool{
	"resource_container": true,
	"location":           true,
	"publisher":          true,
	"model_user_id":      true,
	"model_version_id":   true,
}

// metricLabels lists, per known metric type, the metric labels it carries.
var metricLabels = map[string]map[string]bool{
	MetricGSULimit:    {},
	MetricTokenLimit:  {},
	MetricConsumed:    {"request_type": true},
	MetricInvocations: {"request_type": true, "response_code": true},
}

// PT is one Provisioned Throughput order as Cloud Monitoring reports it.
type PT struct {
	// Project is the resource_container label: the project as the filter names it.
	Project, Location, Publisher string
	// Model is the model_user_id label. When it ends in -NNN, NNN is also the
	// model_version_id label; otherwise that label is "default".
	Model string
	// GSUs is the dedicated_gsu_limit value; the series exists for every set PT.
	GSUs int64
	// TokensPerSecond is the dedicated_token_limit value; the series exists
	// only when it is above zero.
	TokensPerSecond float64
	// Consumed maps request_type to tokens per second; one consumed_token_throughput
	// series per key.
	Consumed map[string]float64
}

type ptKey struct{ project, location, publisher, model string }

func (p PT) key() ptKey { return ptKey{p.Project, p.Location, p.Publisher, p.Model} }

// MetricServer is the fake MetricService. Only ListTimeSeries is implemented;
// every other method answers Unimplemented.
type MetricServer struct {
	monitoringpb.UnimplementedMetricServiceServer

	mu       sync.Mutex
	now      func() time.Time
	pts      map[ptKey]PT
	errs     map[string]error
	calls    map[string]int
	total    int
	pageSize int
}

// NewMetricServer returns an empty fake whose clock is time.Now.
func NewMetricServer() *MetricServer {
	return &MetricServer{
		now:   time.Now,
		pts:   map[ptKey]PT{},
		errs:  map[string]error{},
		calls: map[string]int{},
	}
}

// SetNow sets the clock that stamps points: no point is ever later than now().
// A nil now restores time.Now.
func (s *MetricServer) SetNow(now func() time.Time) {
	if now == nil {
		now = time.Now
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
}

// SetPT declares a PT, replacing any with the same project, location,
// publisher and model. The Consumed map is copied.
func (s *MetricServer) SetPT(pt PT) {
	c := make(map[string]float64, len(pt.Consumed))
	for k, v := range pt.Consumed {
		c[k] = v
	}
	pt.Consumed = c
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pts[pt.key()] = pt
}

// SetMaxPageSize caps the series in one answer below what a request asks, as
// Google may answer with a short page and a next page token; zero or less
// restores MaxPageSize.
func (s *MetricServer) SetMaxPageSize(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pageSize = n
}

// DeletePT removes a PT: its series disappear, as when an order ends.
func (s *MetricServer) DeletePT(project, location, publisher, model string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pts, ptKey{project, location, publisher, model})
}

// SetError makes every ListTimeSeries call for the project (the project in the
// request's name) fail with err, which should be a status error such as
// status.Error(codes.PermissionDenied, "..."). A nil err clears it.
func (s *MetricServer) SetError(project string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		delete(s.errs, project)
		return
	}
	s.errs[project] = err
}

// Calls is the number of ListTimeSeries calls seen for the project named in
// the request (each page is one call), failed ones included.
func (s *MetricServer) Calls(project string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[project]
}

// TotalCalls is the number of ListTimeSeries calls seen for all projects.
func (s *MetricServer) TotalCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// Register adds the fake to a gRPC server as the MetricService.
func (s *MetricServer) Register(g *grpc.Server) {
	monitoringpb.RegisterMetricServiceServer(g, s)
}

// Start serves s on a new gRPC server listening on 127.0.0.1 with a free port.
// It returns "127.0.0.1:port" and a stop func that closes the server and its
// connections.
func Start(s *MetricServer) (addr string, stop func(), err error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	g := grpc.NewServer()
	s.Register(g)
	go func() { _ = g.Serve(lis) }()
	return lis.Addr().String(), g.Stop, nil
}

var projectName = regexp.MustCompile(`^projects/([^/]+)$`)

// ListTimeSeries answers the PT metrics of the declared PTs that match the
// request's filter and have points in its interval.
func (s *MetricServer) ListTimeSeries(_ context.Context, req *monitoringpb.ListTimeSeriesRequest) (*monitoringpb.ListTimeSeriesResponse, error) {
	m := projectName.FindStringSubmatch(req.GetName())
	if m == nil {
		return nil, status.Errorf(codes.InvalidArgument, "name %q is not projects/{project}", req.GetName())
	}
	project := m[1]

	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[project]++
	s.total++
	if err := s.errs[project]; err != nil {
		return nil, err
	}

	q, err := parseQuery(req)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if a := req.GetAggregation(); a != nil && (a.GetAlignmentPeriod() != nil || a.GetPerSeriesAligner() != 0 || a.GetCrossSeriesReducer() != 0 || len(a.GetGroupByFields()) > 0) {
		return nil, status.Error(codes.Unimplemented, "the fake does not aggregate")
	}
	if a := req.GetSecondaryAggregation(); a != nil && (a.GetAlignmentPeriod() != nil || a.GetPerSeriesAligner() != 0 || a.GetCrossSeriesReducer() != 0 || len(a.GetGroupByFields()) > 0) {
		return nil, status.Error(codes.Unimplemented, "the fake does not aggregate")
	}
	if req.GetOrderBy() != "" {
		return nil, status.Error(codes.InvalidArgument, "order_by must be left blank")
	}
	if req.GetPageSize() < 0 {
		return nil, status.Error(codes.InvalidArgument, "page_size must not be negative")
	}

	all := s.series(q, req.GetView() == monitoringpb.ListTimeSeriesRequest_HEADERS)

	offset := 0
	if tok := req.GetPageToken(); tok != "" {
		n, err := strconv.Atoi(tok)
		if err != nil || n < 0 || n > len(all) {
			return nil, status.Errorf(codes.InvalidArgument, "bad page token %q", tok)
		}
		offset = n
	}
	size := int(req.GetPageSize())
	if size == 0 || size > MaxPageSize {
		size = MaxPageSize
	}
	if s.pageSize > 0 && size > s.pageSize {
		size = s.pageSize
	}
	end := min(offset+size, len(all))
	resp := &monitoringpb.ListTimeSeriesResponse{TimeSeries: all[offset:end]}
	if end < len(all) {
		resp.NextPageToken = strconv.Itoa(end)
	}
	return resp, nil
}

// query is a parsed ListTimeSeries request.
type query struct {
	metricType     string
	resourceLabels map[string][]string
	metricLabels   map[string][]string
	start, end     time.Time
}

func parseQuery(req *monitoringpb.ListTimeSeriesRequest) (query, error) {
	q := query{resourceLabels: map[string][]string{}, metricLabels: map[string][]string{}}
	clauses, err := parseFilter(req.GetFilter())
	if err != nil {
		return q, fmt.Errorf("filter: %w", err)
	}
	var resourceType string
	for _, c := range clauses {
		switch {
		case c.field == "metric.type":
			if q.metricType != "" && q.metricType != c.value {
				return q, fmt.Errorf("filter names two metric types")
			}
			q.metricType = c.value
		case c.field == "resource.type":
			resourceType = c.value
		case strings.HasPrefix(c.field, "resource.labels."):
			name := strings.TrimPrefix(c.field, "resource.labels.")
			if !resourceLabels[name] {
				return q, fmt.Errorf("resource %s has no label %q", ResourceType, name)
			}
			q.resourceLabels[name] = append(q.resourceLabels[name], c.value)
		case strings.HasPrefix(c.field, "metric.labels."):
			name := strings.TrimPrefix(c.field, "metric.labels.")
			q.metricLabels[name] = append(q.metricLabels[name], c.value)
		default:
			return q, fmt.Errorf("unsupported filter field %q", c.field)
		}
	}
	if q.metricType == "" {
		return q, fmt.Errorf("filter must name exactly one metric.type")
	}
	known, ok := metricLabels[q.metricType]
	if !ok {
		return q, fmt.Errorf("unknown metric type %q", q.metricType)
	}
	for name := range q.metricLabels {
		if !known[name] {
			return q, fmt.Errorf("metric %s has no label %q", q.metricType, name)
		}
	}
	if resourceType != "" && resourceType != ResourceType {
		return q, fmt.Errorf("metric %s is not written for resource type %q", q.metricType, resourceType)
	}

	iv := req.GetInterval()
	if iv == nil || iv.GetEndTime() == nil {
		return q, fmt.Errorf("interval.end_time is required")
	}
	if err := iv.GetEndTime().CheckValid(); err != nil {
		return q, fmt.Errorf("interval.end_time: %w", err)
	}
	q.end = iv.GetEndTime().AsTime()
	q.start = q.end
	if iv.GetStartTime() != nil {
		if err := iv.GetStartTime().CheckValid(); err != nil {
			return q, fmt.Errorf("interval.start_time: %w", err)
		}
		q.start = iv.GetStartTime().AsTime()
	}
	if q.start.After(q.end) {
		return q, fmt.Errorf("interval.start_time is after end_time")
	}
	return q, nil
}

// matches reports whether every value asked for a label equals the label's value.
func matches(want map[string][]string, labels map[string]string) bool {
	for name, values := range want {
		for _, v := range values {
			if labels[name] != v {
				return false
			}
		}
	}
	return true
}

var versionSuffix = regexp.MustCompile(`-([0-9]{3})$`)

func versionID(model string) string {
	if m := versionSuffix.FindStringSubmatch(model); m != nil {
		return m[1]
	}
	return "default"
}

// sampleTimes are the times of the points in the query's interval, newest
// first as Google returns them: now (or the interval's end, if earlier) and
// every SamplePeriod before it while still after the interval's start. A
// point-in-time interval (start == end) gets one point.
func sampleTimes(q query, now time.Time) []time.Time {
	last := q.end
	if now.Before(last) {
		last = now
	}
	if last.Before(q.start) {
		return nil
	}
	ts := []time.Time{last}
	for t := last.Add(-SamplePeriod); t.After(q.start) && len(ts) < MaxPointsPerSeries; t = t.Add(-SamplePeriod) {
		ts = append(ts, t)
	}
	return ts
}

// series builds every series that matches q, sorted by resource then metric
// labels. Caller must hold s.mu.
func (s *MetricServer) series(q query, headersOnly bool) []*monitoringpb.TimeSeries {
	times := sampleTimes(q, s.now())
	if len(times) == 0 || q.metricType == MetricInvocations {
		return nil
	}
	keys := make([]ptKey, 0, len(s.pts))
	for k := range s.pts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.project != b.project {
			return a.project < b.project
		}
		if a.location != b.location {
			return a.location < b.location
		}
		if a.publisher != b.publisher {
			return a.publisher < b.publisher
		}
		return a.model < b.model
	})

	var out []*monitoringpb.TimeSeries
	for _, k := range keys {
		pt := s.pts[k]
		res := map[string]string{
			"resource_container": pt.Project,
			"location":           pt.Location,
			"publisher":          pt.Publisher,
			"model_user_id":      pt.Model,
			"model_version_id":   versionID(pt.Model),
		}
		if !matches(q.resourceLabels, res) {
			continue
		}
		switch q.metricType {
		case MetricGSULimit:
			if matches(q.metricLabels, nil) {
				gsus := &monitoringpb.TypedValue{Value: &monitoringpb.TypedValue_Int64Value{Int64Value: pt.GSUs}}
				out = append(out, gaugeSeries(q.metricType, res, metric.MetricDescriptor_INT64, gsus, times, headersOnly))
			}
		case MetricTokenLimit:
			if pt.TokensPerSecond > 0 && matches(q.metricLabels, nil) {
				tokens := &monitoringpb.TypedValue{Value: &monitoringpb.TypedValue_DoubleValue{DoubleValue: pt.TokensPerSecond}}
				out = append(out, gaugeSeries(q.metricType, res, metric.MetricDescriptor_DOUBLE, tokens, times, headersOnly))
			}
		case MetricConsumed:
			types := make([]string, 0, len(pt.Consumed))
			for rt := range pt.Consumed {
				types = append(types, rt)
			}
			sort.Strings(types)
			for _, rt := range types {
				ml := map[string]string{"request_type": rt}
				if !matches(q.metricLabels, ml) {
					continue
				}
				ts := newSeries(q.metricType, res, ml, metric.MetricDescriptor_DELTA, metric.MetricDescriptor_INT64)
				if !headersOnly {
					perSample := int64(math.Round(pt.Consumed[rt] * SamplePeriod.Seconds()))
					for _, t := range times {
						ts.Points = append(ts.Points, &monitoringpb.Point{
							Interval: &monitoringpb.TimeInterval{
								StartTime: timestamppb.New(t.Add(-SamplePeriod)),
								EndTime:   timestamppb.New(t),
							},
							Value: &monitoringpb.TypedValue{Value: &monitoringpb.TypedValue_Int64Value{Int64Value: perSample}},
						})
					}
				}
				out = append(out, ts)
			}
		}
	}
	return out
}

func newSeries(metricType string, res, ml map[string]string, kind metric.MetricDescriptor_MetricKind, vt metric.MetricDescriptor_ValueType) *monitoringpb.TimeSeries {
	return &monitoringpb.TimeSeries{
		Metric:     &metric.Metric{Type: metricType, Labels: ml},
		Resource:   &monitoredres.MonitoredResource{Type: ResourceType, Labels: res},
		MetricKind: kind,
		ValueType:  vt,
	}
}

// gaugeSeries is a gauge series of value at each of times; its header alone
// when headersOnly.
func gaugeSeries(metricType string, res map[string]string, vt metric.MetricDescriptor_ValueType, value *monitoringpb.TypedValue, times []time.Time, headersOnly bool) *monitoringpb.TimeSeries {
	ts := newSeries(metricType, res, nil, metric.MetricDescriptor_GAUGE, vt)
	if headersOnly {
		return ts
	}
	for _, t := range times {
		ts.Points = append(ts.Points, &monitoringpb.Point{
			Interval: &monitoringpb.TimeInterval{StartTime: timestamppb.New(t), EndTime: timestamppb.New(t)},
			Value:    value,
		})
	}
	return ts
}
