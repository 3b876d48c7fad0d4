package emulator

import (
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/regionwarden/regionwarden/internal/gcp/gcpfake"
)

// monitoring publishes the scenario's PTs through a Cloud Monitoring fake, so
// that the operator can verify them as it verifies real ones. The consumed
// token rates are those the regions served in the last full scenario minute.
type monitoring struct {
	sc      *Scenario
	regions []*region
	server  *gcpfake.MetricServer

	mu         sync.Mutex
	lastMinute int64 // last scenario minute whose consumption was published; -1 before any
}

func newMonitoring(sc *Scenario, regions []*region) *monitoring {
	m := &monitoring{sc: sc, regions: regions, server: gcpfake.NewMetricServer(), lastMinute: -1}
	return m
}

func (m *monitoring) register(g *grpc.Server) { m.server.Register(g) }

// refresh publishes every PT with the consumption of the last full scenario
// minute before t; it does nothing while that minute is already published.
func (m *monitoring) refresh(t time.Duration) {
	minute := int64(t / time.Minute)
	m.mu.Lock()
	defer m.mu.Unlock()
	if minute == m.lastMinute {
		return
	}
	m.lastMinute = minute
	for _, r := range m.regions {
		p := r.cfg.Provisioned
		if p == nil {
			continue
		}
		from := int(minute-1) * 60
		m.server.SetPT(gcpfake.PT{
			Project:         m.sc.Project,
			Location:        r.cfg.Name,
			Publisher:       m.sc.Publisher,
			Model:           m.sc.Model,
			GSUs:            p.GSUs,
			TokensPerSecond: p.TokensPerSecond,
			Consumed:        r.consumed(from, from+60),
		})
	}
}
