package controllers

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	capacityv1alpha1 "github.com/regionwarden/regionwarden/api/v1alpha1"
)

// ptLabels name one ProvisionedThroughput object and what it declares. Location
// and model are immutable in the spec, so an object has one series per metric.
var ptLabels = []string{"namespace", "name", "location", "model"}

// The PT metrics are served on the manager's metrics endpoint. A deleted
// object's series are deleted with it; a GCP outage leaves the gauges at the
// last answer GCP gave, as it leaves the status.
var (
	ptObservedGSUs = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "regionwarden",
		Subsystem: "provisionedthroughput",
		Name:      "observed_gsus",
		Help:      "GSUs of Provisioned Throughput that Cloud Monitoring shows for a ProvisionedThroughput object; 0 when it shows none.",
	}, ptLabels)
	ptUtilization = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "regionwarden",
		Subsystem: "provisionedthroughput",
		Name:      "utilization",
		Help:      "Dedicated tokens per second over the dedicated token limit in the last five minutes; 1 means the Provisioned Throughput is fully used.",
	}, ptLabels)
	ptSpilloverRatio = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "regionwarden",
		Subsystem: "provisionedthroughput",
		Name:      "spillover_ratio",
		Help:      "Share of Provisioned-Throughput-eligible tokens that spilled over to pay-as-you-go in the last five minutes.",
	}, ptLabels)
	ptVerificationErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "regionwarden",
		Subsystem: "provisionedthroughput",
		Name:      "verification_errors_total",
		Help:      "Verifications that could not ask Cloud Monitoring, by gRPC code (PermissionDenied, Unavailable, DeadlineExceeded, ...).",
	}, append(append([]string{}, ptLabels...), "code"))
	ptCondition = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "regionwarden",
		Subsystem: "provisionedthroughput",
		Name:      "condition",
		Help:      "1 for each condition of a ProvisionedThroughput object, by type, status and reason: the status kubectl shows, for alerts.",
	}, append(append([]string{}, ptLabels...), "type", "status", "reason"))
)

func init() {
	metrics.Registry.MustRegister(Collectors()...)
}

// Collectors are the operator's own metrics, which it registers on
// controller-runtime's registry beside the reconcile and work queue metrics.
// Tools that check what the operator exports (the alert and dashboard tests)
// describe them.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{ptObservedGSUs, ptUtilization, ptSpilloverRatio, ptVerificationErrors, ptCondition, discoveredRegions}
}

// forgetPTMetrics deletes every series of the object namespace/name.
func forgetPTMetrics(namespace, name string) {
	forgetPTObserved(namespace, name)
	ptVerificationErrors.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "name": name})
	ptCondition.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "name": name})
}

// observePTConditions makes the condition series say what the status says:
// one series per condition type, its status and reason in the labels, so a
// condition that changes replaces its series instead of adding one.
func observePTConditions(pt *capacityv1alpha1.ProvisionedThroughput) {
	for _, c := range pt.Status.Conditions {
		ptCondition.DeletePartialMatch(prometheus.Labels{"namespace": pt.Namespace, "name": pt.Name, "type": c.Type})
		ptCondition.WithLabelValues(pt.Namespace, pt.Name, pt.Spec.Location, pt.Spec.Model, c.Type, string(c.Status), c.Reason).Set(1)
	}
}

// forgetPTObserved deletes the object's gauges, which describe a verified
// answer, and keeps its error counts.
func forgetPTObserved(namespace, name string) {
	l := prometheus.Labels{"namespace": namespace, "name": name}
	ptObservedGSUs.DeletePartialMatch(l)
	ptUtilization.DeletePartialMatch(l)
	ptSpilloverRatio.DeletePartialMatch(l)
}
