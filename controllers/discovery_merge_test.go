package controllers

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	capacityv1alpha1 "github.com/regionwarden/regionwarden/api/v1alpha1"
	"github.com/regionwarden/regionwarden/internal/gcp"
	"github.com/regionwarden/regionwarden/router/table"
)

// mergeDiscovered, renderPool and ptManifest are pure; these tests need no
// API server.

func TestMergeDiscovered(t *testing.T) {
	t0 := ptT0
	grace := time.Hour
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(t0.Add(d)) }
	atp := func(d time.Duration) *metav1.Time { m := at(d); return &m }
	facts := func(now time.Duration, entries ...gcp.Facts) *gcp.ProjectFacts {
		for i := range entries {
			entries[i].Publisher = "google"
			if entries[i].Model == "" {
				entries[i].Model = gcpModel
			}
		}
		return &gcp.ProjectFacts{Project: testProject, FetchedAt: t0.Add(now), Entries: entries}
	}
	interval := 5 * time.Minute
	for _, tc := range []struct {
		name  string
		prev  []capacityv1alpha1.DiscoveredRegion
		last  *metav1.Time // the answer before facts; nil: one interval before
		facts *gcp.ProjectFacts
		want  []capacityv1alpha1.DiscoveredRegion
	}{
		{
			name:  "reported regions enter, sorted, unlisted ones never",
			facts: facts(0, gcp.Facts{Location: "us-east5", GSUs: 2}, gcp.Facts{Location: "europe-west4", GSUs: 4, TokensPerSecond: 7000}, gcp.Facts{Location: "asia-east1", GSUs: 9}),
			want: []capacityv1alpha1.DiscoveredRegion{
				{Name: "europe-west4", GSUs: 4, TokensPerSecond: 7000, LastSeenTime: at(0)},
				{Name: "us-east5", GSUs: 2, LastSeenTime: at(0)},
			},
		},
		{
			name:  "another model is not this pool's capacity",
			facts: facts(0, gcp.Facts{Location: "europe-west4", Model: "gemini-2.5-pro", GSUs: 4}, gcp.Facts{Location: "us-east5", Model: testModel + "-lite", GSUs: 4}),
		},
		{
			name:  "a version suffix names the same model, as verification reads it",
			facts: facts(0, gcp.Facts{Location: "us-east5", Model: testModel + "-002", GSUs: 4}),
			want:  []capacityv1alpha1.DiscoveredRegion{{Name: "us-east5", GSUs: 4, LastSeenTime: at(0)}},
		},
		{
			name:  "zero GSUs is no capacity",
			facts: facts(0, gcp.Facts{Location: "europe-west4", GSUs: 0}),
		},
		{
			name:  "a new answer updates, clears missingSince and keeps the declarers",
			prev:  []capacityv1alpha1.DiscoveredRegion{{Name: "europe-west4", GSUs: 4, LastSeenTime: at(0), MissingSince: atp(5 * time.Minute), ProvisionedThroughput: "a"}},
			facts: facts(10*time.Minute, gcp.Facts{Location: "europe-west4", GSUs: 6}),
			want:  []capacityv1alpha1.DiscoveredRegion{{Name: "europe-west4", GSUs: 6, LastSeenTime: at(10 * time.Minute), ProvisionedThroughput: "a"}},
		},
		{
			name:  "the first answer without it starts missingSince",
			prev:  []capacityv1alpha1.DiscoveredRegion{{Name: "europe-west4", GSUs: 4, LastSeenTime: at(0)}},
			facts: facts(5 * time.Minute),
			want:  []capacityv1alpha1.DiscoveredRegion{{Name: "europe-west4", GSUs: 4, LastSeenTime: at(0), MissingSince: atp(5 * time.Minute)}},
		},
		{
			name:  "missing for the grace period is kept",
			prev:  []capacityv1alpha1.DiscoveredRegion{{Name: "europe-west4", GSUs: 4, LastSeenTime: at(0), MissingSince: atp(5 * time.Minute)}},
			facts: facts(5*time.Minute + grace),
			want:  []capacityv1alpha1.DiscoveredRegion{{Name: "europe-west4", GSUs: 4, LastSeenTime: at(0), MissingSince: atp(5 * time.Minute)}},
		},
		{
			name:  "missing for longer than the grace period goes",
			prev:  []capacityv1alpha1.DiscoveredRegion{{Name: "europe-west4", GSUs: 4, LastSeenTime: at(0), MissingSince: atp(5 * time.Minute)}},
			facts: facts(5*time.Minute + grace + time.Second),
		},
		{
			name:  "last seen long ago but missing only now is kept: time without answers never counts",
			prev:  []capacityv1alpha1.DiscoveredRegion{{Name: "europe-west4", GSUs: 4, LastSeenTime: at(0)}},
			facts: facts(3 * grace),
			want:  []capacityv1alpha1.DiscoveredRegion{{Name: "europe-west4", GSUs: 4, LastSeenTime: at(0), MissingSince: atp(3 * grace)}},
		},
		{
			name:  "an outage before the answer does not count toward the grace period",
			prev:  []capacityv1alpha1.DiscoveredRegion{{Name: "europe-west4", GSUs: 4, LastSeenTime: at(0), MissingSince: atp(5 * time.Minute)}},
			last:  atp(5 * time.Minute),
			facts: facts(5*time.Minute + 2*grace),
			want:  []capacityv1alpha1.DiscoveredRegion{{Name: "europe-west4", GSUs: 4, LastSeenTime: at(0), MissingSince: atp(5*time.Minute + 2*grace - answerGap(interval))}},
		},
		{
			name:  "answers a jittered interval apart are answers in a row",
			prev:  []capacityv1alpha1.DiscoveredRegion{{Name: "europe-west4", GSUs: 4, LastSeenTime: at(0), MissingSince: atp(5 * time.Minute)}},
			last:  atp(5*time.Minute + grace + time.Second - answerGap(interval)),
			facts: facts(5*time.Minute + grace + time.Second),
		},
		{
			name:  "a region the spec no longer lists goes",
			prev:  []capacityv1alpha1.DiscoveredRegion{{Name: "asia-east1", GSUs: 4, LastSeenTime: at(0)}},
			facts: facts(time.Minute, gcp.Facts{Location: "asia-east1", GSUs: 4}),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := testPool(discoveryRegions...)
			pool.Spec.Discovery.GracePeriod = &metav1.Duration{Duration: grace}
			last := tc.last
			if last == nil {
				last = &metav1.Time{Time: tc.facts.FetchedAt.Add(-interval)}
			}
			got := mergeDiscovered(pool, tc.prev, tc.facts, last, interval)
			if len(got) != len(tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			for i := range got {
				g, w := got[i], tc.want[i]
				if g.Name != w.Name || g.GSUs != w.GSUs || g.TokensPerSecond != w.TokensPerSecond || !g.LastSeenTime.Equal(&w.LastSeenTime) ||
					!g.MissingSince.Equal(w.MissingSince) || g.ProvisionedThroughput != w.ProvisionedThroughput {
					t.Errorf("entry %d = %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

func TestRenderPoolWithDiscovered(t *testing.T) {
	seen := metav1.NewTime(ptT0)
	found := func(name string, gsus int64) capacityv1alpha1.DiscoveredRegion {
		return capacityv1alpha1.DiscoveredRegion{Name: name, GSUs: gsus, TokensPerSecond: float64(gsus) * 1000, LastSeenTime: seen}
	}
	for _, tc := range []struct {
		name       string
		pts        []capacityv1alpha1.ProvisionedThroughput
		discovered []capacityv1alpha1.DiscoveredRegion
		// want is "name=tier/source/gsus" in table order.
		want []string
	}{
		{
			name:       "a discovered region is provisioned with GCP's capacity",
			discovered: []capacityv1alpha1.DiscoveredRegion{found("europe-west4", 4)},
			want:       []string{"europe-west4=provisioned/discovered/4", "europe-west1=shared/spec/0", "us-central1=shared/spec/0", "us-east5=shared/spec/0"},
		},
		{
			name:       "a ready PT wins over discovery",
			pts:        []capacityv1alpha1.ProvisionedThroughput{testPT("a", "europe-west4", 3, true, 0)},
			discovered: []capacityv1alpha1.DiscoveredRegion{found("europe-west4", 4)},
			want:       []string{"europe-west4=provisioned/declared/3", "europe-west1=shared/spec/0", "us-central1=shared/spec/0", "us-east5=shared/spec/0"},
		},
		{
			name:       "a PT not yet ready leaves the region discovered",
			pts:        []capacityv1alpha1.ProvisionedThroughput{testPT("a", "europe-west4", 4, false, 0)},
			discovered: []capacityv1alpha1.DiscoveredRegion{found("europe-west4", 4)},
			want:       []string{"europe-west4=provisioned/discovered/4", "europe-west1=shared/spec/0", "us-central1=shared/spec/0", "us-east5=shared/spec/0"},
		},
		{
			name:       "a region the spec does not list is never added by discovery",
			discovered: []capacityv1alpha1.DiscoveredRegion{found("asia-east1", 4)},
			want:       []string{"europe-west1=shared/spec/0", "europe-west4=shared/spec/0", "us-central1=shared/spec/0", "us-east5=shared/spec/0"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := renderPool(testPool(discoveryRegions...), tc.pts, tc.discovered)
			var got []string
			for _, r := range out.pool.Regions {
				got = append(got, r.Name+"="+string(r.Tier)+"/"+string(r.Source)+"/"+strconv.FormatInt(r.Capacity.GSUs, 10))
				if r.Tier == table.TierProvisioned == r.Ejectable {
					t.Errorf("%s: tier %s, ejectable %v", r.Name, r.Tier, r.Ejectable)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("regions = %v, want %v", got, tc.want)
			}
			for i, r := range out.pool.Regions {
				if out.regions[i].Source != string(r.Source) {
					t.Errorf("status region %+v disagrees with the table's %+v", out.regions[i], r)
				}
			}
			if _, err := table.Render(&table.Table{Version: table.Version, Pools: []table.Pool{out.pool}}); err != nil {
				t.Errorf("the table does not render: %v", err)
			}
		})
	}
}

// TestUndeclaredMessageShowsApplicableObjects parses the YAML that
// CapacityDeclared shows: each document is a ProvisionedThroughput that
// declares the region and that the pool's selector selects.
func TestUndeclaredMessageShowsApplicableObjects(t *testing.T) {
	pool := testPool(discoveryRegions...)
	pool.Spec.ProvisionedThroughputSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "search", "enabled": "true"}}
	undeclared := []capacityv1alpha1.DiscoveredRegion{{Name: "europe-west4", GSUs: 4}, {Name: "us-east5", GSUs: 12}}
	msg := undeclaredMessage(pool, undeclared)
	if !strings.Contains(msg, "europe-west4 (4 GSUs), us-east5 (12 GSUs)") {
		t.Errorf("the message does not list the regions and GSUs:\n%s", msg)
	}
	docs := strings.Split(msg, "---\n")[1:]
	if len(docs) != len(undeclared) {
		t.Fatalf("%d documents, want %d:\n%s", len(docs), len(undeclared), msg)
	}
	sel, err := poolSelector(pool)
	if err != nil {
		t.Fatal(err)
	}
	for i, doc := range docs {
		var pt capacityv1alpha1.ProvisionedThroughput
		if err := yaml.UnmarshalStrict([]byte(doc), &pt); err != nil {
			t.Fatalf("document %d does not parse: %v\n%s", i, err, doc)
		}
		d := undeclared[i]
		if pt.Kind != "ProvisionedThroughput" || pt.APIVersion != capacityv1alpha1.GroupVersion.String() || pt.Namespace != pool.Namespace ||
			pt.Spec.Location != d.Name || pt.Spec.GSUs != d.GSUs {
			t.Errorf("document %d = %+v", i, pt)
		}
		if !ptMatchesPool(pool, &pt) || !sel.Matches(labels.Set(pt.Labels)) {
			t.Errorf("document %d would not select the pool: %+v", i, pt.ObjectMeta)
		}
	}
}
