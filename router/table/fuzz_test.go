package table

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse feeds Parse arbitrary bytes. Parse must never panic, and what it
// accepts must reach a fixed point after one render: Render(Parse(x)) parses
// again, and renders to the same bytes.
//
// The seed corpus is every golden file in testdata, the documents of the Parse
// error tests, and testdata/fuzz/FuzzParse. Run longer with
//
//	go test ./router/table/ -run '^$' -fuzz FuzzParse -fuzztime 60s
func FuzzParse(f *testing.F) {
	goldens, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		f.Fatal(err)
	}
	for _, path := range goldens {
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		doc(pool(`{"name": "us-east5"}`)),
		doc(pool(`{"name": "us-east5", "capacity": {"requestsPerSecond": -0}}, {"name": "eu", "tier": "provisioned", "ejectable": true}`)),
		doc(pool(`{"name": "global", "endpoint": "127.0.0.1:1"}`, `"policy": {"ejection": {"interval": "1.5s", "baseEjectionTime": "1h", "maxEjectionTime": "24h"}}`)),
		doc(pool(`{"name": "us-east5"}`), pool(`{"name": "us-east5"}`)),
		`{"version": 1, "pools": []}`,
		`{"version": 1, "pools": [{}]}`,
		`null`,
		``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		first, err := Parse(data)
		if err != nil {
			if err.Error() == "" {
				t.Error("Parse failed with an empty message")
			}
			return
		}
		once, err := Render(first)
		if err != nil {
			t.Fatalf("Render refused what Parse accepted: %v\ninput: %q", err, data)
		}
		second, err := Parse(once)
		if err != nil {
			t.Fatalf("Parse refused what Render wrote: %v\nrendered:\n%s", err, once)
		}
		twice, err := Render(second)
		if err != nil {
			t.Fatalf("Render refused its own output, parsed: %v", err)
		}
		if !bytes.Equal(once, twice) {
			t.Fatalf("rendering is not stable:\nfirst:\n%s\nsecond:\n%s", once, twice)
		}
		if Hash(once) != Hash(twice) {
			t.Fatal("equal renderings hash differently")
		}
	})
}
