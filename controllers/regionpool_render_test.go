package controllers

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capacityv1alpha1 "github.com/regionwarden/regionwarden/api/v1alpha1"
	"github.com/regionwarden/regionwarden/router/table"
)

// renderPool is a pure function; these tests need no API server.

func testPool(regions ...string) *capacityv1alpha1.RegionPool {
	p := &capacityv1alpha1.RegionPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: "llm", Name: "flash"},
		Spec:       capacityv1alpha1.RegionPoolSpec{Project: testProject, Model: testModel},
	}
	for _, r := range regions {
		p.Spec.Regions = append(p.Spec.Regions, capacityv1alpha1.PoolRegion{Name: r})
	}
	return p
}

func testPT(name, location string, gsus int64, ready bool, tokens float64) capacityv1alpha1.ProvisionedThroughput {
	status := metav1.ConditionFalse
	if ready {
		status = metav1.ConditionTrue
	}
	pt := capacityv1alpha1.ProvisionedThroughput{
		ObjectMeta: metav1.ObjectMeta{Namespace: "llm", Name: name},
		Spec:       capacityv1alpha1.ProvisionedThroughputSpec{Project: testProject, Location: location, Model: testModel, GSUs: gsus},
		Status: capacityv1alpha1.ProvisionedThroughputStatus{
			Conditions: []metav1.Condition{{Type: capacityv1alpha1.ConditionReady, Status: status, Reason: "Test"}},
		},
	}
	if tokens > 0 {
		pt.Status.Observed = &capacityv1alpha1.ObservedCapacity{GSUs: gsus, TokensPerSecond: tokens}
	}
	return pt
}

func renderBytes(t *testing.T, out rendered) []byte {
	t.Helper()
	b, err := table.Render(&table.Table{Pools: []table.Pool{out.pool}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRenderPoolIgnoresOrder(t *testing.T) {
	pool := testPool("us-east5", "europe-west1", "europe-west4", "asia-northeast1")
	pts := []capacityv1alpha1.ProvisionedThroughput{
		testPT("a", "europe-west1", 2, true, 5000),
		testPT("b", "europe-west1", 3, true, 9000),
		testPT("c", "global", 1, true, 0),
		testPT("d", "us-east5", 8, false, 0),
	}
	want := renderBytes(t, renderPool(pool, pts, nil))
	rnd := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		shuffled := slices.Clone(pts)
		rnd.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		regions := slices.Clone(pool.Spec.Regions)
		rnd.Shuffle(len(regions), func(i, j int) { regions[i], regions[j] = regions[j], regions[i] })
		p := pool.DeepCopy()
		p.Spec.Regions = regions
		out := renderPool(p, shuffled, nil)
		if got := renderBytes(t, out); !bytes.Equal(got, want) {
			t.Fatalf("another input order renders differently:\n%s\nwant:\n%s", got, want)
		}
		if out.regions[0].ProvisionedThroughput != "a,b" {
			t.Errorf("europe-west1's PTs = %q, want a,b", out.regions[0].ProvisionedThroughput)
		}
	}
}

func TestRenderPool(t *testing.T) {
	deleting := testPT("deleting", "europe-west4", 2, true, 0)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	otherModel := testPT("pro", "europe-west4", 2, true, 0)
	otherModel.Spec.Model = "gemini-2.5-pro"
	otherPublisher := testPT("claude", "europe-west4", 2, true, 0)
	otherPublisher.Spec.Publisher = "anthropic"
	unverified := testPT("new", "europe-west4", 2, true, 0)
	unverified.Status.Conditions = nil
	explicitGoogle := testPT("explicit", "us-east5", 1, true, 0)
	explicitGoogle.Spec.Publisher = "google"

	for _, tc := range []struct {
		name       string
		pts        []capacityv1alpha1.ProvisionedThroughput
		want       []string // name=tier/gsus/tokens
		protected  []string
		undeclared []string
	}{
		{"no PTs", nil, []string{"europe-west1=shared/0/0", "europe-west4=shared/0/0", "us-east5=shared/0/0"}, nil, nil},
		{"two orders add up, tokens are the location's", []capacityv1alpha1.ProvisionedThroughput{testPT("a", "europe-west1", 2, true, 5000), testPT("b", "europe-west1", 3, true, 7000)},
			[]string{"europe-west1=provisioned/5/7000", "europe-west4=shared/0/0", "us-east5=shared/0/0"}, []string{"europe-west1"}, nil},
		{"a not-ready order adds nothing", []capacityv1alpha1.ProvisionedThroughput{testPT("a", "europe-west1", 2, true, 0), testPT("b", "europe-west1", 3, false, 9000)},
			[]string{"europe-west1=provisioned/2/0", "europe-west4=shared/0/0", "us-east5=shared/0/0"}, []string{"europe-west1"}, nil},
		{"ignored: deleting, other model, other publisher, unverified", []capacityv1alpha1.ProvisionedThroughput{deleting, otherModel, otherPublisher, unverified},
			[]string{"europe-west1=shared/0/0", "europe-west4=shared/0/0", "us-east5=shared/0/0"}, nil, nil},
		{"publisher google written out matches the default", []capacityv1alpha1.ProvisionedThroughput{explicitGoogle},
			[]string{"us-east5=provisioned/1/0", "europe-west1=shared/0/0", "europe-west4=shared/0/0"}, []string{"us-east5"}, nil},
		{"undeclared locations are added, provisioned first", []capacityv1alpha1.ProvisionedThroughput{testPT("g", "global", 1, true, 0), testPT("w2", "europe-west2", 1, true, 0)},
			[]string{"europe-west2=provisioned/1/0", "global=provisioned/1/0", "europe-west1=shared/0/0", "europe-west4=shared/0/0", "us-east5=shared/0/0"},
			[]string{"europe-west2", "global"}, []string{"europe-west2", "global"}},
		{"an undeclared location leaves with its PT", []capacityv1alpha1.ProvisionedThroughput{testPT("g", "global", 1, false, 0)},
			[]string{"europe-west1=shared/0/0", "europe-west4=shared/0/0", "us-east5=shared/0/0"}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := renderPool(testPool("europe-west1", "europe-west4", "us-east5"), tc.pts, nil)
			var got []string
			for _, r := range out.pool.Regions {
				got = append(got, r.Name+"="+string(r.Tier)+"/"+strconv.FormatInt(r.Capacity.GSUs, 10)+"/"+strconv.FormatFloat(r.Capacity.TokensPerSecond, 'f', -1, 64))
				if r.Tier == table.TierProvisioned && (r.Ejectable || r.Source != table.SourceDeclared) {
					t.Errorf("provisioned %s is ejectable or not declared: %+v", r.Name, r)
				}
				if r.Tier == table.TierShared && (!r.Ejectable || r.Source != table.SourceSpec) {
					t.Errorf("shared %s is not ejectable or not from the spec: %+v", r.Name, r)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("regions = %v, want %v", got, tc.want)
			}
			if !slices.Equal(out.protected, tc.protected) {
				t.Errorf("protected = %v, want %v", out.protected, tc.protected)
			}
			var undeclared []string
			for _, u := range out.undeclared {
				undeclared = append(undeclared, u.name)
			}
			if !slices.Equal(undeclared, tc.undeclared) {
				t.Errorf("undeclared = %v, want %v", undeclared, tc.undeclared)
			}
			if len(out.regions) != len(out.pool.Regions) {
				t.Fatalf("status regions %d, table regions %d", len(out.regions), len(out.pool.Regions))
			}
			for i, st := range out.regions {
				r := out.pool.Regions[i]
				if st.Name != r.Name || st.Tier != string(r.Tier) || st.Ejectable != r.Ejectable || st.Source != string(r.Source) {
					t.Errorf("status region %d = %+v, table says %+v", i, st, r)
				}
			}
		})
	}
}

func TestRenderPoolEndpointsAndHints(t *testing.T) {
	pool := testPool("europe-west1", "us")
	rps := int32(30)
	pool.Spec.Regions[0].Endpoint = "aiplatform-vialink1.p.googleapis.com:443"
	pool.Spec.Regions[0].RequestsPerSecond = &rps
	out := renderPool(pool, []capacityv1alpha1.ProvisionedThroughput{testPT("a", "europe-west1", 2, true, 0)}, nil)
	ew1 := out.pool.Regions[0]
	if ew1.Endpoint != "aiplatform-vialink1.p.googleapis.com:443" || ew1.Capacity.RequestsPerSecond != 30 || ew1.Tier != table.TierProvisioned {
		t.Errorf("europe-west1 = %+v, want the endpoint override and the hint kept when provisioned", ew1)
	}
	if us := out.pool.Regions[1]; us.Endpoint != "aiplatform.us.rep.googleapis.com:443" {
		t.Errorf("us endpoint = %q", us.Endpoint)
	}
}

func TestRenderPolicy(t *testing.T) {
	if got := renderPolicy(capacityv1alpha1.RoutingPolicy{}, nil); !got.Equal(table.DefaultPolicy()) {
		t.Errorf("an empty policy renders %+v, want table.DefaultPolicy %+v", got, table.DefaultPolicy())
	}
	zero, three, forty := int32(0), int32(3), int32(40)
	got := renderPolicy(capacityv1alpha1.RoutingPolicy{
		Ejection: capacityv1alpha1.EjectionPolicy{
			FailureRateThreshold: 0.8, MinRequests: 5,
			Interval:          &metav1.Duration{Duration: 3 * time.Second},
			BaseEjectionTime:  &metav1.Duration{Duration: time.Minute},
			MaxEjectionTime:   &metav1.Duration{Duration: time.Hour},
			MaxEjectedPercent: &zero,
		},
		Retry:       capacityv1alpha1.RetryPolicy{MaxAttempts: 4, BudgetPercent: &forty, MinRetriesPerSecond: &three},
		Provisioned: capacityv1alpha1.ProvisionedPolicy{RequestType: capacityv1alpha1.RequestTypeDedicated, Window: &metav1.Duration{Duration: 90 * time.Second}},
	}, &forty)
	want := table.DefaultPolicy()
	want.CapacityShare = 40
	want.Ejection = table.Ejection{
		FailureRateThreshold: 0.8, MinRequests: 5,
		Interval:          table.Duration{Duration: 3 * time.Second},
		BaseEjectionTime:  table.Duration{Duration: time.Minute},
		MaxEjectionTime:   table.Duration{Duration: time.Hour},
		MaxEjectedPercent: new(0),
	}
	want.Retry = table.Retry{MaxAttempts: 4, BudgetPercent: new(40), MinRetriesPerSecond: new(3)}
	want.Provisioned.RequestType = table.RequestTypeDedicated
	want.Provisioned.Window = table.Duration{Duration: 90 * time.Second}
	if !got.Equal(want) {
		t.Errorf("policy = %v, want %v", got, want)
	}
	if got := renderPolicy(capacityv1alpha1.RoutingPolicy{Provisioned: capacityv1alpha1.ProvisionedPolicy{RequestType: capacityv1alpha1.RequestTypeSpillover}}, nil); got.Provisioned.RequestType != table.RequestTypeSpillover {
		t.Errorf("Spillover renders %q", got.Provisioned.RequestType)
	}
}

// TestRenderCallers checks that a pool's callers reach the table in the
// router's spelling, with the table's defaults where the pool sets none.
func TestRenderCallers(t *testing.T) {
	// The table fills in what the pool leaves unset.
	render := func(c capacityv1alpha1.Callers) table.Callers {
		p := table.Pool{Callers: renderCallers(c)}
		p.Default()
		return p.Callers
	}
	got := render(capacityv1alpha1.Callers{})
	if got.MaxPriority != table.DefaultMaxPriority || len(got.ServiceAccounts) != 0 {
		t.Errorf("no callers render %+v, want the default ceiling and no ServiceAccount", got)
	}
	got = render(capacityv1alpha1.Callers{
		MaxPriority: capacityv1alpha1.PrioritySheddable,
		ServiceAccounts: []capacityv1alpha1.CallerServiceAccount{
			{Name: "chat/frontend", MaxPriority: capacityv1alpha1.PriorityCritical},
			{Name: "batch/*"},
		},
	})
	want := table.Callers{MaxPriority: table.PrioritySheddable, ServiceAccounts: []table.ServiceAccount{
		{Namespace: "chat", Name: "frontend", MaxPriority: table.PriorityCritical},
		{Namespace: "batch", Name: table.AnyServiceAccount, MaxPriority: table.PriorityDefault},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("callers = %+v, want %+v", got, want)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("rendered callers do not validate: %v", err)
	}
}
