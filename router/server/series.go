package server

import (
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/regionwarden/regionwarden/router/metrics"
	"github.com/regionwarden/regionwarden/router/policy"
	"github.com/regionwarden/regionwarden/router/table"
	"github.com/regionwarden/regionwarden/router/upstream"
)

// series are the metric series of one pool that nearly every call records
// (an answered call, a successful attempt, the traffic type that served it),
// bound to their labels when the pool is applied: a call then counts with
// no label lookup. The other series (errors, refusals) are looked up when
// they happen.
type series struct {
	m     *metrics.Metrics
	label string
	ok    [len(methods)]boundRequest // answered 200, by method
	// regions are the pool's regions' series, in table order.
	regions []boundRegion
}

type boundRequest struct {
	n prometheus.Counter
	d prometheus.Observer
}

// boundRegion is one region's successful attempts and answers by traffic
// type, one per type this build knows, and its token counters, bound on
// first use.
type boundRegion struct {
	name    string
	tier    table.Tier
	ok      prometheus.Counter
	d       prometheus.Observer
	traffic [len(upstream.TrafficTypes)]prometheus.Counter
	tokens  [2][len(table.PayGoTiers) + 1][len(upstream.TrafficTypes)][2]atomic.Pointer[boundCounter]
}

// boundCounter holds a counter, for an atomic pointer.
type boundCounter struct{ prometheus.Counter }

// methods are the methods of the surfaces, in the order of series.ok.
var methods = [...]string{methodGenerate, methodStream, methodCount, methodCompute, methodPredict, methodEmbed, methodChat, methodRaw, methodStreamRaw}

func newSeries(m *metrics.Metrics, label string, regions []table.Region) *series {
	s := &series{m: m, label: label, regions: make([]boundRegion, len(regions))}
	for i, method := range methods {
		s.ok[i].n, s.ok[i].d = m.RequestSeries(label, method, http.StatusOK)
	}
	for i, r := range regions {
		b := &s.regions[i]
		b.name, b.tier = r.Name, r.Tier
		b.ok, b.d = m.AttemptSeries(label, r.Name, string(r.Tier), policy.Success)
		for j, t := range upstream.TrafficTypes {
			b.traffic[j] = m.TrafficTypeSeries(label, r.Name, t)
		}
	}
	return s
}

// request counts an answered call.
func (s *series) request(method string, code int, d time.Duration) {
	if code == http.StatusOK {
		for i, m := range methods {
			if m == method {
				s.ok[i].n.Inc()
				s.ok[i].d.Observe(d.Seconds())
				return
			}
		}
	}
	s.m.Request(s.label, method, code, d)
}

// region returns the bound series of a region of the pool, nil for one the
// pool no longer has.
func (s *series) region(r *table.Region) *boundRegion {
	for i := range s.regions {
		if b := &s.regions[i]; b.name == r.Name && b.tier == r.Tier {
			return b
		}
	}
	return nil
}

// attempt counts an attempt.
func (s *series) attempt(r *table.Region, o policy.Outcome, d time.Duration) {
	if b := s.region(r); b != nil && o == policy.Success {
		b.ok.Inc()
		b.d.Observe(d.Seconds())
		return
	}
	s.m.Attempt(s.label, r.Name, string(r.Tier), o, d)
}

// tokens counts an answer's input and output tokens by the capacity the
// attempt to t asked for and the traffic type that served it ("" is
// TRAFFIC_TYPE_UNSPECIFIED). A region the pool no longer has, or a traffic
// type this build does not know, is counted unbound.
func (s *series) tokens(t *upstream.Target, traffic string, input, output int64) {
	if traffic == "" {
		traffic = "TRAFFIC_TYPE_UNSPECIFIED"
	}
	r := &t.Region
	ti := 0
	if r.Tier == table.TierShared {
		ti = 1
	}
	pi := t.PayGo.Index() + 1 // 0: none
	tt := -1
	for i, v := range upstream.TrafficTypes {
		if v == traffic {
			tt = i
		}
	}
	b := s.regionByName(r.Name)
	for d, n := range [2]int64{input, output} {
		if n <= 0 {
			continue
		}
		dir := [2]string{metrics.DirectionInput, metrics.DirectionOutput}[d]
		if b == nil || tt < 0 {
			s.m.TokenSeries(s.label, r.Name, string(r.Tier), string(t.PayGo), traffic, dir).Add(float64(n))
			continue
		}
		slot := &b.tokens[ti][pi][tt][d]
		c := slot.Load()
		if c == nil {
			c = &boundCounter{s.m.TokenSeries(s.label, r.Name, string(r.Tier), string(t.PayGo), traffic, dir)}
			slot.Store(c)
		}
		c.Add(float64(n))
	}
}

// regionByName returns the bound series of a region of the pool by name,
// whatever capacity the attempt asked for; nil for one the pool no longer
// has.
func (s *series) regionByName(name string) *boundRegion {
	for i := range s.regions {
		if s.regions[i].name == name {
			return &s.regions[i]
		}
	}
	return nil
}

// traffic counts an answer by the traffic type that served it.
func (s *series) traffic(r *table.Region, trafficType string) {
	if b := s.region(r); b != nil {
		for i, t := range upstream.TrafficTypes {
			if t == trafficType {
				b.traffic[i].Inc()
				return
			}
		}
	}
	s.m.TrafficType(s.label, r.Name, trafficType)
}
