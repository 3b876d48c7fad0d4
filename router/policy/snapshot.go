package policy

import (
	"time"

	"github.com/regionwarden/regionwarden/router/table"
)

// Snapshot is the live state of a router's pool, for operators. The server
// serves it as JSON.
type Snapshot struct {
	// Policy names the policy: "adaptive", "blocklist" or "allowlist".
	Policy    string `json:"policy"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	Project   string `json:"project"`
	Publisher string `json:"publisher"`
	Model     string `json:"model"`
	// Time is when the snapshot was taken, by the router's clock.
	Time time.Time `json:"time"`
	// Panic is true while too few regions are un-ejected for ejection to be
	// honored.
	Panic bool `json:"panic"`
	// InFlight is the calls in flight in the pool; MaxInFlight caps them.
	InFlight    int64 `json:"inFlight"`
	MaxInFlight int64 `json:"maxInFlight,omitempty"`
	// RetryBudget is the (possibly process-wide) retry budget's recent counts.
	RetryBudget *BudgetSnapshot `json:"retryBudget,omitempty"`
	// Regions are in table order: provisioned first.
	Regions []RegionSnapshot `json:"regions"`
}

// RegionSnapshot is the live state of one region.
type RegionSnapshot struct {
	Name      string     `json:"name"`
	Tier      table.Tier `json:"tier"`
	Ejectable bool       `json:"ejectable"`
	// Ejected is true while EjectedUntil is in the future.
	Ejected      bool      `json:"ejected"`
	EjectedUntil time.Time `json:"ejectedUntil,omitzero"`
	// TimesEjected counts ejections since the router started.
	TimesEjected int64 `json:"timesEjected"`
	// Answered and Failed are counted over the ejection interval (for the
	// baselines: failures and 429s over the blocklist window);
	// FailureRate is Failed/Answered, 0 when nothing was answered.
	Answered    int64   `json:"answered"`
	Failed      int64   `json:"failed"`
	FailureRate float64 `json:"failureRate"`
	// Failing is true when the failure rate reaches the ejection threshold
	// with enough answered calls, ejectable or not.
	Failing bool `json:"failing"`
	// ThrottleProbability is the share of calls the 429 throttle turns away.
	ThrottleProbability float64 `json:"throttleProbability"`
	// InFlight is the region's calls in flight; Limit is its adaptive limit.
	InFlight int64 `json:"inFlight"`
	Limit    int64 `json:"limit,omitempty"`
}

// Snapshot returns the live state of every region.
func (p *Pool) Snapshot() Snapshot {
	now := p.nanos()
	st := p.st.Load()
	bs := p.budget.snapshot(now)
	snap := Snapshot{
		Policy:      "adaptive",
		Namespace:   st.pool.Namespace,
		Name:        st.pool.Name,
		Project:     st.pool.Project,
		Publisher:   st.pool.Publisher,
		Model:       st.pool.Model,
		Time:        time.Unix(0, now).UTC(),
		Panic:       st.inPanic(now),
		InFlight:    p.inFlight.Load(),
		MaxInFlight: st.maxInFlight,
		RetryBudget: &bs,
		Regions:     make([]RegionSnapshot, 0, len(st.slots)),
	}
	for _, s := range st.slots {
		r := s.r
		answered, failed := r.fails.Load().sum(now)
		rs := RegionSnapshot{
			Name:                s.name,
			Tier:                table.TierShared,
			Ejectable:           s.ejectable,
			TimesEjected:        r.timesEjected.Load(),
			Answered:            int64(answered),
			Failed:              int64(failed),
			Failing:             r.failing(now, st),
			ThrottleProbability: r.throttleP(now),
			InFlight:            r.inFlight.Load(),
			Limit:               int64(r.limit.get()),
		}
		if s.provisioned {
			rs.Tier = table.TierProvisioned
		}
		if answered > 0 {
			rs.FailureRate = float64(failed) / float64(answered)
		}
		if u := r.ejectedUntil.Load(); u > now {
			rs.Ejected = true
			rs.EjectedUntil = time.Unix(0, u).UTC()
		}
		snap.Regions = append(snap.Regions, rs)
	}
	return snap
}
