package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/aiplatform/apiv1/aiplatformpb"
	"github.com/gorilla/websocket"
	"github.com/onsi/gomega/gbytes"
	"google.golang.org/genai"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/regionwarden/regionwarden/internal/testenv"
	routerauth "github.com/regionwarden/regionwarden/router/auth"
	"github.com/regionwarden/regionwarden/router/table"
	"github.com/regionwarden/regionwarden/router/upstream"
	"github.com/regionwarden/regionwarden/router/upstream/upstreamtest"
)

const generatePath = "/v1/projects/demo-project/locations/us-central1/publishers/google/models/gemini-2.5-flash-lite:generateContent"

// post sends a generateContent request to the router's REST surface with
// the Authorization authz ("" for none) and returns the status and Google's
// error status name, if any.
func post(t *testing.T, s *started, authz string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+s.api+generatePath, strings.NewReader(`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var e struct {
		Error struct {
			Code   int    `json:"code"`
			Status string `json:"status"`
		} `json:"error"`
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		if err := json.Unmarshal(body, &e); err != nil || e.Error.Code != resp.StatusCode {
			t.Errorf("%d answer is not Google's error JSON: %s", resp.StatusCode, body)
		}
	}
	return resp.StatusCode, e.Error.Status
}

// routerCredentials writes a service account key whose token endpoint is a
// local server, points Application Default Credentials at it, and returns
// how many tokens the router asked for: the router's own Google identity,
// were it ever used.
func routerCredentials(t *testing.T) *atomic.Int64 {
	t.Helper()
	var asked atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		asked.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"access_token": "router-own-token", "token_type": "Bearer", "expires_in": 3600}`)
	}))
	t.Cleanup(ts.Close)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	sa, err := json.Marshal(map[string]string{
		"type": "service_account", "project_id": "demo-project", "private_key_id": "k1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": "router@demo-project.iam.gserviceaccount.com", "client_id": "1",
		"token_uri": ts.URL,
	})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "router-key.json")
	if err := os.WriteFile(path, sa, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", path)
	return &asked
}

// TestForwardModeSendsTheCallersTokenOnly: in the default mode
// (--caller-auth=forward) a call without a token is answered 401 in Google's
// error model on both surfaces and never reaches a region; a call with one
// reaches the region with that token and no other, and the router's own
// Google identity (here a service account key, found by Application Default
// Credentials) is never even asked for a token.
func TestForwardModeSendsTheCallersTokenOnly(t *testing.T) {
	tokensAsked := routerCredentials(t)
	a := startRegion(t, "us-central1")
	s := runOnTableOf(t, a, "--grpc-listen", "127.0.0.1:0")

	if code, st := post(t, s, ""); code != http.StatusUnauthorized || st != "UNAUTHENTICATED" {
		t.Errorf("REST without a token: %d %s, want 401 UNAUTHENTICATED", code, st)
	}
	if code, st := post(t, s, "Basic cm91dGVyOnJvdXRlcg=="); code != http.StatusUnauthorized || st != "UNAUTHENTICATED" {
		t.Errorf("REST with a password: %d %s, want 401 UNAUTHENTICATED", code, st)
	}
	pc := s.predictionClient(t)
	req := &aiplatformpb.GenerateContentRequest{
		Model:    "projects/demo-project/locations/us-central1/publishers/google/models/gemini-2.5-flash-lite",
		Contents: []*aiplatformpb.Content{{Role: "user", Parts: []*aiplatformpb.Part{{Data: &aiplatformpb.Part_Text{Text: "hi"}}}}},
	}
	if _, err := pc.GenerateContent(context.Background(), req); status.Code(err) != codes.Unauthenticated {
		t.Errorf("gRPC without a token: %v, want Unauthenticated", err)
	}
	if n := a.Calls(); n != 0 {
		t.Fatalf("the region saw %d calls without a caller's token", n)
	}

	if got, err := answer(s.clientWith(t, "caller-token-1")); err != nil || got != "us-central1" {
		t.Fatalf("REST with a token: %q, %v", got, err)
	}
	if got := a.Last().Auth; len(got) != 1 || got[0] != "Bearer caller-token-1" {
		t.Errorf("the region saw Authorization %q over REST, want the caller's token alone", got)
	}
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer caller-token-2")
	if _, err := pc.GenerateContent(ctx, req); err != nil {
		t.Fatalf("gRPC with a token: %v", err)
	}
	if got := a.Last().Auth; len(got) != 1 || got[0] != "Bearer caller-token-2" {
		t.Errorf("the region saw authorization %q over gRPC, want the caller's token alone", got)
	}
	for _, c := range a.Seen() {
		for _, v := range c.Auth {
			if strings.Contains(v, "router-own-token") {
				t.Errorf("the router's own token reached the region: %q", v)
			}
		}
	}
	if n := tokensAsked.Load(); n != 0 {
		t.Errorf("the router asked for its own Google token %d times in forward mode", n)
	}
}

// TestKubernetesModeAdmitsListedServiceAccounts runs the router with
// --caller-auth=kubernetes against a real API server, as a user allowed only
// to create TokenReviews: a ServiceAccount the pool lists is admitted, and its
// token never reaches the region; one it does not list is answered 403, a
// token for another audience 401, both in Google's error model and before
// any region is called. Metrics and the debug log name the caller's
// namespace.
func TestKubernetesModeAdmitsListedServiceAccounts(t *testing.T) {
	api := startAPIServer(t)
	admin := api.admin
	api.grantClusterWide("regionwarden-router", rbacv1.PolicyRule{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}})
	kubeconfig := api.kubeconfig(api.user("regionwarden-router"), "")
	tokenOf := func(name string, audiences ...string) string {
		t.Helper()
		testenv.ServiceAccount(t, admin, "chat", name)
		tok, _ := testenv.Token(t, admin, "chat", name, 0, audiences...)
		return tok
	}
	frontend := tokenOf("frontend", routerauth.Audience)
	admin2 := tokenOf("admin", routerauth.Audience)
	apiServers := tokenOf("batch")

	a := startRegion(t, "us-central1")
	b, err := table.Render(&table.Table{Pools: []table.Pool{{
		Project: "demo-project", Publisher: "google", Model: "gemini-2.5-flash-lite",
		Regions: []table.Region{a.TableRegion(0)},
		Callers: table.Callers{ServiceAccounts: []table.ServiceAccount{{Namespace: "chat", Name: "frontend", MaxPriority: table.PriorityCritical}}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	kubeletWrite(t, dir, 1, b)
	logs := gbytes.NewBuffer() // safe for the writer and the test at once
	s := startRouterLogging(t, logs, "--allow-endpoint-host", "127.0.0.1", "--table-file", dir,
		"--caller-auth", "kubernetes", "--kubeconfig", kubeconfig, "--log-level", "debug")
	s.waitReady(t)

	if got, err := answer(s.clientWith(t, frontend)); err != nil || got != "us-central1" {
		t.Fatalf("a listed ServiceAccount: %q, %v", got, err)
	}
	if got := a.Last().Auth; len(got) != 0 {
		t.Errorf("the region saw Authorization %q; a caller's ServiceAccount token must stay with the router", got)
	}
	calls := a.Calls()
	if code, st := post(t, s, "Bearer "+admin2); code != http.StatusForbidden || st != "PERMISSION_DENIED" {
		t.Errorf("a ServiceAccount the pool does not list: %d %s, want 403 PERMISSION_DENIED", code, st)
	}
	if code, st := post(t, s, "Bearer "+apiServers); code != http.StatusUnauthorized || st != "UNAUTHENTICATED" {
		t.Errorf("a token for the API server's audience: %d %s, want 401 UNAUTHENTICATED", code, st)
	}
	if code, st := post(t, s, ""); code != http.StatusUnauthorized {
		t.Errorf("no token: %d %s, want 401", code, st)
	}
	if a.Calls() != calls {
		t.Error("a refused call reached the region")
	}
	liveUnderKubernetes(t, s, a, frontend, admin2)

	m := s.metrics(t)
	for _, want := range []string{
		`regionwarden_router_caller_requests_total{caller_namespace="chat",pool="demo-project/google/gemini-2.5-flash-lite"} 2`,
		`regionwarden_router_caller_refusals_total{pool="demo-project/google/gemini-2.5-flash-lite",reason="forbidden"} 2`,
		`regionwarden_router_caller_refusals_total{pool="demo-project/google/gemini-2.5-flash-lite",reason="unauthenticated"} 2`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s:\n%s", want, grep(m, "caller_"))
		}
	}
	eventually(t, "the debug log names the caller's namespace", func() bool {
		return strings.Contains(string(logs.Contents()), "callerNamespace=chat")
	})
	if strings.Contains(string(logs.Contents()), frontend) {
		t.Error("the log holds a caller's token")
	}
}

// TestRefusedCallerCredentialsBlameNoRegion: in forward mode the credentials
// are the caller's, so Google refusing them refused that caller. A caller
// with an expired token (401) or without the grant (403) gets the region's
// answer as it came, on both surfaces, and its calls are neither retried in
// another region nor counted toward any region's ejection or quota: 60 of
// them within a second, twice what the regions' quotas allow, are all
// answered, and then every region still takes its share of a caller whose
// token is good.
func TestRefusedCallerCredentialsBlameNoRegion(t *testing.T) {
	var regions []*upstreamtest.Region
	var rows []table.Region
	for _, name := range []string{"us-central1", "us-east4", "us-west1"} {
		r := startRegion(t, name)
		r.Set(func(b *upstreamtest.Behavior) {
			b.Refuse = map[string]codes.Code{"Bearer expired": codes.Unauthenticated, "Bearer no-grant": codes.PermissionDenied}
		})
		regions, rows = append(regions, r), append(rows, r.TableRegion(10))
	}
	data, err := table.Render(&table.Table{Pools: []table.Pool{{
		Project: "demo-project", Publisher: "google", Model: "gemini-2.5-flash-lite",
		Regions: rows, Policy: table.DefaultPolicy(),
	}}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	kubeletWrite(t, dir, 1, data)
	s := startRun(t, "--table-file", dir, "--grpc-listen", "127.0.0.1:0")
	s.waitReady(t)
	calls := func() (n int64) {
		for _, r := range regions {
			n += r.Calls()
		}
		return n
	}

	const refused = 60
	expired := s.clientWith(t, "expired")
	for range refused / 2 {
		_, err := answer(expired)
		var apiErr genai.APIError
		if !errors.As(err, &apiErr) || apiErr.Code != http.StatusUnauthorized || apiErr.Status != "UNAUTHENTICATED" {
			t.Fatalf("REST with an expired token: %v, want the region's 401 UNAUTHENTICATED", err)
		}
	}
	pc := s.predictionClient(t)
	req := &aiplatformpb.GenerateContentRequest{
		Model:    "projects/demo-project/locations/us-central1/publishers/google/models/gemini-2.5-flash-lite",
		Contents: []*aiplatformpb.Content{{Role: "user", Parts: []*aiplatformpb.Part{{Data: &aiplatformpb.Part_Text{Text: "hi"}}}}},
	}
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer no-grant")
	for range refused / 2 {
		if _, err := pc.GenerateContent(ctx, req); status.Code(err) != codes.PermissionDenied {
			t.Fatalf("gRPC without the grant: %v, want the region's PermissionDenied", err)
		}
	}
	if n := calls(); n != refused {
		t.Errorf("the regions saw %d calls for %d refused ones: a refused caller's call was retried", n, refused)
	}
	m := s.metrics(t)
	if line := grep(m, "regionwarden_router_pool_headroom_waits_total{"); !strings.HasSuffix(line, "} 0") {
		t.Errorf("refused calls waited for quota that refused calls held: %q", line)
	}
	for _, r := range regions {
		for _, metric := range []string{"regionwarden_router_region_failure_rate{", "regionwarden_router_region_ejections_total{"} {
			if line := grep(grep(m, metric), `region="`+r.Name+`"`); !strings.HasSuffix(line, "} 0") {
				t.Errorf("a caller's refused credentials count against %s: %q", r.Name, line)
			}
		}
	}

	good := s.clientWith(t, "good")
	before := make([]int64, len(regions))
	for i, r := range regions {
		before[i] = r.Calls()
	}
	for range 30 {
		if _, err := answer(good); err != nil {
			t.Fatalf("a caller whose token is good: %v", err)
		}
	}
	for i, r := range regions {
		if r.Calls() == before[i] {
			t.Errorf("%s took none of 30 calls of a caller whose token is good", r.Name)
		}
	}
}

// liveUnderKubernetes: a Live session under --caller-auth=kubernetes is the
// listed ServiceAccount's, set up with the router's own credentials (the
// caller's token stays with the router); one of a ServiceAccount the pool
// does not list is closed 1008 PERMISSION_DENIED once its setup names the
// pool, before any region sees it; one without a token is refused 401
// before its handshake.
func liveUnderKubernetes(t *testing.T, s *started, a *upstreamtest.Region, listed, unlisted string) {
	t.Helper()
	url := "ws://" + s.api + upstream.LivePath("v1beta1")
	setup := `{"setup":{"model":"projects/demo-project/locations/us-central1/publishers/google/models/gemini-2.5-flash-lite"}}`
	open := func(tok string) (*websocket.Conn, error) {
		conn, resp, err := websocket.DefaultDialer.Dial(url, http.Header{"Authorization": {"Bearer " + tok}})
		if err != nil {
			return nil, err
		}
		_ = resp.Body.Close()
		if err := conn.WriteMessage(websocket.TextMessage, []byte(setup)); err != nil {
			return nil, err
		}
		_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		_, _, err = conn.ReadMessage()
		return conn, err
	}
	conn, err := open(listed)
	if err != nil {
		t.Fatalf("a Live session of a listed ServiceAccount: %v", err)
	}
	_ = conn.Close()
	if got := a.Last(); got.Method != upstreamtest.MethodLive || len(got.Auth) != 0 {
		t.Errorf("the region saw %s with Authorization %q; want a Live session without the caller's token", got.Method, got.Auth)
	}
	calls := a.Calls()
	conn, err = open(unlisted)
	if ce, ok := errors.AsType[*websocket.CloseError](err); !ok || ce.Code != websocket.ClosePolicyViolation || !strings.HasPrefix(ce.Text, "PERMISSION_DENIED: ") {
		t.Errorf("a Live session of an unlisted ServiceAccount: %v, want close 1008 PERMISSION_DENIED", err)
	}
	if conn != nil {
		_ = conn.Close()
	}
	if _, resp, err := websocket.DefaultDialer.Dial(url, nil); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a Live session without a token: %v, want 401 before the handshake", err)
	} else {
		_ = resp.Body.Close()
	}
	if a.Calls() != calls {
		t.Error("a refused Live session reached the region")
	}
}
