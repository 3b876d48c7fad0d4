package main

import (
	"maps"
	"slices"
	"strings"
	"testing"
)

// TestWatchedNamespaces: --watch-namespace is a comma-separated list of
// namespace names, empty for every namespace; a bad name is refused with the
// flag's name.
func TestWatchedNamespaces(t *testing.T) {
	if got, err := watchedNamespaces(" "); got != nil || err != nil {
		t.Errorf("an empty list gives %v, %v; want every namespace (nil)", got, err)
	}
	good := map[string][]string{"llm": {"llm"}, "team-a, team-b,team-a": {"team-a", "team-b"}}
	for list, want := range good {
		got, err := watchedNamespaces(list)
		if keys := slices.Sorted(maps.Keys(got)); err != nil || !slices.Equal(keys, want) {
			t.Errorf("%q gives %v, %v; want %v", list, keys, err, want)
		}
	}
	bad := map[string]string{"team-a,,team-b": `""`, "Team-A": `"Team-A"`}
	for list, name := range bad {
		_, err := watchedNamespaces(list)
		if err == nil || !strings.Contains(err.Error(), "--watch-namespace: "+name) {
			t.Errorf("%q gives error %v; want one that names --watch-namespace and %s", list, err, name)
		}
	}
}
