package source

import (
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/regionwarden/regionwarden/router/table"
)

const wait = 10 * time.Second

// newKubeletSource returns a folder written like a mounted ConfigMap holding
// first, and a FileSource on it that relies on events alone (no resync).
func newKubeletSource(t *testing.T, first []byte, obs Observer) (*kubeletDir, *FileSource) {
	t.Helper()
	k := &kubeletDir{dir: t.TempDir()}
	k.write(t, first)
	s := NewFileSource(k.dir, FileOptions{Logger: slog.New(slog.DiscardHandler), Observer: obs, Debounce: 20 * time.Millisecond, Resync: -1})
	return k, s
}

func TestFileSourceFollowsKubeletUpdates(t *testing.T) {
	g := NewWithT(t)
	a := renderPool(t, "p", "model-a")
	b := renderPool(t, "p", "model-b")
	var c recorder
	k, s := newKubeletSource(t, a, &c)
	g.Expect(s.Current()).To(BeNil(), "nothing serves before the first load")

	var mu sync.Mutex
	var seen []string
	s.Subscribe(func(tb *table.Table) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, poolModels(tb)...)
	})
	run(t, s)
	g.Eventually(s.Hash, wait).Should(Equal(hashOf(t, a)))
	g.Expect(poolModels(s.Current())).To(Equal([]string{"p/model-a"}))

	k.write(t, b)
	g.Eventually(s.Hash, wait).Should(Equal(hashOf(t, b)))
	g.Expect(poolModels(s.Current())).To(Equal([]string{"p/model-b"}))
	g.Eventually(func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}, wait).Should(Equal([]string{"p/model-a", "p/model-b"}))
	g.Eventually(c.Loads, wait).Should(BeEquivalentTo(2), "the hash is served before the observer hears of it")
	g.Expect(c.Rejections()).To(BeZero())
}

func TestFileSourceRefusesBadTables(t *testing.T) {
	for _, bad := range badTables {
		t.Run(bad.name, func(t *testing.T) {
			g := NewWithT(t)
			good := renderPool(t, "p", "model-a")
			var c recorder
			k, s := newKubeletSource(t, good, &c)
			run(t, s)
			g.Eventually(s.Hash, wait).Should(Equal(hashOf(t, good)))

			k.write(t, []byte(bad.data))
			g.Eventually(c.Rejections, wait).Should(BeEquivalentTo(1))
			g.Expect(c.RejectionsFor(bad.reason)).To(BeEquivalentTo(1), "refused as %s: %v", bad.reason, c.LastError())
			g.Expect(s.Hash()).To(Equal(hashOf(t, good)), "the last good table keeps serving")
			g.Expect(poolModels(s.Current())).To(Equal([]string{"p/model-a"}))

			// A good table after a bad one is taken.
			next := renderPool(t, "p", "model-c")
			k.write(t, next)
			g.Eventually(s.Hash, wait).Should(Equal(hashOf(t, next)))
			g.Expect(c.Rejections()).To(BeEquivalentTo(1))
		})
	}
}

func TestFileSourceBadFirstTableServesNothing(t *testing.T) {
	g := NewWithT(t)
	var c recorder
	k, s := newKubeletSource(t, []byte(badTables[1].data), &c)
	run(t, s)
	g.Eventually(c.Rejections, wait).Should(BeEquivalentTo(1))
	g.Expect(s.Current()).To(BeNil())

	good := renderPool(t, "p", "model-a")
	k.write(t, good)
	g.Eventually(s.Hash, wait).Should(Equal(hashOf(t, good)))
}

func TestFileSourcePlainFile(t *testing.T) {
	cases := []struct {
		name  string
		write func(t *testing.T, path string, data []byte)
	}{
		{"rewritten in place", func(t *testing.T, path string, data []byte) {
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"renamed over", func(t *testing.T, path string, data []byte) {
			tmp := path + ".tmp"
			if err := os.WriteFile(tmp, data, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, path); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			path := filepath.Join(t.TempDir(), "table.json")
			a := renderPool(t, "p", "model-a")
			tc.write(t, path, a)
			var c recorder
			s := NewFileSource(path, FileOptions{Logger: slog.New(slog.DiscardHandler), Observer: &c, Debounce: 20 * time.Millisecond, Resync: -1})
			run(t, s)
			g.Eventually(s.Hash, wait).Should(Equal(hashOf(t, a)))

			for _, model := range []string{"model-b", "model-c"} {
				next := renderPool(t, "p", model)
				tc.write(t, path, next)
				g.Eventually(s.Hash, wait).Should(Equal(hashOf(t, next)))
			}
			g.Eventually(c.Loads, wait).Should(BeEquivalentTo(3), "the hash is served before the observer hears of it")
		})
	}
}

func TestFileSourceMissingFileIsRefusedOnceThenRead(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "table.json")
	var c recorder
	s := NewFileSource(path, FileOptions{Logger: slog.New(slog.DiscardHandler), Observer: &c, Debounce: 20 * time.Millisecond, Resync: -1})
	s.Reload()
	s.Reload()
	g.Expect(c.RejectionsFor(ReasonRead)).To(BeEquivalentTo(1), "the same read error is reported once")
	g.Expect(s.Current()).To(BeNil())

	run(t, s)
	a := renderPool(t, "p", "model-a")
	g.Expect(os.WriteFile(path, a, 0o644)).To(Succeed())
	g.Eventually(s.Hash, wait).Should(Equal(hashOf(t, a)))
}

func TestFileSourceMissingFolderFailsRun(t *testing.T) {
	s := NewFileSource(filepath.Join(t.TempDir(), "absent", "table.json"), FileOptions{Logger: slog.New(slog.DiscardHandler)})
	if err := s.Run(t.Context()); err == nil {
		t.Fatal("Run on a path whose folder is missing must fail")
	}
}
