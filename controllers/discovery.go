package controllers

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	capacityv1alpha1 "github.com/regionwarden/regionwarden/api/v1alpha1"
	"github.com/regionwarden/regionwarden/internal/gcp"
)

// discoveredRegions has one series per undeclared region: the team has
// capacity in GCP that no ProvisionedThroughput object names.
var discoveredRegions = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Namespace: "regionwarden",
	Name:      "discovered_provisioned_regions",
	Help: "1 for each region of a RegionPool where GCP reports Provisioned Throughput for the pool's model and no " +
		"ProvisionedThroughput object declares it; the series goes once the capacity is declared or gone.",
}, []string{"namespace", "pool", "location", "model"})

// forgetDiscoveryMetrics deletes every series of the pool namespace/name.
func forgetDiscoveryMetrics(namespace, name string) {
	discoveredRegions.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "pool": name})
}

// discovery is what one reconcile learned about undeclared capacity.
type discovery struct {
	// protect are the regions the routing table makes provisioned on GCP's
	// word: under Protect, the discovered regions that no ready PT already
	// makes provisioned. Empty under Warn and Off.
	protect []capacityv1alpha1.DiscoveredRegion
	// requeue is when to ask GCP again; zero when discovery is off.
	requeue time.Duration
}

// discover asks GCP which of the pool's regions have Provisioned Throughput
// for its model, keeps the answer in status.discovered, and sets
// CapacityDeclared, the events and the metric from it. pts are the PT objects
// that select the pool, ready or not.
//
// Discovery is fail-static: when GCP cannot be asked, status.discovered
// stands as it is; a region leaves it only after GCP's own answers have
// omitted it for longer than the grace period.
func (r *RegionPoolReconciler) discover(ctx context.Context, pool *capacityv1alpha1.RegionPool, pts []capacityv1alpha1.ProvisionedThroughput) discovery {
	mode := pool.GetDiscoveryMode()
	if mode == capacityv1alpha1.DiscoveryOff {
		discoveryOff(pool, "spec.discovery.mode is Off: GCP is not asked about undeclared Provisioned Throughput")
		return discovery{}
	}
	if r.Facts == nil {
		discoveryOff(pool, "the manager runs without GCP (--gcp-verify=false): discovery of undeclared Provisioned Throughput is off")
		return discovery{}
	}
	before := slices.Clone(pool.Status.Discovered)
	requeue, err := r.askGCP(ctx, pool)
	byLocation := ptsByLocation(pool, pts)
	undeclared := nameDeclarers(pool, byLocation)
	r.warnNewlyUndeclared(pool, before, undeclared)
	setDiscoveredMetric(pool, undeclared)
	setCapacityDeclared(pool, undeclared, err)
	r.setCapacitySaturated(pool)

	out := discovery{requeue: requeue}
	if mode == capacityv1alpha1.DiscoveryProtect {
		for _, d := range pool.Status.Discovered {
			if !byLocation[d.Name].provisioned() {
				out.protect = append(out.protect, d)
			}
		}
	}
	return out
}

// askGCP merges GCP's answer about the pool's project into
// status.discovered and returns when to ask again: the discovery interval,
// sooner when GCP could not be asked (then the last answer stands), with
// jitter. err is why GCP could not be asked.
func (r *RegionPoolReconciler) askGCP(ctx context.Context, pool *capacityv1alpha1.RegionPool) (requeue time.Duration, err error) {
	interval := r.discoveryInterval(pool)
	requeue = interval
	facts, err := r.Facts.ProjectFacts(ctx, pool.Spec.Project, interval)
	if err != nil {
		requeue = min(interval, SourceRetryInterval)
		ctrl.LoggerFrom(ctx).Info("GCP could not be asked; discovery keeps the last answer", "code", gcp.Code(err).String(), "error", err.Error())
	} else {
		pool.Status.Discovered = mergeDiscovered(pool, pool.Status.Discovered, facts, pool.Status.LastDiscoveryTime, interval)
		pool.Status.LastDiscoveryTime = stamp(facts.FetchedAt)
	}
	return requeue + time.Duration(rand.Float64()*VerificationJitter*float64(requeue)), err
}

// nameDeclarers sets each discovered region's ProvisionedThroughput to the
// PTs that declare its location, ready or not, and returns the regions that
// none declares.
func nameDeclarers(pool *capacityv1alpha1.RegionPool, byLocation map[string]*locationPTs) []capacityv1alpha1.DiscoveredRegion {
	var undeclared []capacityv1alpha1.DiscoveredRegion
	for i := range pool.Status.Discovered {
		d := &pool.Status.Discovered[i]
		d.ProvisionedThroughput = ""
		if l := byLocation[d.Name]; l != nil {
			d.ProvisionedThroughput = strings.Join(l.declared, ",")
		}
		if d.ProvisionedThroughput == "" {
			undeclared = append(undeclared, *d)
		}
	}
	return undeclared
}

// warnNewlyUndeclared records one Warning for each undeclared region that was
// not undeclared in before, the discovered set as the last reconcile left
// it: a region stays undeclared across many reconciles, and says so once.
func (r *RegionPoolReconciler) warnNewlyUndeclared(pool *capacityv1alpha1.RegionPool, before, undeclared []capacityv1alpha1.DiscoveredRegion) {
	for _, d := range undeclared {
		i := slices.IndexFunc(before, func(b capacityv1alpha1.DiscoveredRegion) bool { return b.Name == d.Name })
		if i < 0 || before[i].ProvisionedThroughput != "" {
			recordEvent(r.Recorder, pool, eventWarning, capacityv1alpha1.ReasonUndeclaredProvisionedThroughput, ActionReconcile, discoveredEvent(pool, d))
		}
	}
}

// setDiscoveredMetric makes the pool's series of the discovered-regions
// metric the undeclared regions, exactly.
func setDiscoveredMetric(pool *capacityv1alpha1.RegionPool, undeclared []capacityv1alpha1.DiscoveredRegion) {
	forgetDiscoveryMetrics(pool.Namespace, pool.Name)
	for _, d := range undeclared {
		discoveredRegions.WithLabelValues(pool.Namespace, pool.Name, d.Name, pool.Spec.Model).Set(1)
	}
}

// setCapacityDeclared sets CapacityDeclared: Unknown until GCP has answered
// once (err says why not), True when nothing GCP reports is undeclared,
// False otherwise.
func setCapacityDeclared(pool *capacityv1alpha1.RegionPool, undeclared []capacityv1alpha1.DiscoveredRegion, err error) {
	const declared = capacityv1alpha1.ConditionCapacityDeclared
	switch {
	case pool.Status.LastDiscoveryTime == nil:
		setCondition(pool, declared, metav1.ConditionUnknown, capacityv1alpha1.ReasonSourceUnavailable,
			fmt.Sprintf("%s: Cloud Monitoring could not be asked about project %s yet: %v", gcp.Code(err), pool.Spec.Project, err))
	case len(undeclared) == 0:
		setCondition(pool, declared, metav1.ConditionTrue, capacityv1alpha1.ReasonDeclared, declaredMessage(pool))
	default:
		setCondition(pool, declared, metav1.ConditionFalse, capacityv1alpha1.ReasonUndeclaredProvisionedThroughput, undeclaredMessage(pool, undeclared))
	}
}

// setCapacitySaturated sets CapacitySaturated from status.discovered: True
// when a region's answers have shown it at or over SaturationThreshold for
// SaturationPeriod, measured between GCP's own answers (an outage of GCP
// neither starts nor ends a saturation), with a Warning event when it turns
// True. Messages name regions and times, never the moving utilization, so an
// unchanged state records no event.
func (r *RegionPoolReconciler) setCapacitySaturated(pool *capacityv1alpha1.RegionPool) {
	const cond = capacityv1alpha1.ConditionCapacitySaturated
	if pool.Status.LastDiscoveryTime == nil {
		setCondition(pool, cond, metav1.ConditionUnknown, capacityv1alpha1.ReasonSourceUnavailable, "GCP has not answered yet: the utilization of the provisioned regions is unknown")
		return
	}
	var saturated []string
	for _, d := range pool.Status.Discovered {
		if s := d.SaturatedSince; s != nil && d.MissingSince == nil && d.LastSeenTime.Sub(s.Time) >= capacityv1alpha1.SaturationPeriod {
			saturated = append(saturated, fmt.Sprintf("%s (%d GSUs, since %s)", d.Name, d.GSUs, s.UTC().Format(time.RFC3339)))
		}
	}
	if len(saturated) == 0 {
		setConditionWithEvent(r.Recorder, pool, eventNormal, ActionReconcile, cond, metav1.ConditionFalse, capacityv1alpha1.ReasonHeadroom,
			fmt.Sprintf("no provisioned region has stayed at or over %.0f%% utilization for %s (status.discovered[].utilization, every cluster and caller together)",
				100*capacityv1alpha1.SaturationThreshold, capacityv1alpha1.SaturationPeriod))
		return
	}
	setConditionWithEvent(r.Recorder, pool, eventWarning, ActionReconcile, cond, metav1.ConditionTrue, capacityv1alpha1.ReasonSaturated,
		fmt.Sprintf("Provisioned Throughput at or over %.0f%% of its token limit for %s or more, every cluster and caller together: %s; "+
			"buy more GSUs, or move traffic or spec.capacityShare, before calls spill over or are refused",
			100*capacityv1alpha1.SaturationThreshold, capacityv1alpha1.SaturationPeriod, strings.Join(saturated, ", ")))
}

// discoveryOff forgets what discovery knew: nothing is asked, so nothing is
// protected on GCP's word.
func discoveryOff(pool *capacityv1alpha1.RegionPool, msg string) {
	pool.Status.Discovered = nil
	pool.Status.LastDiscoveryTime = nil
	forgetDiscoveryMetrics(pool.Namespace, pool.Name)
	setCondition(pool, capacityv1alpha1.ConditionCapacityDeclared, metav1.ConditionUnknown, capacityv1alpha1.ReasonDiscoveryOff, msg)
	setCondition(pool, capacityv1alpha1.ConditionCapacitySaturated, metav1.ConditionUnknown, capacityv1alpha1.ReasonDiscoveryOff, msg)
}

// discoveryInterval is the pool's interval, or the reconciler's override.
func (r *RegionPoolReconciler) discoveryInterval(pool *capacityv1alpha1.RegionPool) time.Duration {
	if r.DiscoveryInterval > 0 {
		return r.DiscoveryInterval
	}
	return pool.GetDiscoveryInterval()
}

// mergeDiscovered is the pool's discovered set after GCP's answer facts, from
// the set before it. A listed region that the answer reports is in the set
// with what GCP reports; one the answer omits stays, with missingSince set at
// the first answer that omitted it, until answers have omitted it for longer
// than the grace period. A region the spec no longer lists leaves the set. The
// result is sorted by name; ProvisionedThroughput is carried over, to be set
// by the caller.
//
// Only time in which GCP answered counts toward the grace period: an outage
// of GCP (or of the operator) says nothing about an order, so when this
// answer comes more than answerGap(interval) after the last one (lastAnswer),
// every missingSince moves forward by the excess. Without that, an order
// omitted by one answer before a long outage would lose its protection at
// the first answer after it, on two answers' word instead of the grace
// period's worth of them.
func mergeDiscovered(pool *capacityv1alpha1.RegionPool, prev []capacityv1alpha1.DiscoveredRegion, facts *gcp.ProjectFacts, lastAnswer *metav1.Time, interval time.Duration) []capacityv1alpha1.DiscoveredRegion {
	at := stamp(facts.FetchedAt)
	grace := pool.GetDiscoveryGracePeriod()
	var unanswered time.Duration
	if lastAnswer != nil {
		unanswered = max(at.Sub(lastAnswer.Time)-answerGap(interval), 0)
	}
	var out []capacityv1alpha1.DiscoveredRegion
	for _, sr := range pool.Spec.Regions {
		i := slices.IndexFunc(prev, func(d capacityv1alpha1.DiscoveredRegion) bool { return d.Name == sr.Name })
		if f, ok := facts.Lookup(sr.Name, pool.GetPublisher(), pool.Spec.Model); ok && f.GSUs > 0 {
			d := capacityv1alpha1.DiscoveredRegion{Name: sr.Name, GSUs: f.GSUs, TokensPerSecond: f.TokensPerSecond, LastSeenTime: *at, Utilization: f.Utilization()}
			if i >= 0 {
				d.ProvisionedThroughput = prev[i].ProvisionedThroughput
			}
			if d.Utilization >= capacityv1alpha1.SaturationThreshold {
				d.SaturatedSince = at.DeepCopy()
				if i >= 0 && prev[i].SaturatedSince != nil {
					d.SaturatedSince = prev[i].SaturatedSince.DeepCopy()
				}
			}
			out = append(out, d)
			continue
		}
		if i < 0 {
			continue
		}
		d := *prev[i].DeepCopy()
		switch {
		case d.MissingSince == nil:
			d.MissingSince = at.DeepCopy()
		case unanswered > 0:
			moved := d.MissingSince.Add(unanswered)
			if moved.After(at.Time) {
				moved = at.Time
			}
			d.MissingSince = stamp(moved)
		}
		if at.Sub(d.MissingSince.Time) > grace {
			continue
		}
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// answerGap is the longest time between two of GCP's answers that discovery
// takes for answers in a row: the asking interval with its requeue jitter.
// Any time beyond it went unanswered.
func answerGap(interval time.Duration) time.Duration {
	return interval + time.Duration(VerificationJitter*float64(interval))
}

// discoveredEvent is the Warning about one region that became undeclared.
func discoveredEvent(pool *capacityv1alpha1.RegionPool, d capacityv1alpha1.DiscoveredRegion) string {
	effect := "the routing table does not protect it (spec.discovery.mode is Warn)"
	if pool.GetDiscoveryMode() == capacityv1alpha1.DiscoveryProtect {
		effect = "it is routed as provisioned, never ejected, on GCP's word"
	}
	return fmt.Sprintf("GCP reports %d GSUs of Provisioned Throughput for %s/%s in %s of project %s and no ProvisionedThroughput declares it: %s; "+
		"declare it (the CapacityDeclared condition shows the object to apply)",
		d.GSUs, pool.GetPublisher(), pool.Spec.Model, d.Name, pool.Spec.Project, effect)
}

// declaredMessage is CapacityDeclared's message when nothing is undeclared.
func declaredMessage(pool *capacityv1alpha1.RegionPool) string {
	var names []string
	for _, d := range pool.Status.Discovered {
		names = append(names, fmt.Sprintf("%s (%d GSUs, %s)", d.Name, d.GSUs, d.ProvisionedThroughput))
	}
	if len(names) == 0 {
		return fmt.Sprintf("GCP reports no Provisioned Throughput for %s/%s in the pool's regions", pool.GetPublisher(), pool.Spec.Model)
	}
	return "every Provisioned Throughput GCP reports in the pool's regions is declared: " + strings.Join(names, ", ")
}

// undeclaredMessage lists the undeclared regions with their GSUs, says what
// the mode does about them, and shows the ProvisionedThroughput objects that
// declare them.
func undeclaredMessage(pool *capacityv1alpha1.RegionPool, undeclared []capacityv1alpha1.DiscoveredRegion) string {
	var b strings.Builder
	b.WriteString("GCP reports Provisioned Throughput that no ProvisionedThroughput declares: ")
	for i, d := range undeclared {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s (%d GSUs)", d.Name, d.GSUs)
	}
	if pool.GetDiscoveryMode() == capacityv1alpha1.DiscoveryProtect {
		b.WriteString(". They are routed as provisioned, never ejected, until GCP stops reporting them for longer than " + pool.GetDiscoveryGracePeriod().String())
	} else {
		b.WriteString(". spec.discovery.mode is Warn: the routing table treats them as pay-as-you-go")
	}
	b.WriteString(". Declare them with `kubectl apply -f -` of:\n")
	for _, d := range undeclared {
		b.WriteString(ptManifest(pool, d))
	}
	return b.String()
}

// ptManifest is the YAML of a ProvisionedThroughput that declares d and
// selects pool: it carries the matchLabels of the pool's selector.
func ptManifest(pool *capacityv1alpha1.RegionPool, d capacityv1alpha1.DiscoveredRegion) string {
	var b strings.Builder
	fmt.Fprintf(&b, "---\napiVersion: %s\nkind: ProvisionedThroughput\nmetadata:\n  name: %s-%s\n  namespace: %s\n",
		capacityv1alpha1.GroupVersion.String(), pool.Name, d.Name, pool.Namespace)
	if sel := pool.Spec.ProvisionedThroughputSelector; sel != nil && len(sel.MatchLabels) > 0 {
		b.WriteString("  labels:\n")
		keys := make([]string, 0, len(sel.MatchLabels))
		for k := range sel.MatchLabels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "    %s: %s\n", k, strconv.Quote(sel.MatchLabels[k]))
		}
	}
	fmt.Fprintf(&b, "spec:\n  project: %s\n  location: %s\n  publisher: %s\n  model: %s\n  gsus: %d\n",
		pool.Spec.Project, d.Name, pool.GetPublisher(), pool.Spec.Model, d.GSUs)
	return b.String()
}
