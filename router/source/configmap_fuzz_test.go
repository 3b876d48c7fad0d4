package source

import (
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/regionwarden/regionwarden/router/table"
)

// FuzzConfigMapMerge drives a ConfigMapSource with random adds, updates and
// deletes of a few routing ConfigMaps, with good tables, bad ones, arbitrary
// bytes and ConfigMaps without a RegionPool controller, and checks after
// every step that the source serves what its contract says: each owned
// ConfigMap's last good pools, merged in namespace/name order with the first
// ConfigMap of a pool winning. So a refused table never replaces a good one,
// a deleted or disowned ConfigMap takes its pools with it, and the served
// table always validates. Run longer with
//
//	go test ./router/source/ -run '^$' -fuzz FuzzConfigMapMerge -fuzztime 60s
func FuzzConfigMapMerge(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 1, 1, 1, 0, 0, 2, 0, 0}, []byte(`{"version": 1}`))
	f.Add([]byte{0, 0, 1, 0, 1, 1, 0, 2, 1, 3, 1, 0, 2, 0, 0, 0, 1, 1}, []byte{})
	f.Add([]byte{0, 3, 9, 4, 3, 0, 1, 3, 9, 3, 3, 9, 0, 2, 7}, renderPoolBytes("p", "model-1", "us-east5"))
	f.Add([]byte{4, 0, 0, 4, 1, 0, 0, 2, 3}, []byte(`{"version": 1, "pools": [{"project": "p", "model": "model-1", "regions": [{"name": "eu"}]}]}`))
	f.Fuzz(func(t *testing.T, ops []byte, raw []byte) {
		if len(ops) > 300 {
			ops = ops[:300]
		}
		s := newSyncedConfigMapSource()
		m := mergeModel{}
		rv := 0
		for i := 0; i+2 < len(ops); i += 3 {
			name := fmt.Sprintf("cm-%d", ops[i+1]%4)
			variant := ops[i+2]
			before := s.Hash()
			rv++
			var data string
			owned := true
			switch ops[i] % 5 {
			case 0, 1: // a good table: one of a few pools, so ConfigMaps collide
				data = string(renderPoolBytes("p", fmt.Sprintf("model-%d", variant%3), []string{"us-east5", "europe-west1", "global"}[variant/3%3]))
			case 2: // a table that is refused
				data = badTables[int(variant)%len(badTables)].data
			case 3:
				if variant%2 == 0 {
					s.delete(configMap(name, rv, "", true))
					delete(m, name)
					m.check(t, s, "delete "+name)
					continue
				}
				data, owned = string(renderPoolBytes("p", "model-0", "us-east5")), false
			case 4: // whatever the fuzzer wrote
				data = string(raw)
			}
			s.update(configMap(name, rv, data, owned))
			refused := m.update(name, data, owned)
			m.check(t, s, fmt.Sprintf("update %s (owned %v) with %q", name, owned, data))
			if refused && s.Hash() != before {
				t.Fatalf("a refused update of %s changed the table served", name)
			}
		}
	})
}

// mergeModel is what each owned ConfigMap contributes: the pools of its last
// good table, nil if it never had one.
type mergeModel map[string][]table.Pool

// update records an update and reports whether the source must refuse it
// without changing the table it serves.
func (m mergeModel) update(name, data string, owned bool) (refused bool) {
	if !owned {
		delete(m, name)
		return false
	}
	t, err := table.Parse([]byte(data))
	if err != nil {
		if _, ok := m[name]; !ok {
			m[name] = nil
		}
		return true
	}
	m[name] = t.Pools
	return false
}

// check compares what s serves with the model's merge.
func (m mergeModel) check(t *testing.T, s *ConfigMapSource, step string) {
	t.Helper()
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	want := &table.Table{Version: table.Version, Pools: []table.Pool{}}
	taken := map[table.Key]bool{}
	for _, n := range names {
		for _, p := range m[n] {
			if !taken[p.Key()] {
				taken[p.Key()] = true
				want.Pools = append(want.Pools, p)
			}
		}
	}
	cur := s.Current()
	if cur == nil {
		t.Fatalf("after %s: the source serves nothing", step)
	}
	if len(cur.Pools) > 0 {
		if err := cur.Validate(); err != nil {
			t.Fatalf("after %s: the served table is invalid: %v", step, err)
		}
	}
	if got, exp := s.Hash(), want.Hash(); got != exp {
		t.Fatalf("after %s: serving %v, want %v", step, poolModels(cur), poolModels(want))
	}
}

// newSyncedConfigMapSource is a source whose first list is in, fed by hand.
func newSyncedConfigMapSource() *ConfigMapSource {
	s := NewConfigMapSource(nil, "ns", ConfigMapOptions{Logger: slog.New(slog.DiscardHandler)})
	s.mu.Lock()
	s.synced = true
	s.publishLocked()
	s.mu.Unlock()
	return s
}

// configMap is routing ConfigMap name at resource version rv, controlled by
// a RegionPool when owned.
func configMap(name string, rv int, data string, owned bool) *corev1.ConfigMap {
	cm := routingConfigMap("ns", name, []byte(data))
	cm.ResourceVersion = strconv.Itoa(rv)
	if !owned {
		cm.OwnerReferences = nil
	}
	return cm
}

// renderPoolBytes renders a one-pool table of model in project with one region.
func renderPoolBytes(project, model, region string) []byte {
	b, err := table.Render(&table.Table{Version: table.Version, Pools: []table.Pool{{
		Project: project, Model: model, Regions: []table.Region{{Name: region}},
	}}})
	if err != nil {
		panic(err)
	}
	return b
}
