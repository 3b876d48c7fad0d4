package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// VerificationPolicy says what the operator does with what GCP reports.
// +kubebuilder:validation:Enum=Warn;Enforce;Skip
type VerificationPolicy string

const (
	// VerificationWarn reports a disagreement with GCP but keeps routing the
	// location as provisioned.
	VerificationWarn VerificationPolicy = "Warn"
	// VerificationEnforce stops routing the location as provisioned once GCP has
	// reported no capacity there for longer than the grace period.
	VerificationEnforce VerificationPolicy = "Enforce"
	// VerificationSkip makes no GCP calls; readiness follows the term alone.
	VerificationSkip VerificationPolicy = "Skip"
)

// Defaults the controllers rely on; the schema's defaults are the same values.
const (
	DefaultPublisher            = "google"
	DefaultVerificationInterval = 5 * time.Minute
	DefaultGracePeriod          = time.Hour
	// ExpiringWindow is how long before the term's end Expiring turns True.
	ExpiringWindow = 14 * 24 * time.Hour
)

// ProvisionedThroughputSpec declares Provisioned Throughput bought in GCP for one
// publisher model in one location of one project.
// +kubebuilder:validation:XValidation:rule="!has(self.term) || !has(self.term.start) || !has(self.term.end) || self.term.end > self.term.start",message="spec.term.end must be after spec.term.start",fieldPath=".term.end"
type ProvisionedThroughputSpec struct {
	// Project is the GCP project ID that holds the order, e.g. "acme-prod".
	// Immutable: capacity in another project is another commitment.
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9-]{4,28}[a-z0-9]$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="project is immutable: capacity in another project is another commitment"
	Project string `json:"project"`

	// Location is where the capacity was bought: a GCP region such as
	// "europe-west1", or "global", "eu" or "us". Capacity bought on global is used
	// only through the global endpoint. Immutable.
	// +kubebuilder:validation:Pattern=`^([a-z]+-[a-z]+[0-9]{1,2}|global|eu|us)$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="location is immutable: capacity in another location is another commitment"
	Location string `json:"location"`

	// Publisher is the model's publisher. Immutable.
	// +kubebuilder:default=google
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9-]{0,62}$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="publisher is immutable"
	// +optional
	Publisher string `json:"publisher,omitempty"`

	// Model is the publisher model ID, with or without its version suffix, e.g.
	// "gemini-3.6-flash" or "gemini-3.6-flash-001"; a partner model's
	// version follows an "@", e.g. "claude-sonnet-4-5@20250929" (publisher
	// anthropic). Immutable.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9.@-]{0,126}[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="model is immutable: capacity for another model is another commitment"
	Model string `json:"model"`

	// GSUs is how many generative AI scale units were bought.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	GSUs int64 `json:"gsus"`

	// Term is the commitment's period. After its end the location is no longer
	// routed as provisioned.
	// +optional
	Term *Term `json:"term,omitempty"`

	// Verification says how the declaration is checked against GCP.
	// +kubebuilder:default={}
	// +optional
	Verification Verification `json:"verification,omitempty"`
}

// Term is the period a commitment covers.
type Term struct {
	// Start is when the commitment began.
	// +optional
	Start *metav1.Time `json:"start,omitempty"`
	// End is when the commitment ends; it must be after Start.
	// +optional
	End *metav1.Time `json:"end,omitempty"`
}

// Verification configures how the operator checks the declaration against what
// GCP reports in Cloud Monitoring.
type Verification struct {
	// Policy is Warn (report disagreements, keep routing as provisioned),
	// Enforce (stop routing as provisioned once GCP has shown no capacity for
	// longer than the grace period) or Skip (make no GCP calls).
	// +kubebuilder:default=Warn
	// +optional
	Policy VerificationPolicy `json:"policy,omitempty"`

	// Interval between verifications, at least 30s.
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('30s')",message="interval must be at least 30s"
	// +optional
	Interval *metav1.Duration `json:"interval,omitempty"`

	// GracePeriod is how long GCP may report no capacity before Enforce stops
	// routing the location as provisioned.
	// +kubebuilder:default="1h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`
	// +optional
	GracePeriod *metav1.Duration `json:"gracePeriod,omitempty"`
}

// ObservedCapacity is what GCP reported for the declaration.
type ObservedCapacity struct {
	// GSUs is the dedicated GSU limit GCP reports.
	GSUs int64 `json:"gsus"`
	// TokensPerSecond is the dedicated token limit GCP reports.
	// +optional
	TokensPerSecond float64 `json:"tokensPerSecond,omitempty"`
	// Utilization is dedicated tokens per second over the token limit, in the
	// last five minutes.
	// +optional
	Utilization float64 `json:"utilization,omitempty"`
	// SpilloverRatio is the share of provisioned-path tokens that spilled over to
	// pay-as-you-go in the last five minutes.
	// +optional
	SpilloverRatio float64 `json:"spilloverRatio,omitempty"`
}

// ProvisionedThroughputStatus is what the operator found.
type ProvisionedThroughputStatus struct {
	// Conditions: Ready (route the location as provisioned), Verified (GCP
	// agrees), Expiring, Reconciling and Stalled.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ObservedGeneration is the generation the status describes: the
	// operator reconciled it in full, or is stalled on it (Stalled says
	// why). The schema's default, 0, makes a new object read as not yet
	// observed, so Flux (kstatus) and Argo CD wait for the operator rather
	// than take a status nobody wrote for a current one.
	// +kubebuilder:default=0
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Observed is what GCP reported at the last successful verification.
	// +optional
	Observed *ObservedCapacity `json:"observed,omitempty"`
	// LastVerifiedTime is when GCP last answered.
	// +optional
	LastVerifiedTime *metav1.Time `json:"lastVerifiedTime,omitempty"`
	// NotFoundSince is when GCP began reporting no capacity, continuously, for
	// this declaration, moved later by any time in which GCP could not be
	// asked, so that the grace period counts GCP's answers alone; empty while
	// GCP shows capacity.
	// +optional
	NotFoundSince *metav1.Time `json:"notFoundSince,omitempty"`
	// ExpiresAt is the term's end.
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`
}

// ProvisionedThroughput declares Provisioned Throughput bought in GCP. The
// operator verifies it against Cloud Monitoring; while it is Ready, every
// RegionPool of the same project and model routes its location as provisioned
// capacity that is never ejected.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=pt,categories=regionwarden
// +kubebuilder:printcolumn:name="Project",type=string,JSONPath=`.spec.project`
// +kubebuilder:printcolumn:name="Location",type=string,JSONPath=`.spec.location`
// +kubebuilder:printcolumn:name="Model",type=string,JSONPath=`.spec.model`
// +kubebuilder:printcolumn:name="Declared GSUs",type=integer,JSONPath=`.spec.gsus`
// +kubebuilder:printcolumn:name="Observed GSUs",type=integer,JSONPath=`.status.observed.gsus`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Verified",type=string,JSONPath=`.status.conditions[?(@.type=="Verified")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Expires",type=string,JSONPath=`.status.expiresAt`,priority=1
type ProvisionedThroughput struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is what was bought.
	Spec ProvisionedThroughputSpec `json:"spec"`
	// Status is what the operator found.
	// +kubebuilder:default={}
	// +optional
	Status ProvisionedThroughputStatus `json:"status,omitempty"`
}

// ProvisionedThroughputList is a list of ProvisionedThroughput.
// +kubebuilder:object:root=true
type ProvisionedThroughputList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ProvisionedThroughput `json:"items"`
}

// GetPublisher returns the publisher, defaulted.
func (pt *ProvisionedThroughput) GetPublisher() string { return publisherOrDefault(pt.Spec.Publisher) }

// publisherOrDefault is publisher, or DefaultPublisher when it is unset.
func publisherOrDefault(publisher string) string {
	if publisher == "" {
		return DefaultPublisher
	}
	return publisher
}

// GetVerificationPolicy returns the verification policy, defaulted.
func (pt *ProvisionedThroughput) GetVerificationPolicy() VerificationPolicy {
	if pt.Spec.Verification.Policy == "" {
		return VerificationWarn
	}
	return pt.Spec.Verification.Policy
}

// GetVerificationInterval returns the verification interval, defaulted.
func (pt *ProvisionedThroughput) GetVerificationInterval() time.Duration {
	if v := pt.Spec.Verification.Interval; v != nil && v.Duration > 0 {
		return v.Duration
	}
	return DefaultVerificationInterval
}

// GetGracePeriod returns the grace period, defaulted.
func (pt *ProvisionedThroughput) GetGracePeriod() time.Duration {
	if v := pt.Spec.Verification.GracePeriod; v != nil && v.Duration >= 0 {
		return v.Duration
	}
	return DefaultGracePeriod
}

// GetConditions returns the status conditions.
func (pt *ProvisionedThroughput) GetConditions() []metav1.Condition { return pt.Status.Conditions }

// SetConditions replaces the status conditions.
func (pt *ProvisionedThroughput) SetConditions(c []metav1.Condition) { pt.Status.Conditions = c }

// SetObservedGeneration records the generation the status describes.
func (pt *ProvisionedThroughput) SetObservedGeneration(g int64) { pt.Status.ObservedGeneration = g }
