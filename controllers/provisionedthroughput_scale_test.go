package controllers

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capacityv1alpha1 "github.com/regionwarden/regionwarden/api/v1alpha1"
	"github.com/regionwarden/regionwarden/internal/gcp/gcpfake"
)

// callsPerProject is one batch: one ListTimeSeries per PT metric.
const callsPerProject = 3

var scaleLocations = []string{"europe-west1", "europe-west3", "europe-west4", "us-central1", "us-east5", "asia-northeast1", "global", "eu", "us"}

// TestPTCallsGrowWithProjects declares PT objects over three projects and
// counts the Monitoring calls of each verification round: one batch per
// project, whatever the number of objects.
func TestPTCallsGrowWithProjects(t *testing.T) {
	const interval = time.Minute
	projects := []string{"acme-prod", "acme-staging", "acme-research"}
	for _, objects := range []int{6, 200} {
		t.Run(fmt.Sprintf("%d objects", objects), func(t *testing.T) {
			e := newPTEnv(t, ptEnvOptions{})
			// GCP shows every PT before the first object is declared.
			decl := func(i int) (project, loc, model string) {
				return projects[i%len(projects)], scaleLocations[(i/len(projects))%len(scaleLocations)],
					fmt.Sprintf("gemini-model-%d", i/(len(projects)*len(scaleLocations)))
			}
			for i := range objects {
				project, loc, model := decl(i)
				e.fake.SetPT(gcpfake.PT{Project: project, Location: loc, Publisher: "google", Model: model, GSUs: int64(1 + i%5), TokensPerSecond: 3000})
			}
			names := make([]string, objects)
			for i := range objects {
				project, loc, model := decl(i)
				names[i] = fmt.Sprintf("pt-%03d", i)
				e.create(names[i], int64(1+i%5), withProject(project), withLocation(loc), withModel(model), withInterval(interval))
			}

			// Round 1: the manager reconciles every new object.
			for _, name := range names {
				e.waitFor(name, "Verified True", func(pt *capacityv1alpha1.ProvisionedThroughput) bool {
					return meta.IsStatusConditionTrue(pt.Status.Conditions, capacityv1alpha1.ConditionVerified)
				})
			}
			round1 := e.fake.TotalCalls()

			// Round 2: one interval later, every object is verified again, by
			// four workers as a manager with MaxConcurrentReconciles=4 would.
			e.clk.Step(interval)
			work := make(chan string)
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() {
					for name := range work {
						e.reconcile(name)
					}
				})
			}
			for _, name := range names {
				work <- name
			}
			close(work)
			wg.Wait()
			round2 := e.fake.TotalCalls() - round1
			for _, name := range names {
				pt := e.get(name)
				expectCond(t, pt, capacityv1alpha1.ConditionVerified, metav1.ConditionTrue, capacityv1alpha1.ReasonObserved)
				if !pt.Status.LastVerifiedTime.Time.Equal(ptT0.Add(interval)) {
					t.Fatalf("%s: lastVerifiedTime = %v after round 2, want %v", name, pt.Status.LastVerifiedTime, ptT0.Add(interval))
				}
			}

			t.Logf("%d objects in %d projects: %d ListTimeSeries calls in round 1, %d in round 2", objects, len(projects), round1, round2)
			want := callsPerProject * len(projects)
			if round1 != want || round2 != want {
				t.Errorf("calls per round = %d, %d; want %d (one batch per project)", round1, round2, want)
			}
			for _, p := range projects {
				if n := e.fake.Calls(p); n != 2*callsPerProject {
					t.Errorf("project %s: %d calls in two rounds, want %d", p, n, 2*callsPerProject)
				}
			}
		})
	}
}
