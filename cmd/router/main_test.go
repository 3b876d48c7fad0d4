package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	aiplatform "cloud.google.com/go/aiplatform/apiv1"
	"cloud.google.com/go/aiplatform/apiv1/aiplatformpb"
	"cloud.google.com/go/auth"
	"go.uber.org/goleak"
	"google.golang.org/api/option"
	"google.golang.org/genai"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/regionwarden/regionwarden/internal/waittest"
	"github.com/regionwarden/regionwarden/router/table"
	"github.com/regionwarden/regionwarden/router/upstream/upstreamtest"
)

// TestMain fails the package's tests when goroutines outlive them: a router
// whose run left one behind once it returned (a server, the share store's
// connections) leaks at every restart of it in a process, and hides what the
// others leak.
//
// With routerProcessEnv set, the binary is the router instead, in a process
// of its own (BenchmarkRouterProcess).
func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(routerProcessEnv); ok {
		os.Exit(runAsRouter(args))
	}
	goleak.VerifyTestMain(m)
}

// routerProcessEnv holds, one to a line, the arguments of a router this test
// binary runs instead of its tests.
const routerProcessEnv = "REGIONWARDEN_TEST_ROUTER_ARGS"

// runAsRouter runs the router with args (one to a line) until SIGTERM,
// printing the address of its REST surface on a line of its own once it
// listens, and returns the exit code.
func runAsRouter(args string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	err := run(ctx, strings.Split(args, "\n"), os.Stderr, func(a addresses) { fmt.Println(a.api) })
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func TestFlagErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "routing.json")
	if err := os.WriteFile(file, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no source", nil, "no routing table source"},
		{"both sources", []string{"--table-file", file, "--table-configmaps", "ns"}, "not both"},
		{"missing file", []string{"--table-file", filepath.Join(dir, "nope.json")}, "no such file"},
		{"folder without the table", []string{"--table-file", t.TempDir()}, "routing.json"},
		{"zero clock scale", []string{"--table-file", file, "--clock-scale", "0"}, "--clock-scale"},
		{"stray argument", []string{"--table-file", file, "extra"}, "unexpected arguments"},
		{"no caller checks against Google", []string{"--table-file", file, "--caller-auth", "none"}, "needs --upstream-insecure"},
		{"unknown caller auth", []string{"--table-file", file, "--caller-auth", "mtls"}, "not a caller authentication mode"},
		{"endpoint host with a path", []string{"--table-file", file, "--allow-endpoint-host", "127.0.0.1/x"}, "not a host"},
		{"empty endpoint host", []string{"--table-file", file, "--allow-endpoint-host", "a,,b"}, "not a host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseFlags(tt.args, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one saying %q", err, tt.want)
			}
		})
	}
	var help bytes.Buffer
	if _, err := parseFlags([]string{"-h"}, &help); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v", err)
	}
	for _, f := range []string{"--table-file", "--table-configmaps", "--upstream-insecure", "--allow-endpoint-host", "--caller-auth", "--clock-scale", "for replays only", "--shutdown-grace"} {
		if !strings.Contains(help.String(), strings.TrimPrefix(f, "-")) {
			t.Errorf("-h does not mention %s", f)
		}
	}
}

// startRegion starts the router tests' fake region (upstreamtest), a shared
// one named name.
func startRegion(t *testing.T, name string) *upstreamtest.Region {
	t.Helper()
	return upstreamtest.Start(t, name, table.TierShared)
}

func renderTable(t *testing.T, r *upstreamtest.Region) []byte {
	t.Helper()
	return renderTableOf(t, r.TableRegion(0))
}

// renderTableOf is a table whose one pool routes to region under the default
// policy.
func renderTableOf(t *testing.T, region table.Region) []byte {
	t.Helper()
	b, err := table.Render(&table.Table{Pools: []table.Pool{{
		Project: "demo-project", Publisher: "google", Model: "gemini-2.5-flash-lite",
		Regions: []table.Region{region},
		Policy:  table.DefaultPolicy(),
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// kubeletWrite updates dir the way the kubelet's atomic writer updates a
// mounted ConfigMap: a new timestamped folder, a ..data_tmp symlink to it
// renamed over ..data, and routing.json linking through ..data.
func kubeletWrite(t *testing.T, dir string, n int, data []byte) {
	t.Helper()
	ts := fmt.Sprintf("..2026_11_30_10_00_%02d.%09d", n, n)
	if err := os.Mkdir(filepath.Join(dir, ts), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ts, table.DataKey), data, 0o644); err != nil {
		t.Fatal(err)
	}
	old, _ := os.Readlink(filepath.Join(dir, "..data"))
	if err := os.Symlink(ts, filepath.Join(dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dir, table.DataKey)); os.IsNotExist(err) {
		if err := os.Symlink(filepath.Join("..data", table.DataKey), filepath.Join(dir, table.DataKey)); err != nil {
			t.Fatal(err)
		}
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(dir, old)); err != nil {
			t.Fatal(err)
		}
	}
}

// token is a caller's token: "caller" when empty.
type token string

func (tok token) Token(context.Context) (*auth.Token, error) {
	if tok == "" {
		tok = "caller"
	}
	return &auth.Token{Value: string(tok), Type: "Bearer", Expiry: time.Now().Add(time.Hour)}, nil
}

// started is a router run by run() in the background.
type started struct {
	api, ops, grpc string
	done           chan error
	stop           context.CancelFunc
}

// startRun runs a router with args, allowed to call the fake regions on
// loopback.
func startRun(t *testing.T, args ...string) *started {
	t.Helper()
	return startRouter(t, append([]string{"--allow-endpoint-host", "127.0.0.1"}, args...)...)
}

// startRouter runs a router with args on loopback ports.
func startRouter(t *testing.T, args ...string) *started {
	t.Helper()
	return startRouterLogging(t, io.Discard, args...)
}

// startRouterLogging runs a router with args on loopback ports, logging to log.
func startRouterLogging(t *testing.T, log io.Writer, args ...string) *started {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &started{done: make(chan error, 1), stop: cancel}
	addrs := make(chan addresses, 1)
	go func() {
		s.done <- run(ctx, append([]string{"--listen", "127.0.0.1:0", "--ops-listen", "127.0.0.1:0", "--upstream-insecure", "--log-format", "text", "--shutdown-delay", "0s"}, args...),
			log, func(a addresses) { addrs <- a })
	}()
	select {
	case a := <-addrs:
		s.api, s.ops, s.grpc = a.api, a.ops, a.grpc
	case err := <-s.done:
		t.Fatalf("router exited: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-s.done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	return s
}

// runOnTableOf starts the router with args on a table file, mounted as the
// kubelet mounts a ConfigMap, that routes to region a alone, and waits until
// it is ready.
func runOnTableOf(t *testing.T, a *upstreamtest.Region, args ...string) *started {
	t.Helper()
	dir := t.TempDir()
	kubeletWrite(t, dir, 1, renderTable(t, a))
	s := startRun(t, append([]string{"--table-file", dir}, args...)...)
	s.waitReady(t)
	return s
}

// waitReady waits until the router's /readyz says ready.
func (s *started) waitReady(t *testing.T) {
	t.Helper()
	eventually(t, "ready", func() bool {
		resp, err := http.Get("http://" + s.ops + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

func (s *started) client(t *testing.T) *genai.Client {
	t.Helper()
	return s.clientWith(t, "")
}

// clientWith is a genai client of the router that sends tok as its bearer
// token ("caller" when empty).
func (s *started) clientWith(t *testing.T, tok string) *genai.Client {
	t.Helper()
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		Backend: genai.BackendVertexAI, Project: "demo-project", Location: "us-central1",
		Credentials: auth.NewCredentials(&auth.CredentialsOptions{TokenProvider: token(tok)}),
		HTTPOptions: genai.HTTPOptions{BaseURL: "http://" + s.api},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// answer calls the router through the SDK and returns the name of the region
// that answered.
func answer(c *genai.Client) (string, error) {
	resp, err := c.Models.GenerateContent(context.Background(), "gemini-2.5-flash-lite", genai.Text("hi"), nil)
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(resp.Text(), " answers: hi"), nil
}

func (s *started) metrics(t *testing.T) string {
	t.Helper()
	resp, err := http.Get("http://" + s.ops + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// eventually polls cond until it holds: the file watch is asynchronous.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waittest.For(t, 20*time.Second, "never: "+what, cond)
}

// TestTableSwappedOnDisk: a table swapped the way the kubelet updates a
// mounted ConfigMap takes effect without a restart; a broken one written the
// same way is refused and the old one keeps serving; both show in metrics.
func TestTableSwappedOnDisk(t *testing.T) {
	a, b := startRegion(t, "us-central1"), startRegion(t, "europe-west4")
	dir := t.TempDir()
	kubeletWrite(t, dir, 1, renderTable(t, a))
	s := startRun(t, "--table-file", dir)
	s.waitReady(t)
	c := s.client(t)
	if got, err := answer(c); err != nil || got != "us-central1" {
		t.Fatalf("answer %q, %v; want from us-central1", got, err)
	}

	kubeletWrite(t, dir, 2, renderTable(t, b))
	eventually(t, "the new table routes to europe-west4", func() bool {
		got, err := answer(c)
		return err == nil && got == "europe-west4"
	})

	kubeletWrite(t, dir, 3, []byte(`{"version": 1, "pools": [{"project": "demo-project"`))
	eventually(t, "the broken table counted", func() bool {
		return strings.Contains(s.metrics(t), `regionwarden_router_table_rejections_total{reason="invalid"} 1`)
	})
	if got, err := answer(c); err != nil || got != "europe-west4" {
		t.Errorf("after a broken table: answer %q, %v; want the last good table serving", got, err)
	}
	kubeletWrite(t, dir, 4, bytes.Replace(renderTable(t, a), []byte(`"version": 1`), []byte(`"version": 2`), 1))
	eventually(t, "the unknown-version table counted", func() bool {
		return strings.Contains(s.metrics(t), `regionwarden_router_table_rejections_total{reason="version"} 1`)
	})
	if got, err := answer(c); err != nil || got != "europe-west4" {
		t.Errorf("after an unknown-version table: answer %q, %v; want the last good table serving", got, err)
	}
	m := s.metrics(t)
	if !strings.Contains(m, "regionwarden_router_table_loads_total 2") {
		t.Errorf("metrics lack two table loads:\n%s", grep(m, "table_"))
	}
}

// TestShutdownDrainsInFlight: on shutdown a request in flight finishes within
// the grace period.
func TestShutdownDrainsInFlight(t *testing.T) {
	a := startRegion(t, "us-central1")
	hold := make(chan struct{})
	a.Set(func(b *upstreamtest.Behavior) { b.Hold = hold })
	s := runOnTableOf(t, a, "--shutdown-grace", "30s")
	c := s.client(t)
	got := make(chan string, 1)
	go func() {
		text, err := answer(c)
		if err != nil {
			text = err.Error()
		}
		got <- text
	}()
	<-a.Started
	s.stop()
	select {
	case err := <-s.done:
		t.Fatalf("router exited with a request in flight: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(hold)
	if text := <-got; text != "us-central1" {
		t.Errorf("in-flight request ended with %q", text)
	}
	if err := <-s.done; err != nil {
		t.Errorf("run: %v", err)
	}
	s.done <- nil // for the cleanup
}

// TestShutdownServesWhileUnready: on SIGTERM the router first turns unready
// and goes on serving for --shutdown-delay, each answer closing its
// connection, so that calls sent before the Service drops it are served and
// callers with pooled connections come back through the Service; then it
// drains and exits.
func TestShutdownServesWhileUnready(t *testing.T) {
	a := startRegion(t, "us-central1")
	s := runOnTableOf(t, a, "--shutdown-delay", "3s")
	s.stop()
	eventually(t, "unready", func() bool {
		resp, err := http.Get("http://" + s.ops + "/readyz")
		if err != nil {
			t.Fatalf("/readyz while draining: %v", err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusServiceUnavailable
	})
	req, err := http.NewRequest(http.MethodPost, "http://"+s.api+generatePath, strings.NewReader(`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer caller")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("a call while unready: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a call while unready: %d %s", resp.StatusCode, body)
	}
	if !resp.Close {
		t.Error("an answer while unready kept its connection open: the caller would keep calling a router that is going")
	}
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("run: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the router did not exit after its shutdown delay")
	}
	s.done <- nil // for the cleanup
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// predictionClient is a PredictionService client of the router's gRPC
// surface, without credentials of its own; it is closed when the test ends.
func (s *started) predictionClient(t *testing.T) *aiplatform.PredictionClient {
	t.Helper()
	pc, err := aiplatform.NewPredictionClient(context.Background(), option.WithEndpoint(s.grpc), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	return pc
}

// TestGRPCSurface: with --grpc-listen the router serves the aiplatform
// clients on a port of its own, routed by the same table as the REST surface.
func TestGRPCSurface(t *testing.T) {
	a := startRegion(t, "us-central1")
	s := runOnTableOf(t, a, "--grpc-listen", "127.0.0.1:0")
	pc := s.predictionClient(t)
	// The caller's own token, which the router forwards (--caller-auth's default).
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer caller")
	resp, err := pc.GenerateContent(ctx, &aiplatformpb.GenerateContentRequest{
		Model:    "projects/demo-project/locations/europe-west4/publishers/google/models/gemini-2.5-flash-lite",
		Contents: []*aiplatformpb.Content{{Role: "user", Parts: []*aiplatformpb.Part{{Data: &aiplatformpb.Part_Text{Text: "hi"}}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.GetCandidates()[0].GetContent().GetParts()[0].GetText(); got != "us-central1 answers: hi" {
		t.Errorf("answer %q", got)
	}
	if got := a.Last(); got.Surface != upstreamtest.GRPC || got.Model != a.ModelName("demo-project", "google", "gemini-2.5-flash-lite") {
		t.Errorf("the region saw %s %s", got.Surface, got.Model)
	}
	if got, err := answer(s.client(t)); err != nil || got != "us-central1" {
		t.Errorf("REST beside gRPC: %q, %v", got, err)
	}
}
