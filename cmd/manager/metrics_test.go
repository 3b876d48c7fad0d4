package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/regionwarden/regionwarden/internal/testenv"
	"github.com/regionwarden/regionwarden/internal/waittest"
)

// TestMetricsNeedAuthorization runs a manager with the metrics options of
// cmd/manager against a real API server: /metrics answers 401 without a
// token, 403 to a ServiceAccount not bound to the metrics-reader role, and
// the metrics to one that is.
func TestMetricsNeedAuthorization(t *testing.T) {
	cfg := testenv.Start(t, &envtest.Environment{})
	admin, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	token := func(name string) string {
		t.Helper()
		testenv.ServiceAccount(t, admin, "monitoring", name)
		tok, _ := testenv.Token(t, admin, "monitoring", name, 0)
		return tok
	}
	// As config/rbac's metrics-reader role, bound to the scraper.
	testenv.ClusterRole(t, admin, "metrics-reader", []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
		rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "prometheus", Namespace: "monitoring"})
	scraper, stranger := token("prometheus"), token("someone")

	addr := freeAddr(t)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsOptions(addr, true), HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Go(t, "manager", mgr.Start)

	// The certificate is self-signed, as in a cluster without cert-manager.
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the operator's self-signed certificate
	get := func(token string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, "https://"+addr+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		var code int
		var last error
		waittest.For(t, 30*time.Second, func() string { return fmt.Sprintf("the metrics endpoint: %v", last) }, func() bool {
			resp, err := client.Do(req)
			if last = err; err != nil {
				return false
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			code = resp.StatusCode
			return true
		})
		return code
	}
	for _, tc := range []struct {
		who   string
		token string
		want  int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"a ServiceAccount without the role", stranger, http.StatusForbidden},
		{"the scraper", scraper, http.StatusOK},
	} {
		if got := get(tc.token); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.who, got, tc.want)
		}
	}
	// controller-runtime's filter answers a token the API server rejects
	// with 500 rather than 401; either way it is refused.
	if got := get("forged"); got == http.StatusOK {
		t.Error("a made-up token read the metrics")
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}
