package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/regionwarden/regionwarden/router/table"
)

// Router is regionwarden's router binary end to end: started per replay with
// the scenario's routing table in a file, --upstream-insecure toward the
// emulated regions and --clock-scale at the replay's scale, and called over
// Vertex REST (generateContent) as an application's SDK would. bin is the
// binary; an empty bin or a missing file makes the policy unavailable.
func Router(bin string) Policy {
	return Policy{Name: NameRouter, Start: func(ctx context.Context, env *Env) (Caller, error) {
		if bin == "" {
			return nil, fmt.Errorf("%w: no router binary was given", ErrUnavailable)
		}
		if _, err := os.Stat(bin); err != nil {
			return nil, fmt.Errorf("%w: router binary: %v", ErrUnavailable, err)
		}
		return startRouter(ctx, bin, env)
	}}
}

// routerProcess is a running router binary and the REST client that calls it.
type routerProcess struct {
	env    *Env
	cmd    *exec.Cmd
	dir    string
	url    string
	body   []byte
	client *http.Client
	exited chan struct{}
	stderr *tailBuffer
}

// startRouter writes the table, starts the router on a free loopback port
// and waits until it is ready.
func startRouter(ctx context.Context, bin string, env *Env) (*routerProcess, error) {
	dir, err := os.MkdirTemp("", "replay-router-")
	if err != nil {
		return nil, err
	}
	rendered, err := table.Render(&table.Table{Version: table.Version, Pools: []table.Pool{env.Pool}})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("render table: %w", err)
	}
	tableFile := filepath.Join(dir, table.DataKey)
	if err := os.WriteFile(tableFile, rendered, 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	addr, err := freePort()
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	// The router's own request timeout is the call's deadline in real time,
	// so it, not the caller hanging up, ends a call that runs out of time.
	deadline := env.Clock.Real(env.Scenario.Load.Deadline.Duration)
	rp := &routerProcess{env: env, dir: dir, url: "http://" + addr, exited: make(chan struct{}), stderr: &tailBuffer{max: 8 << 10}}
	rp.cmd = exec.Command(bin,
		"--table-file", tableFile,
		"--listen", addr,
		"--upstream-insecure",
		"--clock-scale", strconv.FormatFloat(env.Clock.Scale(), 'g', -1, 64),
		"--seed", strconv.FormatUint(env.Seed, 10),
		"--request-timeout", deadline.String(),
		"--shutdown-grace", "1s",
		"--log-level", "error",
	)
	rp.cmd.Stdout = rp.stderr
	rp.cmd.Stderr = rp.stderr
	if err := rp.cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start router: %w", err)
	}
	go func() {
		_ = rp.cmd.Wait()
		close(rp.exited)
	}()
	rp.client = &http.Client{Transport: &http.Transport{
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     time.Minute,
	}}
	sc := env.Scenario
	loc := sc.Regions[0].Name
	rp.url += fmt.Sprintf("/v1/projects/%s/locations/%s/publishers/%s/models/%s:generateContent", sc.Project, loc, sc.Publisher, sc.Model)
	rp.body, err = json.Marshal(map[string]any{
		"contents": []any{map[string]any{"role": "user", "parts": []any{map[string]string{"text": env.Prompt}}}},
	})
	if err != nil {
		_ = rp.Close()
		return nil, err
	}
	if err := rp.waitReady(ctx, "http://"+addr+"/readyz"); err != nil {
		_ = rp.Close()
		return nil, err
	}
	return rp, nil
}

// waitReady polls the router's readiness until it answers 200, the router
// exits, or 30 s pass.
func (rp *routerProcess) waitReady(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := rp.client.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-rp.exited:
			return fmt.Errorf("router exited before it was ready: %s", rp.stderr.String())
		case <-ctx.Done():
			return fmt.Errorf("router not ready after 30 s: %s", rp.stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Call makes one generateContent call through the router. The router
// retries as its policy allows; the caller waits a little past the deadline
// so that the router's answer, not a hang-up, ends the call.
func (rp *routerProcess) Call(ctx context.Context, deadline time.Duration) CallResult {
	d := rp.env.Clock.Real(deadline)
	ctx, cancel := context.WithTimeout(ctx, d+d/5+50*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rp.url, bytes.NewReader(rp.body))
	if err != nil {
		return CallResult{Err: Other}
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := rp.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return CallResult{Err: Timeout}
		}
		return CallResult{Err: Failed}
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return CallResult{Err: Timeout}
	}
	return restResult(resp.StatusCode, b)
}

// restResult classifies a Vertex REST answer: the router's own refusals
// (over capacity, shed, no regions) apart from a region's errors passed on.
func restResult(code int, body []byte) CallResult {
	if code == http.StatusOK {
		var out struct {
			UsageMetadata struct {
				TrafficType string `json:"trafficType"`
			} `json:"usageMetadata"`
		}
		if err := json.Unmarshal(body, &out); err != nil {
			return CallResult{Err: Other}
		}
		return CallResult{Provisioned: out.UsageMetadata.TrafficType == "PROVISIONED_THROUGHPUT"}
	}
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	msg := strings.ToLower(e.Error.Message)
	switch {
	case strings.Contains(msg, "no regions"):
		return CallResult{Err: NoRegions}
	case code == http.StatusTooManyRequests && (strings.HasPrefix(msg, "over capacity") || strings.HasPrefix(msg, "shed")):
		return CallResult{Err: Shed}
	case code == http.StatusTooManyRequests:
		return CallResult{Err: Throttled}
	case code == http.StatusGatewayTimeout || code == http.StatusRequestTimeout:
		return CallResult{Err: Timeout}
	case code >= 500:
		return CallResult{Err: Failed}
	default:
		return CallResult{Err: Other}
	}
}

// Close stops the router (SIGTERM, then SIGKILL after 5 s) and removes its
// table.
func (rp *routerProcess) Close() error {
	defer func() { _ = os.RemoveAll(rp.dir) }()
	rp.client.CloseIdleConnections()
	if rp.cmd.Process == nil {
		return nil
	}
	_ = rp.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-rp.exited:
	case <-time.After(5 * time.Second):
		_ = rp.cmd.Process.Kill()
		<-rp.exited
	}
	return nil
}

// freePort returns a free 127.0.0.1 address.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	return addr, l.Close()
}

// tailBuffer keeps the last max bytes written to it, for error messages.
type tailBuffer struct {
	mu  sync.Mutex
	b   []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = t.b[over:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(string(t.b))
	if s == "" {
		return "(no output)"
	}
	return s
}
