package source

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

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

// Counters is an Observer that counts. Its zero value is ready to use and it is
// safe for concurrent use.
type Counters struct {
	loads      atomic.Uint64
	rejections atomic.Uint64
	mu         sync.Mutex
	byReason   map[string]uint64
	lastErr    error
}

// Loaded counts one table load.
func (c *Counters) Loaded(string, string) { c.loads.Add(1) }

// Rejected counts one refusal under its reason.
func (c *Counters) Rejected(_, reason string, err error) {
	c.rejections.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byReason == nil {
		c.byReason = map[string]uint64{}
	}
	c.byReason[reason]++
	c.lastErr = err
}

// Loads is how many tables started serving.
func (c *Counters) Loads() uint64 { return c.loads.Load() }

// Rejections is how many tables were refused, all reasons together.
func (c *Counters) Rejections() uint64 { return c.rejections.Load() }

// RejectionsFor is how many tables were refused for reason.
func (c *Counters) RejectionsFor(reason string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byReason[reason]
}

// LastError is the error of the latest refusal, or nil.
func (c *Counters) LastError() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastErr
}

// recorder is an Observer that remembers every call in order.
type recorder struct {
	Counters
	mu       sync.Mutex
	rejected []string // origin + " " + reason
}

func (r *recorder) Rejected(origin, reason string, err error) {
	r.Counters.Rejected(origin, reason, err)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rejected = append(r.rejected, origin+" "+reason)
}

func (r *recorder) rejections() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.rejected...)
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
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
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
