package controllers

import (
	"context"
	"time"

	"github.com/regionwarden/regionwarden/internal/gcp"
)

// FactsSource tells the Provisioned Throughput facts of a GCP project, no
// older than maxAge. Callers that ask about one project with one maxAge share
// one call per maxAge.
type FactsSource interface {
	ProjectFacts(ctx context.Context, project string, maxAge time.Duration) (*gcp.ProjectFacts, error)
}

var _ FactsSource = (*gcp.IntervalCache)(nil)

// NewFacts is the FactsSource that the ProvisionedThroughput and RegionPool
// reconcilers share: src's answers, shared per project and interval, so a pool
// that discovers with the same interval as its PTs verify adds no GCP call, and
// an outage costs one call per project per SourceErrorTTL. fetchTimeout
// bounds one project's fetch (zero means gcp.DefaultTimeout). now is the
// clock for expiry; nil means time.Now. A nil src gives a nil FactsSource:
// the manager runs without GCP.
func NewFacts(src gcp.Source, fetchTimeout time.Duration, now func() time.Time) FactsSource {
	if src == nil {
		return nil
	}
	return gcp.NewIntervalCache(src, SourceErrorTTL, fetchTimeout, now)
}
