// Package v1alpha1 holds the API of capacity.regionwarden.io: ProvisionedThroughput,
// the declaration of reserved Vertex AI capacity, and RegionPool, the regions that
// serve one model and the routing policy over them.
//
// Defaults and validation live in the schema (markers and CEL rules), so the API
// server refuses a bad object at apply time with a message that names the field.
//
// +kubebuilder:object:generate=true
// +groupName=capacity.regionwarden.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of these kinds.
	GroupVersion = schema.GroupVersion{Group: "capacity.regionwarden.io", Version: "v1alpha1"}

	// SchemeBuilder adds the kinds of this group version to a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the kinds of this group version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// addKnownTypes registers the kinds of this group version.
func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&ProvisionedThroughput{}, &ProvisionedThroughputList{},
		&RegionPool{}, &RegionPoolList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
