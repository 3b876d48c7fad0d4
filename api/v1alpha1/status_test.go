package v1alpha1_test

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/regionwarden/regionwarden/internal/testenv"
)

// TestNewObjectReadsAsNotObserved creates each kind as a person would, with
// no status, and reads it back as Flux and Argo CD do: it must carry
// status.observedGeneration 0 against metadata.generation 1, so that health
// checks (kstatus's generation rule) wait for the operator rather than take
// an object nobody has reconciled yet for a current one.
func TestNewObjectReadsAsNotObserved(t *testing.T) {
	ns := testenv.Namespace(t, k8s)
	ctx := context.Background()
	for _, obj := range []map[string]any{goodPT(ns), goodPool(ns)} {
		u := &unstructured.Unstructured{Object: obj}
		if err := k8s.Create(ctx, u); err != nil {
			t.Fatal(err)
		}
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(u.GroupVersionKind())
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(u), got); err != nil {
			t.Fatal(err)
		}
		observed, found, err := unstructured.NestedInt64(got.Object, "status", "observedGeneration")
		if err != nil || !found || observed != 0 || got.GetGeneration() != 1 {
			t.Errorf("new %s reads with generation %d and status.observedGeneration %d (found %t, %v); want 1 and 0",
				u.GetKind(), got.GetGeneration(), observed, found, err)
		}
	}
}
