package controllers

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
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
)

func init() {
	metrics.Registry.MustRegister(ptObservedGSUs, ptUtilization, ptSpilloverRatio, ptVerificationErrors)
}

// forgetPTMetrics deletes every series of the object namespace/name.
func forgetPTMetrics(namespace, name string) {
	forgetPTObserved(namespace, name)
	ptVerificationErrors.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "name": name})
}

// forgetPTObserved deletes the object's gauges, which describe a verified
// answer, and keeps its error counts.
func forgetPTObserved(namespace, name string) {
	l := prometheus.Labels{"namespace": namespace, "name": name}
	ptObservedGSUs.DeletePartialMatch(l)
	ptUtilization.DeletePartialMatch(l)
	ptSpilloverRatio.DeletePartialMatch(l)
}
