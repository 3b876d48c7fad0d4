package controllers

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	capacityv1alpha1 "github.com/regionwarden/regionwarden/api/v1alpha1"
	"github.com/regionwarden/regionwarden/internal/gcp"
	"github.com/regionwarden/regionwarden/internal/waittest"
)

// TestPTRBAC runs the PT controller as a user bound to nothing but the
// ClusterRole that controller-gen writes (config/rbac/role.yaml): it verifies
// and records events, and it cannot touch a spec, delete anything or read
// secrets.
func TestPTRBAC(t *testing.T) {
	var user string
	as := func(ns string) *rest.Config {
		user = "regionwarden-manager-" + ns
		return asManager(t, user, ns)
	}
	e := newPTEnv(t, ptEnvOptions{restConfig: as})

	e.gcpShows(2, 3000, map[string]float64{gcp.RequestTypeDedicated: 300})
	e.create("pt", 4)
	pt := e.waitReconciled("pt")
	expectCond(t, pt, capacityv1alpha1.ConditionVerified, metav1.ConditionFalse, capacityv1alpha1.ReasonMismatch)
	e.waitForEvent("pt", capacityv1alpha1.ReasonMismatch)

	// A repeated event is a patch of the first (its series): the same report
	// about the same object version, recorded twice, must be accepted too.
	for range 2 {
		recordEvent(e.rec, pt, eventWarning, capacityv1alpha1.ReasonMismatch, ActionVerify, cond(t, pt, capacityv1alpha1.ConditionVerified).Message)
	}
	e.waitForEventSeries("pt", capacityv1alpha1.ReasonMismatch)

	pts := capacityv1alpha1.GroupVersion.Group
	for _, tc := range []struct {
		group, resource, subresource string
		allowed, denied              []string // verbs
	}{
		{pts, "provisionedthroughputs", "", []string{"get", "list", "watch"}, []string{"create", "update", "patch", "delete", "deletecollection"}},
		{pts, "provisionedthroughputs", "status", []string{"patch", "update"}, nil},
		{"events.k8s.io", "events", "", []string{"create", "patch"}, []string{"delete"}},
		{"", "secrets", "", nil, []string{"get", "list"}},
	} {
		for _, verb := range slices.Concat(tc.allowed, tc.denied) {
			want := slices.Contains(tc.allowed, verb)
			attrs := authorizationv1.ResourceAttributes{Namespace: e.ns, Verb: verb, Group: tc.group, Resource: tc.resource, Subresource: tc.subresource}
			if got := allowed(t, user, attrs); got != want {
				t.Errorf("%s %s/%s %s: allowed = %v, want %v", verb, tc.group, tc.resource, tc.subresource, got, want)
			}
		}
	}

	// ConfigMaps and events are granted in the operator's own namespace
	// only: nothing cluster-wide beyond its own kinds.
	for _, res := range []struct{ group, resource string }{{"events.k8s.io", "events"}, {"", "configmaps"}} {
		attrs := authorizationv1.ResourceAttributes{Namespace: "default", Verb: "create", Group: res.group, Resource: res.resource}
		if allowed(t, user, attrs) {
			t.Errorf("create %s in another namespace is allowed; want it granted in the operator's namespace only", res.resource)
		}
	}
}

// allowed asks the API server whether user may do what attrs say.
func allowed(t *testing.T, user string, attrs authorizationv1.ResourceAttributes) bool {
	t.Helper()
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &attrs}}
	if err := testClient.Create(context.Background(), review); err != nil {
		t.Fatal(err)
	}
	return review.Status.Allowed
}

// waitForEvent waits until the API server holds an Event about the PT with
// the reason.
func (e *ptEnv) waitForEvent(name, reason string) eventsv1.Event {
	e.t.Helper()
	return e.waitForEventWhere(name, reason, "an Event", func(eventsv1.Event) bool { return true })
}

// waitForEventSeries waits until the PT's Event with the reason counts
// repeats.
func (e *ptEnv) waitForEventSeries(name, reason string) eventsv1.Event {
	e.t.Helper()
	return e.waitForEventWhere(name, reason, "a repeated Event", func(ev eventsv1.Event) bool { return ev.Series != nil })
}

func (e *ptEnv) waitForEventWhere(name, reason, what string, ok func(eventsv1.Event) bool) eventsv1.Event {
	e.t.Helper()
	var found eventsv1.Event
	waittest.Until(e.t, time.Minute, name+" to get "+what+" with reason "+reason, func() []eventsv1.Event {
		var list eventsv1.EventList
		if err := e.cl.List(context.Background(), &list, client.InNamespace(e.ns)); err != nil {
			e.t.Fatal(err)
		}
		return list.Items
	}, func(events []eventsv1.Event) bool {
		for _, ev := range events {
			if ev.Regarding.Name == name && ev.Reason == reason && ok(ev) {
				found = ev
				return true
			}
		}
		return false
	})
	return found
}

// managerRoles reads the ClusterRole (the operator's kinds, cluster-wide) and
// the Role (ConfigMaps and events in a namespace) that controller-gen writes
// to config/rbac/role.yaml.
func managerRoles(t testing.TB) (rbacv1.ClusterRole, rbacv1.Role) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	var nsRole rbacv1.Role
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatal(err)
		}
		switch meta.Kind {
		case "ClusterRole":
			err = yaml.Unmarshal([]byte(doc), &role)
		case "Role":
			err = yaml.Unmarshal([]byte(doc), &nsRole)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if role.Name == "" || nsRole.Name == "" {
		t.Fatalf("role.yaml holds no ClusterRole or no Role: %s", raw)
	}
	return role, nsRole
}

// asManager binds user to the manager's ClusterRole and to its Role in each
// of namespaces, and returns a config that impersonates user: the operator
// as config/rbac grants it, watching those namespaces.
func asManager(t testing.TB, user string, namespaces ...string) *rest.Config {
	t.Helper()
	role, nsRole := managerRoles(t)
	subjects := []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}
	role.ObjectMeta = metav1.ObjectMeta{Name: user}
	objs := []client.Object{
		&role,
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: user},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
			Subjects:   subjects,
		},
	}
	for _, ns := range namespaces {
		r := nsRole.DeepCopy()
		r.ObjectMeta = metav1.ObjectMeta{Name: user, Namespace: ns}
		objs = append(objs, r, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
			Subjects:   subjects,
		})
	}
	for _, o := range objs {
		if err := testClient.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = testClient.Delete(context.Background(), o) })
	}
	cfg := rest.CopyConfig(testConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	return cfg
}
