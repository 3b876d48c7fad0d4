package auth

import (
	"context"
	"net/http"
	"testing"

	"github.com/regionwarden/regionwarden/router/table"
)

// reviewerFunc is a ReviewerInterface from a function.
type reviewerFunc func(token string) (Identity, error)

func (f reviewerFunc) Review(_ context.Context, token string) (Identity, error) { return f(token) }

func testPool() *table.Pool {
	return &table.Pool{Namespace: "llm", Name: "flash", Project: "acme-prod", Publisher: "google", Model: "gemini-2.5-flash",
		Callers: table.Callers{MaxPriority: table.PrioritySheddable, ServiceAccounts: []table.ServiceAccount{
			{Namespace: "chat", Name: "frontend", MaxPriority: table.PriorityCritical},
			{Namespace: "batch", Name: table.AnyServiceAccount, MaxPriority: table.PriorityDefault},
		}}}
}

// TestAuthenticate checks each mode's answers: who may call, and at what
// ceiling.
func TestAuthenticate(t *testing.T) {
	accounts := map[string]Identity{
		"frontend-token": {"chat", "frontend"},
		"job-token":      {"batch", "nightly"},
		"other-token":    {"chat", "admin"},
	}
	reviewer := reviewerFunc(func(tok string) (Identity, error) {
		if id, ok := accounts[tok]; ok {
			return id, nil
		}
		return Identity{}, unauthenticated("no")
	})
	forward, _ := New(ModeForward, nil)
	kube, _ := New(ModeKubernetes, reviewer)
	none, _ := New(ModeNone, nil)
	for _, tc := range []struct {
		name     string
		a        *Authenticator
		auth     string
		status   int // 0: admitted
		ceiling  table.Priority
		callerNS string
	}{
		{"forward without a token", forward, "", http.StatusUnauthorized, "", ""},
		{"forward with a basic credential", forward, "Basic dXNlcjpwYXNz", http.StatusUnauthorized, "", ""},
		{"forward with an empty bearer", forward, "Bearer ", http.StatusUnauthorized, "", ""},
		{"forward with a token", forward, "Bearer ya29.a0-google-token", 0, table.PrioritySheddable, ""},
		{"forward with a lower-case scheme", forward, "bearer ya29.a0-google-token", 0, table.PrioritySheddable, ""},
		{"kubernetes without a token", kube, "", http.StatusUnauthorized, "", ""},
		{"kubernetes with a refused token", kube, "Bearer forged", http.StatusUnauthorized, "", ""},
		{"kubernetes, a listed account", kube, "Bearer frontend-token", 0, table.PriorityCritical, "chat"},
		{"kubernetes, a listed namespace", kube, "Bearer job-token", 0, table.PriorityDefault, "batch"},
		{"kubernetes, an account not listed", kube, "Bearer other-token", http.StatusForbidden, "", ""},
		{"none without a token", none, "", 0, table.PrioritySheddable, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tc.a.Authenticate(context.Background(), tc.auth, testPool())
			if tc.status != 0 {
				wantStatus(t, err, tc.status, tc.name)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.MaxPriority != tc.ceiling || c.Namespace != tc.callerNS {
				t.Errorf("caller = %+v, want ceiling %s, namespace %q", c, tc.ceiling, tc.callerNS)
			}
		})
	}
}

func TestCallerPriorityIsCapped(t *testing.T) {
	c := Caller{MaxPriority: table.PriorityDefault}
	if got := c.Priority(table.PriorityCritical); got != table.PriorityDefault {
		t.Errorf("critical asked under a default ceiling runs at %s", got)
	}
	if got := c.Priority(table.PrioritySheddable); got != table.PrioritySheddable {
		t.Errorf("sheddable asked runs at %s", got)
	}
}

// TestForwardSendsOnlyTheCallersToken: the forwarding Authorizer passes a
// bearer token on and nothing else.
func TestForwardSendsOnlyTheCallersToken(t *testing.T) {
	got, err := Forward{}.Authorization(context.Background(), "bearer ya29.caller")
	if err != nil || got != "Bearer ya29.caller" {
		t.Errorf("Authorization = %q, %v", got, err)
	}
	for _, h := range []string{"", "Basic abc", "Bearer", "Bearer a b"} {
		if got, err := (Forward{}).Authorization(context.Background(), h); err == nil {
			t.Errorf("%q forwarded as %q", h, got)
		}
	}
}

func TestParseMode(t *testing.T) {
	for _, s := range []string{"forward", "kubernetes", "none"} {
		if m, err := ParseMode(s); err != nil || string(m) != s {
			t.Errorf("ParseMode(%q) = %q, %v", s, m, err)
		}
	}
	if _, err := ParseMode("mtls"); err == nil {
		t.Error("ParseMode accepted mtls")
	}
	if _, err := New(ModeKubernetes, nil); err == nil {
		t.Error("kubernetes mode without a reviewer")
	}
}
