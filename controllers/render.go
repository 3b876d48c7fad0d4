package controllers

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capacityv1alpha1 "github.com/regionwarden/regionwarden/api/v1alpha1"
	"github.com/regionwarden/regionwarden/router/table"
)

// rendered is a RegionPool and its ProvisionedThroughputs turned into one pool
// of the routing table, with what the pool's status reports about it.
type rendered struct {
	// pool is the routing table's pool: regions sorted, policy complete.
	pool table.Pool
	// regions is pool.Regions as the RegionPool's status shows them, in the
	// same order.
	regions []capacityv1alpha1.RegionStatus
	// protected are the provisioned regions' names, sorted.
	protected []string
	// undeclared are the provisioned locations that spec.regions does not
	// list, each with the ProvisionedThroughputs that put it in the table.
	undeclared []undeclaredRegion
}

// undeclaredRegion is a location with ready Provisioned Throughput that the
// pool's spec.regions does not list.
type undeclaredRegion struct {
	name string
	pts  []string
}

// ptReady reports whether pt makes its location provisioned: its Ready
// condition is True and it is not being deleted. A PT not yet verified (no
// Ready condition) protects nothing until the PT controller says so.
func ptReady(pt *capacityv1alpha1.ProvisionedThroughput) bool {
	return pt.DeletionTimestamp.IsZero() && meta.IsStatusConditionTrue(pt.Status.Conditions, capacityv1alpha1.ConditionReady)
}

// ptMatchesPool reports whether pt is capacity for pool's model: same
// namespace, same project, same publisher (both defaulted) and the same model
// string, compared exactly. A PT declared for "gemini-3.6-flash-001" does
// not protect a pool of "gemini-3.6-flash": Vertex AI bills and enforces
// Provisioned Throughput per model ID, and guessing at version aliases could
// route traffic as provisioned that GCP serves as pay-as-you-go.
func ptMatchesPool(pool *capacityv1alpha1.RegionPool, pt *capacityv1alpha1.ProvisionedThroughput) bool {
	return pt.Namespace == pool.Namespace && pt.Spec.Project == pool.Spec.Project &&
		pt.GetPublisher() == pool.GetPublisher() && pt.Spec.Model == pool.Spec.Model
}

// locationPTs is what the ProvisionedThroughputs of one location that are
// capacity for a pool (ptMatchesPool) and not being deleted declare.
type locationPTs struct {
	// declared names every one of them, sorted.
	declared []string
	// ready names those that are Ready (ptReady), sorted: the ones that make
	// the location provisioned.
	ready []string
	// gsus is the sum of the ready ones' spec.gsus: two orders in one
	// location add up.
	gsus int64
	// tokens is the largest status.observed.tokensPerSecond among the ready
	// ones: GCP reports one limit per location and model.
	tokens float64
}

// provisioned reports whether a ready PT makes the location provisioned; l
// may be nil (no PT there).
func (l *locationPTs) provisioned() bool { return l != nil && len(l.ready) > 0 }

// ptsByLocation groups the PTs among pts that are capacity for pool, and are
// not being deleted, by location. It is the one place that decides which PTs
// count for a pool, for rendering and for discovery alike; the order of pts
// does not matter.
func ptsByLocation(pool *capacityv1alpha1.RegionPool, pts []capacityv1alpha1.ProvisionedThroughput) map[string]*locationPTs {
	out := map[string]*locationPTs{}
	for i := range pts {
		pt := &pts[i]
		if !pt.DeletionTimestamp.IsZero() || !ptMatchesPool(pool, pt) {
			continue
		}
		l := out[pt.Spec.Location]
		if l == nil {
			l = &locationPTs{}
			out[pt.Spec.Location] = l
		}
		l.declared = append(l.declared, pt.Name)
		if !ptReady(pt) {
			continue
		}
		l.ready = append(l.ready, pt.Name)
		l.gsus += pt.Spec.GSUs
		if o := pt.Status.Observed; o != nil && o.TokensPerSecond > l.tokens {
			l.tokens = o.TokensPerSecond
		}
	}
	for _, l := range out {
		sort.Strings(l.declared)
		sort.Strings(l.ready)
	}
	return out
}

// renderPool turns pool and the ProvisionedThroughputs that select it into
// the routing table's pool. It is a pure function of its inputs: the order of
// pts does not matter, and the same inputs give the same output.
//
// Every location with a ready PT is a provisioned region that is never
// ejectable, listed in spec.regions or not: declaring the capacity is enough
// to protect it, with the GSUs and token limit of its ready PTs (see
// locationPTs). Every other listed region is shared and ejectable; a
// location that only a PT put in the table leaves it when that PT stops being
// ready, since spec.regions never asked for it. pts that are not ready or do
// not match the pool's model are ignored.
//
// Each of discovered that spec.regions lists and no ready PT makes
// provisioned is provisioned and never ejectable on GCP's word, with source
// discovered and the GSUs and token limit GCP reports: capacity bought in GCP
// is protected even when nobody wrote it down. A ready PT wins over discovery.
func renderPool(pool *capacityv1alpha1.RegionPool, pts []capacityv1alpha1.ProvisionedThroughput, discovered []capacityv1alpha1.DiscoveredRegion) rendered {
	byLocation := ptsByLocation(pool, pts)
	out := rendered{pool: table.Pool{
		Namespace: pool.Namespace,
		Name:      pool.Name,
		Project:   pool.Spec.Project,
		Publisher: pool.GetPublisher(),
		Model:     pool.Spec.Model,
		Policy:    renderPolicy(pool.Spec.Policy, pool.Spec.CapacityShare),
		Callers:   renderCallers(pool.Spec.Callers),
	}}
	listed := map[string]bool{}
	for _, sr := range pool.Spec.Regions {
		listed[sr.Name] = true
		r := table.Region{Name: sr.Name, Endpoint: sr.Endpoint, Tier: table.TierShared, Ejectable: true, Source: table.SourceSpec}
		if sr.RequestsPerSecond != nil {
			r.Capacity.RequestsPerSecond = float64(*sr.RequestsPerSecond)
		}
		r.PayGoTiers = tableTiers(sr.PayGoTiers)
		out.pool.Regions = append(out.pool.Regions, r)
	}
	for name, l := range byLocation {
		if l.provisioned() && !listed[name] {
			out.pool.Regions = append(out.pool.Regions, table.Region{Name: name})
		}
	}
	found := map[string]capacityv1alpha1.DiscoveredRegion{}
	for _, d := range discovered {
		if listed[d.Name] && !byLocation[d.Name].provisioned() && d.GSUs > 0 {
			found[d.Name] = d
		}
	}
	for i := range out.pool.Regions {
		r := &out.pool.Regions[i]
		if d, ok := found[r.Name]; ok {
			r.Tier, r.Ejectable, r.Source = table.TierProvisioned, false, table.SourceDiscovered
			r.Capacity.GSUs, r.Capacity.TokensPerSecond = d.GSUs, d.TokensPerSecond
			out.protected = append(out.protected, r.Name)
			continue
		}
		l := byLocation[r.Name]
		if !l.provisioned() {
			continue
		}
		r.Tier, r.Ejectable, r.Source = table.TierProvisioned, false, table.SourceDeclared
		r.Capacity.GSUs, r.Capacity.TokensPerSecond = l.gsus, l.tokens
		out.protected = append(out.protected, r.Name)
		if !listed[r.Name] {
			out.undeclared = append(out.undeclared, undeclaredRegion{name: r.Name, pts: l.ready})
		}
	}
	// Fills in Google's endpoint where spec.regions gives none, and sorts the
	// regions as the router reads them.
	out.pool.Default()
	sort.Strings(out.protected)
	sort.Slice(out.undeclared, func(i, j int) bool { return out.undeclared[i].name < out.undeclared[j].name })

	for _, r := range out.pool.Regions {
		st := capacityv1alpha1.RegionStatus{Name: r.Name, Tier: string(r.Tier), Ejectable: r.Ejectable, Source: string(r.Source)}
		if l := byLocation[r.Name]; l.provisioned() {
			st.ProvisionedThroughput = strings.Join(l.ready, ",")
		}
		out.regions = append(out.regions, st)
	}
	return out
}

// renderPolicy maps a RegionPool's policy to the routing table's, field by
// field, and states no default of its own: a field the pool leaves unset (nil,
// or zero where the API refuses zero) stays unset in the table, where
// table.Policy.Default gives it the default a hand-written table that omits
// it gets. The concurrency limits are not in the API: they are always the
// table's defaults.
func renderPolicy(p capacityv1alpha1.RoutingPolicy, capacityShare *int32) table.Policy {
	e, r := p.Ejection, p.Retry
	out := table.Policy{
		CapacityShare: intPtrValue(capacityShare),
		Ejection: table.Ejection{
			FailureRateThreshold: e.FailureRateThreshold,
			MinRequests:          int(e.MinRequests),
			Interval:             duration(e.Interval),
			BaseEjectionTime:     duration(e.BaseEjectionTime),
			MaxEjectionTime:      duration(e.MaxEjectionTime),
			MaxEjectedPercent:    intPtr(e.MaxEjectedPercent),
		},
		Retry: table.Retry{
			MaxAttempts:         int(r.MaxAttempts),
			BudgetPercent:       intPtr(r.BudgetPercent),
			MinRetriesPerSecond: intPtr(r.MinRetriesPerSecond),
		},
	}
	switch p.Provisioned.RequestType {
	case capacityv1alpha1.RequestTypeDedicated:
		out.Provisioned.RequestType = table.RequestTypeDedicated
	case capacityv1alpha1.RequestTypeSpillover:
		out.Provisioned.RequestType = table.RequestTypeSpillover
	}
	out.Provisioned.Window = duration(p.Provisioned.Window)
	out.PayGo = table.PayGo{
		Critical:  tableTiers(p.PayGo.Critical),
		Default:   tableTiers(p.PayGo.Default),
		Sheddable: tableTiers(p.PayGo.Sheddable),
	}
	out.Default()
	return out
}

// tableTiers are pay-as-you-go tiers as the routing table spells them, in
// their order; nil (unset, for the table to default) for none.
func tableTiers(ts []capacityv1alpha1.PayGoTier) []table.PayGoTier {
	if len(ts) == 0 {
		return nil
	}
	out := make([]table.PayGoTier, len(ts))
	for i, t := range ts {
		out[i] = table.PayGoTier(strings.ToLower(string(t)))
	}
	return out
}

// duration is d in the table's form; zero (unset) for nil.
func duration(d *metav1.Duration) table.Duration {
	if d == nil {
		return table.Duration{}
	}
	return table.Duration{Duration: d.Duration}
}

// intPtr is *v as an int; nil for nil.
func intPtr(v *int32) *int {
	if v == nil {
		return nil
	}
	return new(int(*v))
}

// setTableRegions records in the pool's status the regions of the table it
// routes by (nil when it routes none), and what `kubectl get` shows of them:
// how many regions, how many provisioned, and a summary with the provisioned
// regions' names. Every field that describes the table's regions is set here
// and nowhere else, so the columns never disagree with status.regions.
func setTableRegions(pool *capacityv1alpha1.RegionPool, regions []capacityv1alpha1.RegionStatus) {
	st := &pool.Status
	st.Regions, st.ProtectedRegions = regions, nil
	if regions == nil {
		st.RegionCount, st.ProvisionedCount, st.Summary = nil, nil, ""
		return
	}
	var names []string
	for _, r := range regions {
		if r.Tier != string(table.TierProvisioned) {
			continue
		}
		st.ProtectedRegions = append(st.ProtectedRegions, r.Name)
		if r.Source == string(table.SourceDiscovered) {
			names = append(names, r.Name+" (discovered)")
		} else {
			names = append(names, r.Name)
		}
	}
	n, p := int32(len(regions)), int32(len(st.ProtectedRegions))
	st.RegionCount, st.ProvisionedCount = &n, &p
	st.Summary = fmt.Sprintf("%d %s, ", n, plural(int(n), "region", "regions"))
	if p == 0 {
		st.Summary += "none provisioned"
	} else {
		st.Summary += fmt.Sprintf("%d provisioned: %s", p, strings.Join(names, ", "))
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// renderCallers maps a RegionPool's callers to the routing table's: the
// priorities in the router's spelling (the header's), each ServiceAccount
// entry "namespace/name" split in two, in the spec's order. An unset
// priority stays unset for the table to default.
func renderCallers(c capacityv1alpha1.Callers) table.Callers {
	out := table.Callers{MaxPriority: tablePriority(c.MaxPriority)}
	for i := range c.ServiceAccounts {
		sa := &c.ServiceAccounts[i]
		ns, name, _ := strings.Cut(sa.Name, "/")
		out.ServiceAccounts = append(out.ServiceAccounts, table.ServiceAccount{
			Namespace: ns, Name: name, MaxPriority: tablePriority(sa.MaxPriority),
		})
	}
	return out
}

// tablePriority is p as the routing table spells it.
func tablePriority(p capacityv1alpha1.Priority) table.Priority {
	return table.Priority(strings.ToLower(string(p)))
}

// intPtrValue is *v, or 0 (the table's default) when v is nil.
func intPtrValue(v *int32) int {
	if v == nil {
		return 0
	}
	return int(*v)
}
