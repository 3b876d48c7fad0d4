package v1alpha1

// Condition types. Ready, Reconciling and Stalled follow kstatus, so kubectl,
// Argo CD and Flux read health without knowing these kinds.
const (
	// ConditionReady on a ProvisionedThroughput means "route this location as
	// provisioned"; on a RegionPool, "the routing table is written and current".
	ConditionReady = "Ready"
	// ConditionReconciling is True while the controller works toward the spec.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True when the controller cannot progress without a
	// change by a person (a bad spec, a name owned by someone else).
	ConditionStalled = "Stalled"
	// ConditionVerified says whether GCP shows the declared capacity.
	ConditionVerified = "Verified"
	// ConditionExpiring is True within ExpiringWindow of the term's end.
	ConditionExpiring = "Expiring"
)

// Condition reasons. A Warning event carries the same reason as its condition.
const (
	ReasonObserved          = "Observed"
	ReasonMismatch          = "Mismatch"
	ReasonNotFound          = "NotFound"
	ReasonSourceUnavailable = "SourceUnavailable"
	ReasonSkipped           = "Skipped"
	ReasonExpired           = "Expired"
	ReasonExpiring          = "Expiring"
	ReasonActive            = "Active"
	ReasonProgressing       = "Progressing"
	ReasonRendered          = "Rendered"
	ReasonConfigMapConflict = "ConfigMapConflict"
	// ReasonDuplicatePool: an older RegionPool of the namespace routes the
	// same project, publisher and model; this one renders nothing.
	ReasonDuplicatePool     = "DuplicatePool"
	ReasonRenderFailed      = "RenderFailed"
	ReasonWriteFailed       = "WriteFailed"
	ReasonUndeclaredRegions = "UndeclaredRegionsAdded"
)
