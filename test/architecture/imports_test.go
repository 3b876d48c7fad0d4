// Package architecture checks the map of packages in docs/architecture.md
// against the imports of the code, so that the map cannot drift.
package architecture

import (
	"bufio"
	"errors"
	"go/build"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const (
	module  = "github.com/regionwarden/regionwarden"
	root    = "../.."
	mapFile = "docs/architecture.md"
	// marker precedes the table of allowed imports in mapFile.
	marker = "<!-- imports:"
)

// rule is one row of the map: packages matching from may import, of this
// module, only packages matching one of allow.
type rule struct {
	from  string
	allow []string
	line  int
}

// pkg is one package of the module, its path relative to the module.
type pkg struct {
	path string
	// imports are the module's packages its non-test files import.
	imports []string
	// prod says it has non-test files.
	prod bool
}

// matches reports whether p is matched by pattern: "x" is x alone, "x/..." is
// x and every package below it.
func matches(pattern, p string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return p == base || strings.HasPrefix(p, base+"/")
	}
	return p == pattern
}

// testHelper reports whether p is a package only tests may import.
func testHelper(p string) bool {
	return p == "internal/testenv" || strings.HasSuffix(path.Base(p), "test")
}

var codeSpan = regexp.MustCompile("`([^`]+)`")

// readMap parses the table that follows the marker in the map file.
func readMap(t *testing.T) []rule {
	t.Helper()
	f, err := os.Open(filepath.Join(root, mapFile))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var rules []rule
	inMap := false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, marker):
			inMap = true
		case !inMap, strings.HasPrefix(line, "| package"), strings.HasPrefix(line, "| ---"):
		case !strings.HasPrefix(line, "|"):
			if len(rules) > 0 {
				return rules
			}
		default:
			cells := strings.Split(strings.Trim(line, "|"), "|")
			if len(cells) < 2 {
				t.Fatalf("%s:%d: a row needs a package and what it may import: %s", mapFile, n, line)
			}
			from := codeSpan.FindStringSubmatch(cells[0])
			if from == nil {
				t.Fatalf("%s:%d: the package column holds no `package`: %s", mapFile, n, line)
			}
			r := rule{from: from[1], line: n}
			for _, m := range codeSpan.FindAllStringSubmatch(cells[1], -1) {
				r.allow = append(r.allow, m[1])
			}
			if strings.TrimSpace(cells[1]) == "anything" {
				r.allow = []string{"..."}
			}
			rules = append(rules, r)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rules) == 0 {
		t.Fatalf("%s has no table after %q", mapFile, marker)
	}
	return rules
}

// readPackages lists the module's packages and what their non-test files
// import of the module, as go/build sees them for this platform.
func readPackages(t *testing.T) []pkg {
	t.Helper()
	var out []pkg
	err := filepath.WalkDir(root, func(dir string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if dir != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor" || name == "bin") {
			return filepath.SkipDir
		}
		bp, err := build.ImportDir(dir, 0)
		var noGo *build.NoGoError
		if errors.As(err, &noGo) {
			return nil
		}
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			return err
		}
		p := pkg{path: filepath.ToSlash(rel), prod: len(bp.GoFiles)+len(bp.CgoFiles) > 0}
		for _, imp := range bp.Imports {
			if local, ok := strings.CutPrefix(imp, module+"/"); ok {
				p.imports = append(p.imports, local)
			}
		}
		out = append(out, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 10 {
		t.Fatalf("found %d packages under %s: the walk is broken", len(out), root)
	}
	return out
}

// TestImportsFollowTheMap: every import of production code is one its row of
// the map allows, no production package imports a test helper, every package
// has a row, and every row matches a package.
func TestImportsFollowTheMap(t *testing.T) {
	rules := readMap(t)
	pkgs := readPackages(t)
	used := map[int]bool{}
	for _, p := range pkgs {
		i := slices.IndexFunc(rules, func(r rule) bool { return matches(r.from, p.path) })
		if i < 0 {
			t.Errorf("%s has no row in the map of %s: add one (see \"To add a package\")", p.path, mapFile)
			continue
		}
		used[i] = true
		r := rules[i]
		for _, imp := range p.imports {
			if !slices.ContainsFunc(r.allow, func(a string) bool { return a == "..." || matches(a, imp) }) {
				t.Errorf("%s imports %s, which the map (%s:%d, row `%s`) does not allow: it allows %v",
					p.path, imp, mapFile, r.line, r.from, r.allow)
			}
			if testHelper(imp) && !testHelper(p.path) && p.prod {
				t.Errorf("%s imports the test helper %s in non-test code", p.path, imp)
			}
		}
	}
	for i, r := range rules {
		if !used[i] {
			t.Errorf("%s:%d: row `%s` matches no package (or an earlier row takes them all)", mapFile, r.line, r.from)
		}
	}
}

// TestMapCatchesForbiddenEdges: the rules the issue names are in the map, so
// that a change to the table cannot drop them unnoticed.
func TestMapCatchesForbiddenEdges(t *testing.T) {
	rules := readMap(t)
	allowed := func(from, to string) bool {
		i := slices.IndexFunc(rules, func(r rule) bool { return matches(r.from, from) })
		return i >= 0 && slices.ContainsFunc(rules[i].allow, func(a string) bool { return a == "..." || matches(a, to) })
	}
	for _, e := range []struct{ from, to string }{
		{"router/server", "api/v1alpha1"},
		{"router/policy", "controllers"},
		{"router/table", "router/policy"},
		{"internal/emulator", "router/upstream"},
		{"internal/emulator", "router/policy"},
		{"cmd/replay", "test/scenarios"},
		{"internal/replay", "test/manifests"},
		{"controllers", "router/policy"},
		{"api/v1alpha1", "router/table"},
	} {
		if allowed(e.from, e.to) {
			t.Errorf("the map lets %s import %s", e.from, e.to)
		}
	}
	for _, e := range []struct{ from, to string }{
		{"router/server", "router/policy"},
		{"router/auth", "router/table"},
		{"internal/emulator", "router/table"},
		{"controllers", "router/table"},
		{"cmd/router", "router/server"},
	} {
		if !allowed(e.from, e.to) {
			t.Errorf("the map forbids %s importing %s", e.from, e.to)
		}
	}
}
