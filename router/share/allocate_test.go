package share

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func TestAllocate(t *testing.T) {
	peers := func(ds ...float64) []Peer {
		var ps []Peer
		for i, d := range ds {
			ps = append(ps, Peer{ID: fmt.Sprintf("r%d", i), Replicas: len(ds), Demand: d})
		}
		return ps
	}
	for _, tc := range []struct {
		name  string
		peers []Peer
		id    string
		want  float64
		ok    bool
	}{
		{"even demand", peers(10, 10, 10), "r0", 1.0 / 3, true},
		{"70/20/10", peers(70, 20, 10), "r0", 0.7, true},
		{"70/20/10, the smallest", peers(70, 20, 10), "r2", 0.1, true},
		{"no demand splits evenly", peers(0, 0, 0), "r1", 1.0 / 3, true},
		// r2 has no demand: it keeps the floor, 0.1/3 of the weight.
		{"idle replica keeps the floor", peers(50, 50, 0), "r2", (0.1 / 3) / (1 + 0.1/3), true},
		{"absent router takes its static share", peers(1, 1), "r9", 0, false},
		// Two routers published, one counts three replicas: the third
		// keeps its static third, the two share the rest.
		{"a silent replica's share is left to it", []Peer{{ID: "a", Replicas: 3, Demand: 30}, {ID: "b", Replicas: 2, Demand: 10}}, "a", 2.0 / 3 * 0.75, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Allocate(tc.peers, tc.id)
			if ok != tc.ok || math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("Allocate = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestAllocateSumsToOne is the invariant the quota rests on: from one
// snapshot, the shares of the routers in it plus the static shares left to
// the others add up to one, whatever the demands and counts.
func TestAllocateSumsToOne(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		p := 1 + rnd.IntN(8)
		var peers []Peer
		n := p
		for i := range p {
			c := p + rnd.IntN(3)
			n = max(n, c)
			d := 0.0
			if rnd.IntN(4) > 0 {
				d = rnd.ExpFloat64() * 100
			}
			peers = append(peers, Peer{ID: fmt.Sprintf("r%d", i), Replicas: c, Demand: d})
		}
		sum := float64(n-p) / float64(n)
		for _, pr := range peers {
			s, ok := Allocate(peers, pr.ID)
			if !ok || s <= 0 {
				t.Fatalf("router %s of %+v got %v, %v", pr.ID, peers, s, ok)
			}
			if floor := Floor / float64(p) * float64(p) / float64(n) / (1 + Floor); s < floor*0.999/float64(p) {
				t.Fatalf("router %s of %+v got %v, under the floor", pr.ID, peers, s)
			}
			sum += s
		}
		if math.Abs(sum-1) > 1e-9 {
			t.Fatalf("shares of %+v add up to %v", peers, sum)
		}
	}
}
