// Package controllers holds one reconciler per kind of capacity.regionwarden.io.
//
// The ProvisionedThroughput controller owns the status of ProvisionedThroughput
// objects: it verifies each declaration against GCP and never writes a spec.
// The RegionPool controller owns the status of RegionPool objects and the
// routing-table ConfigMap of each pool; it never writes a spec either, and never
// touches a ConfigMap that another owner holds.
package controllers
