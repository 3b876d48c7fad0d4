package controllers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	testingclock "k8s.io/utils/clock/testing"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/yaml"

	capacityv1alpha1 "github.com/regionwarden/regionwarden/api/v1alpha1"
	"github.com/regionwarden/regionwarden/internal/gcp/gcpfake"
	"github.com/regionwarden/regionwarden/internal/testenv"
	"github.com/regionwarden/regionwarden/internal/waittest"
	"github.com/regionwarden/regionwarden/router/table"
)

// The GitOps health tests produce every state the controllers write with the
// real controllers against the real API server, read each object back as
// Flux and Argo CD do, and check what docs/gitops.md says of it: the
// conditions it lists, kstatus.Compute's status (Flux), and the status that
// the page's own Argo CD health script returns when gopher-lua runs it as
// Argo CD does. The page is the one text of both the expectations and the
// script, so a change of what a condition means, of the script, or of the
// page fails here.

const gitopsDoc = "../docs/gitops.md"

// healthRow is one row of the doc's state table.
type healthRow struct {
	kind, state string
	// conds are the conditions the row lists, by type.
	conds map[string]docCondition
	// kstatus and argo are the two tools' verdicts.
	kstatus, argo string
}

// docCondition is a condition as the doc writes it: `Type=Status/Reason`.
type docCondition struct {
	status metav1.ConditionStatus
	reason string
}

var docConditionPattern = regexp.MustCompile("`([A-Za-z]+)=(True|False|Unknown)(?:/([A-Za-z]+))?`")

// readHealthDoc returns the state table's rows and the Argo CD health
// scripts of docs/gitops.md, by kind.
func readHealthDoc(t *testing.T) ([]healthRow, map[string]string) {
	t.Helper()
	raw, err := os.ReadFile(gitopsDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	var rows []healthRow
	for line := range strings.SplitSeq(doc, "\n") {
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if len(cells) != 5 || (cells[0] != "ProvisionedThroughput" && cells[0] != "RegionPool") {
			continue
		}
		r := healthRow{kind: cells[0], state: cells[1], conds: map[string]docCondition{}, kstatus: cells[3], argo: cells[4]}
		for _, m := range docConditionPattern.FindAllStringSubmatch(cells[2], -1) {
			r.conds[m[1]] = docCondition{status: metav1.ConditionStatus(m[2]), reason: m[3]}
		}
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		t.Fatalf("%s has no state table", gitopsDoc)
	}

	const prefix = "resource.customizations.health." + "capacity.regionwarden.io_"
	scripts := map[string]string{}
	for block := range strings.SplitSeq(doc, "```yaml\n") {
		body, _, closed := strings.Cut(block, "```")
		if !closed || !strings.Contains(body, prefix) {
			continue
		}
		var cm struct {
			Data map[string]string `json:"data"`
		}
		if err := yaml.Unmarshal([]byte(body), &cm); err != nil {
			t.Fatalf("the argocd-cm block of %s does not parse: %v", gitopsDoc, err)
		}
		for k, v := range cm.Data {
			if kind, ok := strings.CutPrefix(k, prefix); ok {
				scripts[kind] = v
			}
		}
	}
	for _, kind := range []string{"ProvisionedThroughput", "RegionPool"} {
		if scripts[kind] == "" {
			t.Fatalf("%s has no Argo CD health script for %s", gitopsDoc, kind)
		}
	}
	return rows, scripts
}

// argoHealth runs an Argo CD health script on obj as Argo CD's controller
// does: a Lua state with only the base, table and package libraries, obj as
// the global `obj`, converted value by value from the unstructured object,
// and the table the script returns read as {status, message}. A status Argo
// CD does not know is Unknown, as there.
func argoHealth(script string, obj *unstructured.Unstructured) (healthStatus, message string, err error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{{lua.LoadLibName, lua.OpenPackage}, {lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(lib.open), Protect: true}, lua.LString(lib.name)); err != nil {
			return "", "", err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("obj", toLua(l, obj.Object))
	if err := l.DoString(script); err != nil {
		return "", "", err
	}
	ret, ok := l.Get(-1).(*lua.LTable)
	if !ok {
		return "", "", fmt.Errorf("the script returned a %s, not a table", l.Get(-1).Type())
	}
	healthStatus = lua.LVAsString(ret.RawGetString("status"))
	message = lua.LVAsString(ret.RawGetString("message"))
	switch healthStatus {
	case "Healthy", "Progressing", "Degraded", "Suspended", "Missing", "Unknown":
	default:
		healthStatus = "Unknown"
	}
	return healthStatus, message, nil
}

// toLua converts a value of an unstructured object to Lua, as Argo CD does:
// numbers (integers too) to numbers, lists to array tables, maps to tables.
func toLua(l *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case bool:
		return lua.LBool(v)
	case string:
		return lua.LString(v)
	case int64:
		return lua.LNumber(v)
	case int:
		return lua.LNumber(v)
	case float64:
		return lua.LNumber(v)
	case []any:
		t := l.CreateTable(len(v), 0)
		for _, item := range v {
			t.Append(toLua(l, item))
		}
		return t
	case map[string]any:
		t := l.CreateTable(0, len(v))
		for k, item := range v {
			t.RawSetString(k, toLua(l, item))
		}
		return t
	}
	return lua.LNil
}

// healthEnv produces the states: a namespace, a fake Cloud Monitoring read by
// the real client, both reconcilers on one fake clock, and a manager that
// serves the pool reconciler's cache and indexes. The test runs every
// reconcile itself, so each state is exactly the one named.
type healthEnv struct {
	t    *testing.T
	ns   string
	clk  *testingclock.FakeClock
	fake *gcpfake.MetricServer
	mgr  ctrl.Manager
	pt   *ProvisionedThroughputReconciler
	pool *RegionPoolReconciler
}

func newHealthEnv(t *testing.T) *healthEnv {
	e := &healthEnv{t: t, ns: testenv.Namespace(t, testClient), clk: testingclock.NewFakeClock(ptT0), fake: gcpfake.NewMetricServer()}
	e.fake.SetNow(e.clk.Now)
	facts := NewFacts(startMonitoring(t, e.fake, e.clk.Now), 0, e.clk.Now)
	e.mgr = newManager(t, testConfig, e.ns)
	if err := indexPoolFields(e.mgr.GetFieldIndexer()); err != nil {
		t.Fatal(err)
	}
	e.pt = &ProvisionedThroughputReconciler{Client: testClient, Facts: facts, Now: e.clk.Now}
	e.pool = &RegionPoolReconciler{Client: e.mgr.GetClient(), Reader: e.mgr.GetAPIReader(), Facts: facts}
	startManager(t, e.mgr)
	return e
}

// project is a GCP project of the state's own, so that what the fake GCP
// answers for one state never reaches another.
func (e *healthEnv) project(state string) string {
	p := "p-" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, strings.ToLower(state))
	return strings.TrimRight(p[:min(len(p), 29)], "-") + "x"
}

// createPT declares gsus in project's europe-west1 for the test model.
// gcpShows makes GCP report gsus in project's location for the test model.
func (e *healthEnv) gcpShows(project, location string, gsus int64) {
	e.fake.SetPT(gcpfake.PT{Project: project, Location: location, Publisher: "google", Model: testModel + "-001", GSUs: gsus, TokensPerSecond: 1000})
}

func (e *healthEnv) reconcilePT(name string) {
	e.t.Helper()
	reconcileOnce(e.t, e.pt, e.ns, name)
}

// reconcilePool reconciles the pool once, after the manager's cache holds
// every PT and pool of the namespace as the API server has them. A terminal error (a
// stalled pool) is the state under test, not a failure.
func (e *healthEnv) reconcilePool(name string) {
	e.t.Helper()
	e.waitCached()
	_, err := e.pool.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: e.ns, Name: name}})
	if err != nil && !errors.Is(err, reconcile.TerminalError(nil)) {
		e.t.Logf("reconciling pool %s: %v", name, err)
	}
}

// waitCached waits until the manager's cache holds every PT and pool of the
// namespace as the API server has them.
func (e *healthEnv) waitCached() {
	e.t.Helper()
	versions := func(c client.Reader) map[string]string {
		out := map[string]string{}
		var pts capacityv1alpha1.ProvisionedThroughputList
		var pools capacityv1alpha1.RegionPoolList
		if err := c.List(context.Background(), &pts, client.InNamespace(e.ns)); err != nil {
			e.t.Fatal(err)
		}
		if err := c.List(context.Background(), &pools, client.InNamespace(e.ns)); err != nil {
			e.t.Fatal(err)
		}
		for _, o := range pts.Items {
			out["pt/"+o.Name] = o.ResourceVersion
		}
		for _, o := range pools.Items {
			out["pool/"+o.Name] = o.ResourceVersion
		}
		return out
	}
	live := versions(testClient)
	waittest.Until(e.t, poolWait, "the manager's cache to catch up with the API server",
		func() map[string]string { return versions(e.mgr.GetClient()) },
		func(cached map[string]string) bool { return maps.Equal(cached, live) })
}

// read reads the object back as a GitOps tool does: unstructured, as the
// API server serves it.
func (e *healthEnv) read(kind, name string) *unstructured.Unstructured {
	e.t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(capacityv1alpha1.GroupVersion.WithKind(kind))
	return mustGet(e.t, testClient, e.ns, name, u)
}

// updateSpec changes the object's spec, as a new commit in Git would.
func (e *healthEnv) updateSpec(obj client.Object, change func()) {
	e.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := testClient.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		change()
		return testClient.Update(context.Background(), obj)
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

// forbidConfigMaps makes the namespace's ResourceQuota refuse every new
// ConfigMap, as a quota a platform team sets would.
func (e *healthEnv) forbidConfigMaps() {
	e.t.Helper()
	ctx := context.Background()
	zero := corev1.ResourceList{corev1.ResourceConfigMaps: resource.MustParse("0")}
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "no-configmaps"}, Spec: corev1.ResourceQuotaSpec{Hard: zero}}
	if err := testClient.Create(ctx, q); err != nil {
		e.t.Fatal(err)
	}
	// The quota controller is not part of the test control plane: the
	// status it would write is written here.
	q.Status = corev1.ResourceQuotaStatus{Hard: zero, Used: zero}
	if err := testClient.Status().Update(ctx, q); err != nil {
		e.t.Fatal(err)
	}
}

// healthState produces one state of the doc's table in e and returns the
// object read back.
type healthState func(e *healthEnv) *unstructured.Unstructured

// ptState is a PT of 4 GSUs, in a project of its own where GCP shows
// gsusShown (none when 0), reconciled once.
func ptState(state string, gsusShown int64, opts ...func(*healthEnv) ptOption) healthState {
	return func(e *healthEnv) *unstructured.Unstructured {
		p := e.project(state)
		if gsusShown > 0 {
			e.gcpShows(p, testLocation, gsusShown)
		}
		o := []ptOption{withProject(p)}
		for _, opt := range opts {
			o = append(o, opt(e))
		}
		createPT(e.t, e.ns, "pt", 4, o...)
		e.reconcilePT("pt")
		return e.read("ProvisionedThroughput", "pt")
	}
}

// now makes an option that does not depend on the clock fit ptState.
func now(o ptOption) func(*healthEnv) ptOption { return func(*healthEnv) ptOption { return o } }

// healthStates are the states of the doc's table by kind and state. Every
// state has a PT or pool of its own, in a project of its own.
func healthStates() map[string]healthState {
	const pt, pool = "ProvisionedThroughput", "RegionPool"
	key := func(kind, state string) string { return kind + "/" + state }
	return map[string]healthState{
		key(pt, "new"): func(e *healthEnv) *unstructured.Unstructured {
			createPT(e.t, e.ns, "pt", 4, withProject(e.project("new")))
			return e.read(pt, "pt")
		},
		key(pt, "verified"):  ptState("verified", 4),
		key(pt, "mismatch"):  ptState("mismatch", 2),
		key(pt, "not found"): ptState("not found", 0),
		key(pt, "not found past the grace period (Enforce)"): func(e *healthEnv) *unstructured.Unstructured {
			createPT(e.t, e.ns, "pt", 4, withProject(e.project("grace")), withPolicy(capacityv1alpha1.VerificationEnforce), withInterval(time.Minute), withGrace(2*time.Minute))
			// Each step is longer than the interval, so GCP is asked again.
			for range 4 {
				e.reconcilePT("pt")
				e.clk.Step(2 * time.Minute)
			}
			return e.read(pt, "pt")
		},
		key(pt, "source unavailable"): func(e *healthEnv) *unstructured.Unstructured {
			e.fake.SetError(e.project("unavailable"), status.Error(codes.Unavailable, "Monitoring is down"))
			return ptState("unavailable", 0)(e)
		},
		key(pt, "source refuses the operator"): func(e *healthEnv) *unstructured.Unstructured {
			e.fake.SetError(e.project("refused"), status.Error(codes.PermissionDenied, "monitoring.timeSeries.list denied"))
			return ptState("refused", 0)(e)
		},
		key(pt, "skipped"): ptState("skipped", 0, now(withPolicy(capacityv1alpha1.VerificationSkip))),
		key(pt, "expiring"): ptState("expiring", 4, func(e *healthEnv) ptOption {
			return withTermEnd(e.clk.Now().Add(7 * 24 * time.Hour))
		}),
		key(pt, "expired"): ptState("expired", 4, func(e *healthEnv) ptOption {
			return withTermEnd(e.clk.Now().Add(-time.Hour))
		}),
		key(pt, "spec changed, not reconciled yet"): func(e *healthEnv) *unstructured.Unstructured {
			ptState("changed", 4)(e)
			obj := &capacityv1alpha1.ProvisionedThroughput{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "pt"}}
			e.updateSpec(obj, func() { obj.Spec.GSUs = 6 })
			return e.read(pt, "pt")
		},

		key(pool, "new"): func(e *healthEnv) *unstructured.Unstructured {
			createPool(e.t, e.ns, "pool", []string{"europe-west1", "us-central1"}, poolWithProject(e.project("new")))
			return e.read(pool, "pool")
		},
		key(pool, "ready"): func(e *healthEnv) *unstructured.Unstructured {
			createPool(e.t, e.ns, "pool", []string{"europe-west1", "us-central1"}, poolWithProject(e.project("ready")))
			e.reconcilePool("pool")
			return e.read(pool, "pool")
		},
		key(pool, "ready, a PT adds a region the spec does not list"): func(e *healthEnv) *unstructured.Unstructured {
			p := e.project("adds")
			createPT(e.t, e.ns, "pt", 4, withProject(p), withPolicy(capacityv1alpha1.VerificationSkip))
			e.reconcilePT("pt")
			createPool(e.t, e.ns, "pool", []string{"us-central1"}, poolWithProject(p))
			e.reconcilePool("pool")
			return e.read(pool, "pool")
		},
		key(pool, "undeclared capacity discovered"): func(e *healthEnv) *unstructured.Unstructured {
			p := e.project("undeclared")
			e.gcpShows(p, "europe-west4", 3)
			createPool(e.t, e.ns, "pool", []string{"europe-west4", "us-central1"}, poolWithProject(p))
			e.reconcilePool("pool")
			return e.read(pool, "pool")
		},
		key(pool, "discovery source unavailable"): func(e *healthEnv) *unstructured.Unstructured {
			p := e.project("discovery down")
			e.fake.SetError(p, status.Error(codes.Unavailable, "Monitoring is down"))
			createPool(e.t, e.ns, "pool", []string{"europe-west4", "us-central1"}, poolWithProject(p))
			e.reconcilePool("pool")
			return e.read(pool, "pool")
		},
		key(pool, "table write refused"): func(e *healthEnv) *unstructured.Unstructured {
			e.forbidConfigMaps()
			createPool(e.t, e.ns, "pool", []string{"europe-west1"}, poolWithProject(e.project("write refused")))
			e.reconcilePool("pool")
			return e.read(pool, "pool")
		},
		key(pool, "ConfigMap owned by someone else"): func(e *healthEnv) *unstructured.Unstructured {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "pool-routing"}, Data: map[string]string{"app.conf": "theirs"}}
			if err := testClient.Create(context.Background(), cm); err != nil {
				e.t.Fatal(err)
			}
			createPool(e.t, e.ns, "pool", []string{"europe-west1"}, poolWithProject(e.project("conflict")))
			e.reconcilePool("pool")
			return e.read(pool, "pool")
		},
		key(pool, "table cannot be rendered"): func(e *healthEnv) *unstructured.Unstructured {
			// A ready PT's location on top of the most regions a pool may
			// list makes a table the router would refuse.
			p := e.project("render failed")
			createPT(e.t, e.ns, "pt", 4, withProject(p), withPolicy(capacityv1alpha1.VerificationSkip), withLocation("asia-east1"))
			e.reconcilePT("pt")
			var regions []string
			for i := range table.MaxRegions {
				regions = append(regions, fmt.Sprintf("europe-west%d", i+1))
			}
			createPool(e.t, e.ns, "pool", regions, poolWithProject(p))
			e.reconcilePool("pool")
			return e.read(pool, "pool")
		},
		key(pool, "an older pool routes the same model"): func(e *healthEnv) *unstructured.Unstructured {
			p := e.project("duplicate")
			createPool(e.t, e.ns, "older", []string{"europe-west1"}, poolWithProject(p))
			createPool(e.t, e.ns, "pool", []string{"europe-west1", "us-central1"}, poolWithProject(p))
			e.reconcilePool("pool")
			return e.read(pool, "pool")
		},
		key(pool, "spec changed, not reconciled yet"): func(e *healthEnv) *unstructured.Unstructured {
			createPool(e.t, e.ns, "pool", []string{"europe-west1"}, poolWithProject(e.project("pool changed")))
			e.reconcilePool("pool")
			obj := &capacityv1alpha1.RegionPool{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "pool"}}
			e.updateSpec(obj, func() { obj.Spec.Regions = append(obj.Spec.Regions, capacityv1alpha1.PoolRegion{Name: "us-east5"}) })
			return e.read(pool, "pool")
		},
	}
}

// TestGitOpsHealth checks every state of the doc's table: the conditions it
// lists, kstatus.Compute's status and the Argo CD script's health.
func TestGitOpsHealth(t *testing.T) {
	rows, scripts := readHealthDoc(t)
	var listed []string
	for _, r := range rows {
		listed = append(listed, r.kind+"/"+r.state)
	}
	produced := healthStates()
	var known []string
	for k := range produced {
		known = append(known, k)
	}
	slices.Sort(listed)
	slices.Sort(known)
	if !slices.Equal(listed, known) {
		t.Fatalf("the states of %s and of this test differ:\ndoc:  %q\ntest: %q", gitopsDoc, listed, known)
	}

	for _, r := range rows {
		t.Run(r.kind+"/"+r.state, func(t *testing.T) {
			e := newHealthEnv(t)
			obj := produced[r.kind+"/"+r.state](e)

			var conds []metav1.Condition
			raw, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
			for _, c := range raw {
				m := c.(map[string]any)
				conds = append(conds, metav1.Condition{Type: fmt.Sprint(m["type"]), Status: metav1.ConditionStatus(fmt.Sprint(m["status"])), Reason: fmt.Sprint(m["reason"])})
			}
			for typ, want := range r.conds {
				got := meta.FindStatusCondition(conds, typ)
				if got == nil || got.Status != want.status || (want.reason != "" && got.Reason != want.reason) {
					t.Errorf("condition %s = %+v, the doc says %s/%s", typ, got, want.status, want.reason)
				}
			}
			for _, typ := range []string{capacityv1alpha1.ConditionReconciling, capacityv1alpha1.ConditionStalled} {
				if _, listed := r.conds[typ]; !listed && meta.FindStatusCondition(conds, typ) != nil {
					t.Errorf("condition %s is present (%+v); the doc lists none", typ, meta.FindStatusCondition(conds, typ))
				}
			}

			res, err := kstatus.Compute(obj)
			if err != nil {
				t.Fatal(err)
			}
			if string(res.Status) != r.kstatus {
				t.Errorf("kstatus = %s (%s), the doc says %s", res.Status, res.Message, r.kstatus)
			}
			health, msg, err := argoHealth(scripts[r.kind], obj)
			if err != nil {
				t.Fatalf("the Argo CD health script fails: %v", err)
			}
			if health != r.argo {
				t.Errorf("Argo CD health = %s (%s), the doc says %s", health, msg, r.argo)
			}
			if health != "Healthy" && msg == "" {
				t.Errorf("Argo CD health %s comes with no message", health)
			}
		})
	}
}
