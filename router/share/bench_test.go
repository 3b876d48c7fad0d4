package share

import (
	"testing"

	"github.com/regionwarden/regionwarden/router/policy"
	"github.com/regionwarden/regionwarden/router/table"
)

// BenchmarkApplyShare measures what a share change costs a router: scaling a
// pool of four regions and the policy's Update, which keeps live state. The
// controller does it at most a few times a second.
func BenchmarkApplyShare(b *testing.B) {
	p := testPool()
	p.Regions = append(p.Regions, table.Region{Name: "europe-southwest1", Capacity: table.Capacity{RequestsPerSecond: 4}})
	p.Default()
	pol, err := policy.New(p, policy.Options{})
	if err != nil {
		b.Fatal(err)
	}
	parts := []Part{RankedPart(3, 1), RankedPart(2, 1)}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := pol.Update(Scale(p, parts[i%2])); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
