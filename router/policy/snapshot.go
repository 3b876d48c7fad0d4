package policy

import (
	"fmt"
	"sort"
	"time"

	"github.com/regionwarden/regionwarden/router/table"
)

// Snapshot is the live state of a router's pool, for operators. The server
// serves it as JSON.
type Snapshot struct {
	// Policy names the policy: "adaptive".
	Policy    string `json:"policy"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	Project   string `json:"project"`
	Publisher string `json:"publisher"`
	Model     string `json:"model"`
	// Time is when the snapshot was taken, by the router's clock.
	Time time.Time `json:"time"`
	// Panic is true while too few regions are neither ejected nor on
	// probation after an ejection for either to be honored.
	Panic bool `json:"panic"`
	// InFlight is the calls in flight in the pool; MaxInFlight caps them.
	InFlight    int64 `json:"inFlight"`
	MaxInFlight int64 `json:"maxInFlight,omitempty"`
	// Waiting is the calls waiting for a full quota to have room, or for a
	// call ahead of them (a higher priority, or a retry of their own) to
	// take it (Call.PickWaiting);
	// HeadroomWaits counts the calls that waited since the router started.
	Waiting       int64 `json:"waiting"`
	HeadroomWaits int64 `json:"headroomWaits"`
	// RetryBudget is the (possibly process-wide) retry budget's recent counts.
	RetryBudget *BudgetSnapshot `json:"retryBudget,omitempty"`
	// Regions are in table order: provisioned first.
	Regions []RegionSnapshot `json:"regions"`
	// Callers are the callers whose calls failed lately, which the pool
	// watches (blame.go), the ones whose failures are their own first.
	Callers []CallerSnapshot `json:"callers,omitempty"`
}

// CallerSnapshot is what a watched caller's attempts met over the ejection
// interval, across the pool's regions.
type CallerSnapshot struct {
	// Caller is its key, as the router's request log names it.
	Caller string `json:"caller"`
	// Own is true while its failures are its own: not retried, counted
	// toward no region's ejection, demotion or throttle.
	Own      bool  `json:"own"`
	Answered int64 `json:"answered"`
	Failed   int64 `json:"failed"`
	// FailingIn names the regions where its attempts fail at or over the
	// ejection threshold.
	FailingIn []string `json:"failingIn,omitempty"`
	// FailingAlone names the regions where its attempts fail while the
	// region serves the pool's other callers: its failures there count
	// toward nothing of the region's, and its calls go to other regions
	// first.
	FailingAlone []string `json:"failingAlone,omitempty"`
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
	// Answered and Failed are counted over the ejection interval;
	// FailureRate is Failed/Answered, 0 when nothing was answered.
	Answered    int64   `json:"answered"`
	Failed      int64   `json:"failed"`
	FailureRate float64 `json:"failureRate"`
	// Failing is true when the failure rate reaches the ejection threshold
	// with enough answered calls, ejectable or not.
	Failing bool `json:"failing"`
	// Silent is true while the region holds minRequests attempts in flight
	// (or, answering fewer, at least as many as it answered with success
	// over the ejection interval) and nothing has come back from it, or
	// from the calls picked since the latest one it answered, for longer
	// than its slowest recent answer: it ranks behind the regions that
	// answer, and gets no probe, until it answers again (silence.go).
	Silent bool `json:"silent"`
	// MedianSuccess is the median time its latest successes took (the
	// last 32): once the region gave minRequests successes in the ejection
	// interval, a retry (or a call that waited for room) with less time
	// left before its call's deadline, of a call whose caller gave it at
	// least that long, goes to another region, or is not sent (quick.go).
	// Absent before a success.
	MedianSuccess table.Duration `json:"medianSuccess,omitzero"`
	// Demotion is set while a provisioned region is demoted: first attempts
	// go to answering regions with headroom, and it takes the rest and
	// probes. TimesDemoted counts demotions since the router started.
	Demotion     *Demotion `json:"demotion,omitempty"`
	TimesDemoted int64     `json:"timesDemoted"`
	// Probation is true, for a shared region, from its ejection until a
	// run of successes restores it (eject.go): once the ejection ends it
	// still ranks behind the regions that answer and takes probes, as a
	// demoted region does. SuccessesInARow counts that run.
	Probation       bool  `json:"probation,omitempty"`
	SuccessesInARow int64 `json:"successesInARow,omitempty"`
	// ThrottleProbability is the share of calls the 429 throttle turns away
	// from the region's most throttled capacity; Throttle is each capacity's
	// (provisioned, standard, priority, flex) that turns calls away.
	ThrottleProbability float64            `json:"throttleProbability"`
	Throttle            map[string]float64 `json:"throttle,omitempty"`
	// PayGoTiers are the pay-as-you-go tiers the region offers the pool.
	PayGoTiers []table.PayGoTier `json:"payGoTiers,omitempty"`
	// ProvisionedFull is true while Google's last word on the region's PT
	// is that it is full: calls spill to pay-as-you-go, and one a second
	// asks the PT again.
	ProvisionedFull bool `json:"provisionedFull,omitempty"`
	// ProvisionedWindow is the span over which the PT's token limit is
	// metered (a Go duration, "40s"), and ProvisionedWindowUsed the share
	// of that limit × window this router admitted in the window that ends
	// now; both absent for a region whose PT has no token limit.
	ProvisionedWindow     table.Duration `json:"provisionedWindow,omitzero"`
	ProvisionedWindowUsed float64        `json:"provisionedWindowUsed,omitempty"`
	// HeldBehind names, for each of the region's capacities (provisioned,
	// standard, priority, flex), the least-failing region offering the
	// same capacity when this one fails a larger share of its calls than
	// it over the ejection interval, by more than chance: it then takes
	// only what that capacity of the other regions has no room for
	// (prefer.go). Absent while the regions of its capacities fail alike.
	HeldBehind map[string]string `json:"heldBehind,omitempty"`
	// ProvisionedPaced is true while the PT is held to its pace: its
	// window filled within the last window, and while it has taken its
	// rate over the last tenth of its window, the pay-as-you-go quotas
	// take calls before it (pace.go).
	ProvisionedPaced bool `json:"provisionedPaced,omitempty"`
	// InFlight is the region's calls in flight; Limit is its adaptive (AIMD)
	// limit. While Answering (neither failing nor demoted; 429s do not
	// count, they hold no call), a region admits calls beyond Limit up to
	// its capacity × (the call's deadline + 1 s): slow is not overloaded.
	InFlight  int64 `json:"inFlight"`
	Limit     int64 `json:"limit,omitempty"`
	Answering bool  `json:"answering"`
}

// Demotion says since when and why a provisioned region is demoted.
type Demotion struct {
	// Since is when the region was demoted, by the router's clock.
	Since time.Time `json:"since"`
	// FailureRate is Failed/Answered over the ejection interval when the
	// region was demoted; Threshold the ejection threshold it reached.
	FailureRate float64 `json:"failureRate"`
	Answered    int64   `json:"answered"`
	Failed      int64   `json:"failed"`
	Threshold   float64 `json:"threshold"`
	// SuccessesInARow are the region's successes since its last failure;
	// RestoreAfter of them restore it, for the failures of its last
	// ejection interval (more failures, more chances to string successes
	// together by chance: poolState.restoreAfter).
	SuccessesInARow int64 `json:"successesInARow"`
	RestoreAfter    int64 `json:"restoreAfter"`
}

// Region is the state of region name in the snapshot, and false when the
// pool has no such region.
func (s Snapshot) Region(name string) (RegionSnapshot, bool) {
	for _, r := range s.Regions {
		if r.Name == name {
			return r, true
		}
	}
	return RegionSnapshot{}, false
}

// Snapshot returns the live state of every region.
func (p *Pool) Snapshot() Snapshot {
	now := p.nanos()
	st := p.st.Load()
	bs := p.budget.snapshot(now)
	snap := Snapshot{
		Policy:        "adaptive",
		Namespace:     st.pool.Namespace,
		Name:          st.pool.Name,
		Project:       st.pool.Project,
		Publisher:     st.pool.Publisher,
		Model:         st.pool.Model,
		Time:          time.Unix(0, now).UTC(),
		Panic:         st.inPanic(now),
		InFlight:      p.inFlight.Load(),
		MaxInFlight:   st.maxInFlight,
		Waiting:       p.waiting.Load(),
		HeadroomWaits: p.waits.Load(),
		RetryBudget:   &bs,
		Regions:       make([]RegionSnapshot, 0, len(st.slots)),
	}
	shares := make([]failShare, len(st.slots))
	for i, s := range st.slots {
		shares[i].answered, shares[i].failed = s.r.fails.sum(bucketOf(now, st.failWidth))
	}
	for i, s := range st.slots {
		r := s.r
		answered, failed := shares[i].answered, shares[i].failed
		rs := RegionSnapshot{
			Name:                s.name,
			Tier:                s.tier,
			Ejectable:           s.ejectable,
			TimesEjected:        r.timesEjected.Load(),
			Answered:            answered,
			Failed:              failed,
			FailureRate:         ratio(failed, answered),
			Failing:             st.isFailing(answered, failed),
			TimesDemoted:        r.timesDemoted.Load(),
			ThrottleProbability: r.throttleP(now, st),
			InFlight:            r.inFlight.Load(),
			Limit:               int64(r.limit.get()),
			Answering:           r.answering(now, st),
			Silent:              r.quiet.silent(now, &r.inFlight, &r.fails, st),
			MedianSuccess:       table.Duration{Duration: time.Duration(r.times.median())},
		}
		for l := range uint8(laneCount) {
			if !s.offers(l) {
				continue
			}
			if t := payGoOf(l); t != "" {
				rs.PayGoTiers = append(rs.PayGoTiers, t)
			}
			if q := r.lanes[l].throttleP(now, st); q > 0 {
				if rs.Throttle == nil {
					rs.Throttle = map[string]float64{}
				}
				rs.Throttle[laneNames[l]] = q
			}
		}
		rs.HeldBehind = st.heldBehind(i, shares)
		rs.ProvisionedFull = s.provisioned && r.lanes[laneProvisioned].full(now)
		if s.tokCost > 0 {
			rs.ProvisionedWindow = table.Duration{Duration: time.Duration(s.tokWindow)}
			rs.ProvisionedWindowUsed = float64(r.toks.sum(now, s.tokWidth)) / float64(rateCapacity)
			rs.ProvisionedPaced = r.paced.Load() > now
		}
		if d := r.demoted.Load(); d != nil && d.ejected {
			rs.Probation, rs.SuccessesInARow = true, r.streak.Load()
		} else if d != nil {
			rs.Demotion = &Demotion{
				Since:           time.Unix(0, d.since).UTC(),
				FailureRate:     ratio(d.failed, d.answered),
				Answered:        d.answered,
				Failed:          d.failed,
				Threshold:       st.threshold,
				SuccessesInARow: r.streak.Load(),
				RestoreAfter:    st.restoreAfter(failed),
			}
		}
		if u := r.ejectedUntil.Load(); u > now {
			rs.Ejected = true
			rs.EjectedUntil = time.Unix(0, u).UTC()
		}
		snap.Regions = append(snap.Regions, rs)
	}
	snap.Callers = p.callers(now, st)
	return snap
}

// heldBehind is RegionSnapshot.HeldBehind of slot i, given every slot's
// failure share: for each capacity it offers, the least-failing other
// region offering it alike (a PT's overflow is a capacity apart), if slot
// i fails more than it by more than chance (failShare.worseThan).
func (st *poolState) heldBehind(i int, shares []failShare) map[string]string {
	var out map[string]string
	s := st.slots[i]
	for l := range uint8(laneCount) {
		if !s.offers(l) {
			continue
		}
		best := -1
		for j, o := range st.slots {
			if j == i || !o.offers(l) || o.overflowLane(l) != s.overflowLane(l) || !shares[j].judged(st.minRequests) {
				continue
			}
			if best < 0 || shares[j].below(shares[best]) {
				best = j
			}
		}
		if best >= 0 && shares[i].worseThan(shares[best], st.minRequests) {
			if out == nil {
				out = map[string]string{}
			}
			out[laneNames[l]] = st.slots[best].name
		}
	}
	return out
}

// callers is the watched callers whose counts have not all left the
// window, the ones whose failures are their own first.
func (p *Pool) callers(now int64, st *poolState) []CallerSnapshot {
	var out []CallerSnapshot
	idx := bucketOf(now, st.failWidth)
	for i := range p.blame {
		b := &p.blame[i]
		key := b.key.Load()
		if key == 0 || now-b.last.Load() > int64(st.interval) {
			continue
		}
		c := CallerSnapshot{Caller: fmt.Sprintf("%016x", key), Own: b.own.Load()}
		for _, s := range st.slots {
			a, f := s.r.blame[i].all.sum(idx)
			c.Answered, c.Failed = c.Answered+a, c.Failed+f
			if a > 0 && float64(f) >= st.threshold*float64(a) {
				c.FailingIn = append(c.FailingIn, s.name)
			}
			if p.failsAlone(i, s.r, idx, st) {
				c.FailingAlone = append(c.FailingAlone, s.name)
			}
		}
		out = append(out, c)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Own && !out[j].Own })
	return out
}

// ratio is a/b, 0 when b is 0.
func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
