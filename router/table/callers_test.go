package table

import "testing"

// TestCallersDefaults checks that a table without callers admits no
// ServiceAccount and lets other callers claim at most "default".
func TestCallersDefaults(t *testing.T) {
	tb, err := Parse([]byte(doc(
		pool(`{"name": "us-east5"}`, `"callers": {"serviceAccounts": [{"namespace": "team-a", "name": "*"}]}`),
		`{"project": "acme-prod", "model": "other", "regions": [{"name": "us-east5"}]}`)))
	if err != nil {
		t.Fatal(err)
	}
	set, unset := tb.Pools[0].Callers, tb.Pools[1].Callers
	if set.MaxPriority != PriorityDefault || set.ServiceAccounts[0].MaxPriority != PriorityDefault {
		t.Errorf("priorities not defaulted: %+v", set)
	}
	if unset.MaxPriority != PriorityDefault || len(unset.ServiceAccounts) != 0 {
		t.Errorf("a pool without callers = %+v, want maxPriority default and no ServiceAccounts", unset)
	}
	if _, ok := unset.MaxPriorityFor("team-a", "chat"); ok {
		t.Error("a pool that lists no ServiceAccount admitted one")
	}
}

// TestMaxPriorityFor checks who a pool admits and at what ceiling: a named
// account's own entry wins over its namespace's "*", and other namespaces
// are not admitted.
func TestMaxPriorityFor(t *testing.T) {
	c := Callers{ServiceAccounts: []ServiceAccount{
		{Namespace: "team-a", Name: AnyServiceAccount, MaxPriority: PrioritySheddable},
		{Namespace: "team-a", Name: "chat", MaxPriority: PriorityCritical},
		{Namespace: "team-b", Name: "batch", MaxPriority: PriorityDefault},
	}}
	for _, tc := range []struct {
		ns, name string
		want     Priority
		ok       bool
	}{
		{"team-a", "chat", PriorityCritical, true},
		{"team-a", "anyone", PrioritySheddable, true},
		{"team-b", "batch", PriorityDefault, true},
		{"team-b", "chat", "", false},
		{"team-c", "chat", "", false},
		{"team", "a", "", false},
	} {
		got, ok := c.MaxPriorityFor(tc.ns, tc.name)
		if got != tc.want || ok != tc.ok {
			t.Errorf("MaxPriorityFor(%s, %s) = %q, %v; want %q, %v", tc.ns, tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestPriorityCap(t *testing.T) {
	for _, tc := range []struct{ asked, ceiling, want Priority }{
		{PriorityCritical, PriorityDefault, PriorityDefault},
		{PriorityCritical, PrioritySheddable, PrioritySheddable},
		{PriorityDefault, PrioritySheddable, PrioritySheddable},
		{PrioritySheddable, PriorityCritical, PrioritySheddable},
		{PriorityDefault, PriorityCritical, PriorityDefault},
		{PriorityCritical, PriorityCritical, PriorityCritical},
	} {
		if got := tc.asked.Cap(tc.ceiling); got != tc.want {
			t.Errorf("%s capped at %s = %s, want %s", tc.asked, tc.ceiling, got, tc.want)
		}
	}
}
