package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/regionwarden/regionwarden/internal/testenv"
)

// counting counts the TokenReviews it passes on to the API server.
type counting struct {
	next TokenReviews
	n    atomic.Int64
}

func (c *counting) Create(ctx context.Context, tr *authnv1.TokenReview, opts metav1.CreateOptions) (*authnv1.TokenReview, error) {
	c.n.Add(1)
	return c.next.Create(ctx, tr, opts)
}

var nsCounter atomic.Int64

// serviceAccount creates namespace ns (once) and ServiceAccount ns/name.
func serviceAccount(t *testing.T, ns, name string) { testenv.ServiceAccount(t, admin, ns, name) }

// token asks the API server for a token of ServiceAccount ns/name with the
// audiences (none: the API server's own) and a lifetime.
func token(t *testing.T, ns, name string, lifetime time.Duration, audiences ...string) (string, time.Time) {
	return testenv.Token(t, admin, ns, name, lifetime, audiences...)
}

// routerClient is a client with the rights the router's ClusterRole in
// config/router grants, and no more: create TokenReviews.
func routerClient(t *testing.T) kubernetes.Interface {
	t.Helper()
	user := fmt.Sprintf("router-%d", nsCounter.Add(1))
	testenv.ClusterRole(t, admin, user, []rbacv1.PolicyRule{{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}}}, testenv.User(user))
	u, err := testEnv.AddUser(envtest.User{Name: user}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kubernetes.NewForConfig(u.Config())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newNS() string { return fmt.Sprintf("callers-%d", nsCounter.Add(1)) }

func wantStatus(t *testing.T, err error, status int, what string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Status != status {
		t.Fatalf("%s: error %v, want a %d refusal", what, err, status)
	}
}

// TestReviewerTellsServiceAccounts checks the answers of a real API server,
// asked with the router's rights alone (create tokenreviews): a
// ServiceAccount token for the router's audience names the account; a token
// for the API server's own audience and a token that is not one are refused
// with 401.
func TestReviewerTellsServiceAccounts(t *testing.T) {
	ns := newNS()
	serviceAccount(t, ns, "frontend")
	r := NewReviewer(routerClient(t).AuthenticationV1().TokenReviews(), ReviewerOptions{RefusedTTL: time.Nanosecond, CacheTTL: time.Nanosecond})
	ctx := context.Background()

	good, _ := token(t, ns, "frontend", time.Hour, Audience)
	id, err := r.Review(ctx, good)
	if err != nil || id != (Identity{Namespace: ns, Name: "frontend"}) {
		t.Fatalf("Review = %+v, %v; want %s/frontend", id, err, ns)
	}

	apiServers, _ := token(t, ns, "frontend", time.Hour)
	_, err = r.Review(ctx, apiServers)
	wantStatus(t, err, http.StatusUnauthorized, "a token for the API server's audience")

	_, err = r.Review(ctx, "not-a-token")
	wantStatus(t, err, http.StatusUnauthorized, "a made-up token")

}

// TestReviewerCache checks that an answer is reused until the token
// expires or CacheTTL passes, whichever comes first, that concurrent calls
// with one token share one review, that refusals are reused for RefusedTTL,
// and that the cache never holds more than CacheSize tokens.
func TestReviewerCache(t *testing.T) {
	ns := newNS()
	serviceAccount(t, ns, "batch")
	api := &counting{next: routerClient(t).AuthenticationV1().TokenReviews()}
	clk := testingclock.NewFakeClock(time.Now())
	r := NewReviewer(api, ReviewerOptions{CacheTTL: time.Hour, RefusedTTL: time.Minute, CacheSize: 2, Now: clk.Now})
	ctx := context.Background()

	// The shortest lifetime TokenRequest grants is 10 minutes.
	tok, exp := token(t, ns, "batch", 10*time.Minute, Audience)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if _, err := r.Review(ctx, tok); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := api.n.Load(); n != 1 {
		t.Fatalf("%d TokenReviews for 20 concurrent calls with one token, want 1", n)
	}
	clk.SetTime(exp.Add(-time.Second))
	if _, err := r.Review(ctx, tok); err != nil || api.n.Load() != 1 {
		t.Fatalf("before the token expires: %v, %d reviews; want the answer reused", err, api.n.Load())
	}
	clk.SetTime(exp)
	_, _ = r.Review(ctx, tok)
	if n := api.n.Load(); n != 2 {
		t.Fatalf("%d reviews once the token expired, want it asked about again (2)", n)
	}

	for range 3 {
		_, err := r.Review(ctx, "bad-token")
		wantStatus(t, err, http.StatusUnauthorized, "a made-up token")
	}
	if n := api.n.Load(); n != 3 {
		t.Fatalf("%d reviews after three calls with one bad token, want the refusal reused (3)", n)
	}
	clk.Step(time.Minute)
	_, _ = r.Review(ctx, "bad-token")
	if n := api.n.Load(); n != 4 {
		t.Fatalf("%d reviews once the refusal aged, want 4", n)
	}

	for i := range 5 {
		_, _ = r.Review(ctx, fmt.Sprintf("other-bad-token-%d", i))
	}
	r.mu.Lock()
	size := len(r.cache)
	r.mu.Unlock()
	if size > 2 {
		t.Errorf("the cache holds %d tokens, more than its size 2", size)
	}
}

// TestReviewerAPIServerDown: when the API server cannot be asked, the call is
// answered 503 and nothing is remembered.
func TestReviewerAPIServerDown(t *testing.T) {
	api := &failing{}
	r := NewReviewer(api, ReviewerOptions{})
	for range 2 {
		_, err := r.Review(context.Background(), "some-token")
		wantStatus(t, err, http.StatusServiceUnavailable, "the API server down")
	}
	if api.n.Load() != 2 {
		t.Errorf("%d reviews, want each call to ask again (2)", api.n.Load())
	}
}

type failing struct{ n atomic.Int64 }

func (f *failing) Create(context.Context, *authnv1.TokenReview, metav1.CreateOptions) (*authnv1.TokenReview, error) {
	f.n.Add(1)
	return nil, errors.New("connection refused")
}

// TestIdentity checks how a TokenReview's status is read.
func TestIdentity(t *testing.T) {
	ok := authnv1.TokenReviewStatus{Authenticated: true, Audiences: []string{Audience},
		User: authnv1.UserInfo{Username: "system:serviceaccount:chat:frontend"}}
	if id, err := identity(ok); err != nil || id != (Identity{"chat", "frontend"}) {
		t.Errorf("identity = %+v, %v", id, err)
	}
	for name, st := range map[string]authnv1.TokenReviewStatus{
		"not authenticated": {Authenticated: false, Error: "invalid bearer token"},
		"no audience":       {Authenticated: true, User: ok.User},
		"another audience":  {Authenticated: true, Audiences: []string{"vault"}, User: ok.User},
		"a user":            {Authenticated: true, Audiences: []string{Audience}, User: authnv1.UserInfo{Username: "alice"}},
		"a node":            {Authenticated: true, Audiences: []string{Audience}, User: authnv1.UserInfo{Username: "system:node:n1"}},
		"no name":           {Authenticated: true, Audiences: []string{Audience}, User: authnv1.UserInfo{Username: "system:serviceaccount:chat:"}},
		"too many parts":    {Authenticated: true, Audiences: []string{Audience}, User: authnv1.UserInfo{Username: "system:serviceaccount:chat:a:b"}},
	} {
		if _, err := identity(st); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
