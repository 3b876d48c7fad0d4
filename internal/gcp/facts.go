// Package gcp is what the operator asks Google Cloud about Provisioned
// Throughput (PT).
//
// GCP has no public API that lists PT orders. What it exposes is Cloud
// Monitoring: for the monitored resource aiplatform.googleapis.com/PublisherModel,
// the gauges dedicated_gsu_limit (GSUs bought) and dedicated_token_limit
// (tokens/s they buy) and the delta consumed_token_throughput (tokens used,
// labeled by request_type). A location and model with no dedicated_gsu_limit
// series has no active PT.
//
// Source is the one question the operator asks: the PT facts of one project.
// MonitoringSource answers it with one ListTimeSeries per metric, whatever the
// number of PT objects; CachedSource in front of it shares answers for a TTL,
// so the number of Monitoring calls grows with projects, not with PT objects.
// IntervalCache keeps one CachedSource per interval that its callers ask for.
//
// Errors keep their gRPC code through wrapping: use Code to read it.
package gcp

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Monitoring's request_type label values on consumed_token_throughput.
const (
	// RequestTypeDedicated is traffic served by PT.
	RequestTypeDedicated = "dedicated"
	// RequestTypeSpillover is traffic beyond the PT amount, served pay-as-you-go.
	RequestTypeSpillover = "spillover"
	// RequestTypeShared is pay-as-you-go traffic that never asked for PT.
	RequestTypeShared = "shared"
)

// Source tells the PT facts of a GCP project.
type Source interface {
	// ProvisionedThroughput returns the PT facts of every location and model of
	// the project. A location and model without active PT has no entry; an
	// error means the facts are unknown, never that there is no PT.
	ProvisionedThroughput(ctx context.Context, project string) (*ProjectFacts, error)
}

// ProjectFacts are the PT facts of one project at one time.
type ProjectFacts struct {
	// Project is the project as it was asked for.
	Project string
	// FetchedAt is when the facts were read; windows end there.
	FetchedAt time.Time
	// Entries are sorted by location, publisher, model; unique by the three.
	Entries []Facts
}

// Facts are what Monitoring says about the PT of one location and model.
type Facts struct {
	Location  string
	Publisher string
	// Model is GCP's model_user_id label, e.g. "gemini-3.6-flash".
	Model string
	// GSUs is dedicated_gsu_limit: its latest point of the last GaugeWindow.
	GSUs int64
	// TokensPerSecond is dedicated_token_limit: its latest point of the last
	// GaugeWindow; zero when Monitoring has none.
	TokensPerSecond float64
	// Consumed is consumed_token_throughput over the last ConsumedWindow as
	// tokens per second, by request_type; a request type with no data is absent.
	Consumed map[string]float64
}

// Utilization is dedicated consumption over the PT's tokens per second: 1 means
// the PT is fully used. Zero when the token limit is unknown.
func (f Facts) Utilization() float64 {
	if f.TokensPerSecond <= 0 {
		return 0
	}
	return f.Consumed[RequestTypeDedicated] / f.TokensPerSecond
}

// SpilloverRatio is the share of PT-eligible traffic that spilled over to
// pay-as-you-go: spillover / (dedicated + spillover). Zero when there was none.
func (f Facts) SpilloverRatio() float64 {
	d, s := f.Consumed[RequestTypeDedicated], f.Consumed[RequestTypeSpillover]
	if d+s <= 0 {
		return 0
	}
	return s / (d + s)
}

func (f Facts) clone() Facts {
	if f.Consumed != nil {
		c := make(map[string]float64, len(f.Consumed))
		for k, v := range f.Consumed {
			c[k] = v
		}
		f.Consumed = c
	}
	return f
}

func (p *ProjectFacts) clone() *ProjectFacts {
	if p == nil {
		return nil
	}
	out := *p
	out.Entries = make([]Facts, len(p.Entries))
	for i, e := range p.Entries {
		out.Entries[i] = e.clone()
	}
	return &out
}

// versionSuffix is a model ID's version: -NNN for Google's models
// (gemini-3.6-flash-001), after an @ for partner models
// (claude-sonnet-4-5@20250929).
var versionSuffix = regexp.MustCompile(`^(-[0-9]{3}|@[a-z0-9][a-z0-9.-]*)$`)

// sameModel reports whether two model IDs name the same model: equal, or equal
// but for a version suffix on one side ("gemini-3.6-flash" and
// "gemini-3.6-flash-001"; "claude-sonnet-4-5" and
// "claude-sonnet-4-5@20250929"). Two different suffixes are different models.
func sameModel(a, b string) bool {
	if a == b {
		return true
	}
	if len(a) < len(b) {
		a, b = b, a
	}
	return b != "" && strings.HasPrefix(a, b) && versionSuffix.MatchString(a[len(b):])
}

// Lookup finds the facts for a location, publisher and model. An exact model
// match wins; otherwise the first entry whose model differs only by a version
// suffix (sameModel) on either side.
func (p *ProjectFacts) Lookup(location, publisher, model string) (Facts, bool) {
	if p == nil {
		return Facts{}, false
	}
	found := -1
	for i, e := range p.Entries {
		if e.Location != location || e.Publisher != publisher {
			continue
		}
		if e.Model == model {
			return e, true
		}
		if found < 0 && sameModel(e.Model, model) {
			found = i
		}
	}
	if found < 0 {
		return Facts{}, false
	}
	return p.Entries[found], true
}

// Code is the gRPC code of err, through any wrapping: codes.OK for nil, the
// code of a wrapped status error, DeadlineExceeded or Canceled for context
// errors, Unknown otherwise.
func Code(err error) codes.Code {
	if err == nil {
		return codes.OK
	}
	if s, ok := status.FromError(err); ok {
		return s.Code()
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		return codes.Canceled
	}
	return codes.Unknown
}
