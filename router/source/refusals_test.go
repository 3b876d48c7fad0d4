package source

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/regionwarden/regionwarden/router/table"
)

// TestRefusalsStandUntilAGoodTable: a refused table is listed among the
// standing refusals, with its reason, while the last good table serves; the
// next good table from the same origin ends it.
func TestRefusalsStandUntilAGoodTable(t *testing.T) {
	good, err := os.ReadFile(filepath.Join("..", "table", "testdata", "minimal.json"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), table.DataKey)
	write := func(data string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(string(good))
	s := NewFileSource(path, FileOptions{Endpoints: table.AllowHosts()})
	s.Reload()
	hash := s.Hash()
	if hash == "" || len(s.Refusals()) != 0 {
		t.Fatalf("a good table: hash %q, refusals %+v", hash, s.Refusals())
	}

	write(strings.Replace(string(good), `"version": 1`, `"version": 2`, 1))
	s.Reload()
	r := s.Refusals()
	if len(r) != 1 || r[0].Origin != "file:"+path || r[0].Reason != ReasonVersion || !strings.Contains(r[0].Error, "unsupported version 2") {
		t.Fatalf("refusals = %+v, want the file refused for its version", r)
	}
	if s.Hash() != hash {
		t.Errorf("the refused table replaced the good one")
	}

	write(string(good) + "\n")
	s.Reload()
	if r := s.Refusals(); len(r) != 0 {
		t.Errorf("refusals after a good table = %+v, want none", r)
	}
}
