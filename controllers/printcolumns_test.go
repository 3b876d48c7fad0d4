package controllers

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	capacityv1alpha1 "github.com/regionwarden/regionwarden/api/v1alpha1"
	"github.com/regionwarden/regionwarden/internal/kubetable"
)

// getColumns lists resource in ns as `kubectl get -o wide` sees it, through
// the CRD's printer columns that the API server evaluates, and returns each
// row's cells by column name, rows by object name.
func getColumns(t *testing.T, ns, resource string) map[string]map[string]string {
	t.Helper()
	gvr := capacityv1alpha1.GroupVersion.WithResource(resource)
	tbl, err := kubetable.Get(context.Background(), testConfig, gvr, ns)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]map[string]string{}
	for i := range tbl.Rows {
		cells := map[string]string{}
		for _, c := range tbl.ColumnDefinitions {
			cells[c.Name], _ = kubetable.Cell(tbl, i, c.Name, time.Now())
		}
		rows[cells["Name"]] = cells
	}
	return rows
}

// TestKubectlGetShowsThePool checks what `kubectl get rpool -o wide` shows of
// a pool of four regions, one of them provisioned: every region counted, not
// the first one alone.
func TestKubectlGetShowsThePool(t *testing.T) {
	e := newPoolEnv(t, true)
	e.createPool("flash", []string{"us-central1", "europe-west1", "europe-west4", "us-east5"})
	createPT(e.t, e.ns, "ew1-order", 4, withLocation("europe-west1"))
	e.setPTReady("ew1-order", true, capacityv1alpha1.ReasonActive, 12000)
	e.waitPool("flash", "protects europe-west1", func(p *capacityv1alpha1.RegionPool) bool {
		return isReconciled(p) && len(p.Status.ProtectedRegions) == 1
	})

	got := getColumns(t, e.ns, "regionpools")["flash"]
	want := map[string]string{
		"Model": testModel, "Regions": "4", "Provisioned": "1", "Ready": "True",
		"Summary": "4 regions, 1 provisioned: europe-west1", "Table": "flash-routing",
	}
	for col, v := range want {
		if got[col] != v {
			t.Errorf("column %s = %q, want %q (row %v)", col, got[col], v, got)
		}
	}
}

// TestKubectlGetShowsDeclaredAndObservedGSUs checks that `kubectl get pt`
// puts what was declared beside what GCP shows, and says how they compare.
func TestKubectlGetShowsDeclaredAndObservedGSUs(t *testing.T) {
	e := newPTEnv(t, ptEnvOptions{})
	e.gcpShows(2, 6000, nil)
	e.create("ew1-order", 4, withTermEnd(ptT0.Add(90*24*time.Hour)))
	pt := e.waitReconciled("ew1-order")
	if !meta.IsStatusConditionTrue(pt.Status.Conditions, capacityv1alpha1.ConditionReady) {
		t.Fatalf("the PT is not Ready: %+v", pt.Status.Conditions)
	}

	got := getColumns(t, e.ns, "provisionedthroughputs")["ew1-order"]
	want := map[string]string{
		"Location": testLocation, "Declared GSUs": "4", "Observed GSUs": "2", "Ready": "True", "Verified": capacityv1alpha1.ReasonMismatch,
	}
	for col, v := range want {
		if got[col] != v {
			t.Errorf("column %s = %q, want %q (row %v)", col, got[col], v, got)
		}
	}
	if !strings.HasPrefix(got["Expires"], "2026-05-30") {
		t.Errorf("column Expires = %q, want the term's end", got["Expires"])
	}
}
