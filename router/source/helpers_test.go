package source

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/regionwarden/regionwarden/internal/testenv"
	"github.com/regionwarden/regionwarden/router/table"
)

// renderPool renders a valid one-pool table for model in project.
func renderPool(t *testing.T, project, model string, regions ...string) []byte {
	t.Helper()
	if len(regions) == 0 {
		regions = []string{"europe-west1", "europe-west4"}
	}
	p := table.Pool{Project: project, Model: model}
	for i, r := range regions {
		reg := table.Region{Name: r}
		if i == 0 {
			reg.Tier = table.TierProvisioned
			reg.Capacity.GSUs = 2
		}
		p.Regions = append(p.Regions, reg)
	}
	b, err := table.Render(&table.Table{Version: table.Version, Pools: []table.Pool{p}})
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return b
}

// hashOf is the hash a source reports once it serves data.
func hashOf(t *testing.T, data []byte) string {
	t.Helper()
	tb, err := table.Parse(data)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return tb.Hash()
}

// badTables are tables every source must refuse, with the reason it gives.
var badTables = []struct {
	name   string
	data   string
	reason string
}{
	{"not json", `{"version": 1, "pools": [`, ReasonInvalid},
	{"unknown version", `{"version": 2, "pools": []}`, ReasonVersion},
	{"invalid pool", `{"version": 1, "pools": [{"project": "p", "model": "m", "regions": []}]}`, ReasonInvalid},
	{"unknown field", `{"version": 1, "pools": [], "extra": true}`, ReasonInvalid},
	{"endpoint off Google", `{"version": 1, "pools": [{"project": "p", "model": "m", "regions": [{"name": "us-east5", "endpoint": "attacker.example.com:443"}]}]}`, ReasonEndpoint},
}

// recorder is an Observer that remembers every refusal in order and counts
// loads. Its zero value is ready to use and it is safe for concurrent use.
type recorder struct {
	loads   atomic.Int64
	mu      sync.Mutex
	refused []refusal
}

// refusal is one Rejected call.
type refusal struct {
	origin, reason string
	err            error
}

// Loaded counts one table load.
func (r *recorder) Loaded(string, string) { r.loads.Add(1) }

// Rejected remembers one refusal.
func (r *recorder) Rejected(origin, reason string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refused = append(r.refused, refusal{origin, reason, err})
}

// Loads is how many tables started serving.
func (r *recorder) Loads() int { return int(r.loads.Load()) }

// refusals is every refusal so far, in order.
func (r *recorder) refusals() []refusal {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.refused)
}

// Rejections is how many tables were refused, all reasons together.
func (r *recorder) Rejections() int { return len(r.refusals()) }

// RejectionsFor is how many tables were refused for reason.
func (r *recorder) RejectionsFor(reason string) int {
	n := 0
	for _, x := range r.refusals() {
		if x.reason == reason {
			n++
		}
	}
	return n
}

// LastError is the error of the latest refusal, or nil.
func (r *recorder) LastError() error {
	if rs := r.refusals(); len(rs) > 0 {
		return rs[len(rs)-1].err
	}
	return nil
}

// rejections is every refusal as "origin reason", in order.
func (r *recorder) rejections() []string {
	var out []string
	for _, x := range r.refusals() {
		out = append(out, x.origin+" "+x.reason)
	}
	return out
}

// kubeletDir writes a folder the way the kubelet's atomic writer updates a
// mounted ConfigMap: each version in a new timestamped folder, a ..data_tmp
// symlink to it renamed over ..data, and routing.json linking through ..data.
type kubeletDir struct {
	dir string
	n   atomic.Int64
}

func (k *kubeletDir) write(t *testing.T, data []byte) {
	t.Helper()
	n := k.n.Add(1)
	ts := fmt.Sprintf("..2026_11_30_10_00_%02d.%09d", n, n)
	if err := os.Mkdir(filepath.Join(k.dir, ts), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(k.dir, ts, table.DataKey), data, 0o644); err != nil {
		t.Fatal(err)
	}
	old, _ := os.Readlink(filepath.Join(k.dir, "..data"))
	tmp := filepath.Join(k.dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(k.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(k.dir, table.DataKey)
	if _, err := os.Lstat(link); os.IsNotExist(err) {
		if err := os.Symlink(filepath.Join("..data", table.DataKey), link); err != nil {
			t.Fatal(err)
		}
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(k.dir, old)); err != nil {
			t.Fatal(err)
		}
	}
}

// run starts a source and stops it when the test ends.
func run(t *testing.T, r interface{ Run(context.Context) error }) {
	t.Helper()
	testenv.Go(t, "run", r.Run)
}

// poolModels lists the models a table serves, in order.
func poolModels(tb *table.Table) []string {
	if tb == nil {
		return nil
	}
	var out []string
	for _, p := range tb.Pools {
		out = append(out, p.Project+"/"+p.Model)
	}
	return out
}
