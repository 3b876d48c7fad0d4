package share

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

// TestEndpointSliceCount drives the counting rule on slices built by hand:
// which endpoints count, each pod once, and this router's rank among them.
func TestEndpointSliceCount(t *testing.T) {
	ep := func(name string, ready, serving, terminating bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{
			Addresses:  []string{"10.0.0.1"},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready), Serving: ptr.To(serving), Terminating: ptr.To(terminating)},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: name},
		}
	}
	slice := func(eps ...discoveryv1.Endpoint) any { return &discoveryv1.EndpointSlice{Endpoints: eps} }
	changes := 0
	c := NewEndpointSliceCounter(nil, "ns", "router", "r-c", func() { changes++ })
	for _, tc := range []struct {
		name     string
		slices   []any
		want     int
		wantRank int
	}{
		{"nothing yet: itself", nil, 1, -1},
		{"two ready, this router not among them", []any{slice(ep("r-a", true, true, false), ep("r-b", true, true, false))}, 2, -1},
		{"this router starting", []any{slice(ep("r-a", true, true, false), ep("r-b", true, true, false), ep("r-c", false, false, false))}, 3, 2},
		{"the same pods in two slices (dual stack)", []any{
			slice(ep("r-a", true, true, false), ep("r-b", true, true, false), ep("r-c", true, true, false)),
			slice(ep("r-a", true, true, false), ep("r-b", true, true, false), ep("r-c", true, true, false)),
		}, 3, 2},
		{"r-a draining: terminating, still serving", []any{slice(ep("r-a", false, true, true), ep("r-b", true, true, false), ep("r-c", true, true, false))}, 3, 2},
		{"r-a done serving", []any{slice(ep("r-a", false, false, true), ep("r-b", true, true, false), ep("r-c", true, true, false))}, 2, 1},
		{"r-b was ready and fails its probe", []any{slice(ep("r-b", false, false, false), ep("r-c", true, true, false))}, 1, 0},
		{"r-b ready again", []any{slice(ep("r-b", true, true, false), ep("r-c", true, true, false))}, 2, 1},
	} {
		c.recount(tc.slices)
		rank, ok := c.Rank()
		if !ok {
			rank = -1
		}
		if c.Replicas() != tc.want || rank != tc.wantRank {
			t.Errorf("%s: %d replicas, rank %d; want %d, rank %d", tc.name, c.Replicas(), rank, tc.want, tc.wantRank)
		}
	}
	if changes == 0 {
		t.Error("onChange never called")
	}
}
