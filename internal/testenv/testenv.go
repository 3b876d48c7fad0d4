// Package testenv runs a package's tests against the real kube-apiserver and
// etcd that hack/setup-envtest.sh builds, so that every suite starts, checks
// and stops the control plane the same way, and fails loudly, never skips,
// when it is not built.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// errNoAssets says how to get the control plane when it is not built.
var errNoAssets = errors.New("KUBEBUILDER_ASSETS is not set: run the tests with `make test`, which builds the test control plane (hack/setup-envtest.sh)")

// assets reports errNoAssets when the control plane's binaries are not known.
func assets() error {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return errNoAssets
	}
	return nil
}

// Run starts env, hands its config to setup, runs the tests and stops env. It
// returns the exit code for os.Exit: 1 when KUBEBUILDER_ASSETS is unset (the
// control plane is not built), when env fails to start, or when setup fails.
// A control plane that failed to start fully (a CRD the API server refuses) is
// stopped too, so that etcd and the API server never outlive the test binary.
func Run(m *testing.M, env *envtest.Environment, setup func(*rest.Config) error) int {
	if err := assets(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the test control plane:", err)
		_ = env.Stop()
		return 1
	}
	code := 1
	if err := setup(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "setting up the tests:", err)
	} else {
		code = m.Run()
	}
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the test control plane:", err)
	}
	return code
}

// Start starts env for one test and stops it when the test ends. The test
// fails when the control plane is not built or does not start.
func Start(t testing.TB, env *envtest.Environment) *rest.Config {
	t.Helper()
	if err := assets(); err != nil {
		t.Fatal(err)
	}
	cfg, err := env.Start()
	t.Cleanup(func() { _ = env.Stop() })
	if err != nil {
		t.Fatalf("starting the test control plane: %v", err)
	}
	return cfg
}

// Shared is a control plane that the first test asking for it starts, for a
// package whose other tests need none: those run without it, and a test that
// needs it fails when it is not built. TestMain stops it with Stop. The zero
// value is ready to use.
type Shared struct {
	once sync.Once
	env  envtest.Environment
	cfg  *rest.Config
	err  error
}

// Config starts the control plane on first use and returns its config; the
// test fails when it is not built or does not start.
func (s *Shared) Config(t testing.TB) *rest.Config {
	t.Helper()
	s.once.Do(func() {
		if s.err = assets(); s.err != nil {
			return
		}
		if s.cfg, s.err = s.env.Start(); s.err != nil {
			s.err = fmt.Errorf("starting the test control plane: %w", s.err)
		}
	})
	if s.err != nil {
		t.Fatal(s.err)
	}
	return s.cfg
}

// Stop stops the control plane if a test started it.
func (s *Shared) Stop() {
	if s.cfg == nil {
		return
	}
	if err := s.env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the test control plane:", err)
	}
}

// Namespace creates a namespace for one test through c and returns its name.
func Namespace(t testing.TB, c client.Client) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "test-"}}
	if err := c.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating a namespace: %v", err)
	}
	return ns.Name
}

// RoleUser creates namespace ns through admin, a Role there with rules,
// bound to a new user called name, and returns that user: a test acts as a
// component with exactly the RBAC its manifests grant.
func RoleUser(t testing.TB, env *envtest.Environment, admin kubernetes.Interface, ns, name string, rules []rbacv1.PolicyRule) *envtest.AuthenticatedUser {
	t.Helper()
	ctx := context.Background()
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s: %v", ns, err)
	}
	if _, err := admin.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Role %s: %v", name, err)
	}
	if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating RoleBinding %s: %v", name, err)
	}
	user, err := env.AddUser(envtest.User{Name: name}, nil)
	if err != nil {
		t.Fatalf("adding user %s: %v", name, err)
	}
	return user
}

// ClusterRole creates, through admin, a ClusterRole called name with rules,
// bound to subject: a test acts as a component with exactly the cluster-wide
// RBAC its manifests grant.
func ClusterRole(t testing.TB, admin kubernetes.Interface, name string, rules []rbacv1.PolicyRule, subject rbacv1.Subject) {
	t.Helper()
	ctx := context.Background()
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating ClusterRole %s: %v", name, err)
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{subject},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating ClusterRoleBinding %s: %v", name, err)
	}
}

// User is the RBAC subject of the user called name.
func User(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}
}

// ServiceAccount creates, through admin, ServiceAccount ns/name, and
// namespace ns first unless it exists.
func ServiceAccount(t testing.TB, admin kubernetes.Interface, ns, name string) {
	t.Helper()
	ctx := context.Background()
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating namespace %s: %v", ns, err)
	}
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating ServiceAccount %s/%s: %v", ns, name, err)
	}
}

// Token asks the API server, through admin, for a token of ServiceAccount
// ns/name for audiences (none: the API server's own) that lives lifetime
// (zero: the API server's default), and returns it with its expiry.
func Token(t testing.TB, admin kubernetes.Interface, ns, name string, lifetime time.Duration, audiences ...string) (string, time.Time) {
	t.Helper()
	req := &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{Audiences: audiences}}
	if lifetime > 0 {
		secs := int64(lifetime / time.Second)
		req.Spec.ExpirationSeconds = &secs
	}
	tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), name, req, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a token of %s/%s: %v", ns, name, err)
	}
	return tr.Status.Token, tr.Status.ExpirationTimestamp.Time
}

// Go runs run in a goroutine until the test ends: then it cancels run's
// context and waits for it to return, and fails the test, naming what ran,
// if it returned an error. A manager, a source or a server started by a test
// stops with it this way.
func Go(t testing.TB, what string, run func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%s: %v", what, err)
		}
	})
}

// NoLeaks is a TestMain's exit code: code, or 1 when the tests passed but
// goroutines other than those opts ignore outlive them (goleak), said on
// stderr. A TestMain that stops a control plane calls it after the stop,
// whose goroutines are gone by then.
func NoLeaks(code int, opts ...goleak.Option) int {
	if code != 0 {
		return code
	}
	if err := goleak.Find(opts...); err != nil {
		fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
		return 1
	}
	return 0
}
