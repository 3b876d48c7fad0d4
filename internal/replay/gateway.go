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
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/regionwarden/regionwarden/router/table"
	"github.com/regionwarden/regionwarden/router/upstream"
)

// httpCaller calls a gateway process over Vertex REST: the router binary or
// a peer. Its answers are classified by restResult.
type httpCaller struct {
	env     *Env
	cmd     *exec.Cmd
	dir     string // removed on Close when set
	url     string
	headers http.Header
	body    []byte
	// priority sends each call's priority in X-Regionwarden-Priority, for a
	// gateway that reads it (the router).
	priority bool
	client   *http.Client
	exited   chan struct{}
	out      *tailBuffer
}

// startProcess starts cmd, a gateway, with its output kept for error
// messages, and returns a caller of it with an HTTP client. dir, when set, is
// removed on Close.
func startProcess(env *Env, cmd *exec.Cmd, dir string) (*httpCaller, error) {
	c := &httpCaller{env: env, cmd: cmd, dir: dir, exited: make(chan struct{}), out: &tailBuffer{max: 8 << 10}}
	cmd.Stdout, cmd.Stderr = c.out, c.out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		_ = cmd.Wait()
		close(c.exited)
	}()
	c.client = newHTTPClient()
	return c, nil
}

// Call makes one generateContent call, or a streamGenerateContent call with
// server-sent events, through the gateway, waiting a little past the
// deadline so that the gateway's answer, not a hang-up, ends it.
func (c *httpCaller) Call(ctx context.Context, lc LoadCall) CallResult {
	d := c.env.Clock.Real(lc.Deadline)
	ctx, cancel := context.WithTimeout(ctx, d+d/5+50*time.Millisecond)
	defer cancel()
	url := c.url
	if lc.Stream {
		url = strings.TrimSuffix(url, ":generateContent") + ":streamGenerateContent?alt=sse"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(c.body))
	if err != nil {
		return CallResult{Err: Other}
	}
	for k, v := range c.headers {
		req.Header[k] = v
	}
	if pr := lc.Priority; c.priority && pr != table.PriorityDefault && pr != "" {
		req.Header.Set(upstream.HeaderPriority, string(pr))
	}
	resp, err := c.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return CallResult{Err: Timeout}
		}
		return CallResult{Err: Failed}
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	switch {
	case lc.Stream && resp.StatusCode == http.StatusOK:
		if err != nil {
			// Cut off after it began: the gateway gave up on the call
			// or the caller's deadline passed.
			if ctx.Err() != nil {
				return CallResult{Err: Timeout}
			}
			return CallResult{Err: Failed}
		}
		return sseResult(b)
	case err != nil:
		return CallResult{Err: Timeout}
	}
	return restResult(resp.StatusCode, b)
}

// sseResult classifies a stream of server-sent events answered 200: served
// when a chunk ended the generation (a finishReason) and no event was an
// error; a stream that ended early or with an error event failed (timed out
// when the error speaks of a deadline). The traffic type is the last that a
// chunk names.
func sseResult(body []byte) CallResult {
	var traffic string
	finished := false
	for _, ev := range strings.Split(strings.ReplaceAll(string(body), "\r\n", "\n"), "\n\n") {
		data, ok := strings.CutPrefix(strings.TrimSpace(ev), "data:")
		if !ok {
			continue
		}
		var chunk struct {
			Candidates []struct {
				FinishReason string `json:"finishReason"`
			} `json:"candidates"`
			UsageMetadata struct {
				TrafficType string `json:"trafficType"`
			} `json:"usageMetadata"`
			Error *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			return CallResult{Err: Other}
		}
		if e := chunk.Error; e != nil {
			if e.Code == http.StatusGatewayTimeout || strings.Contains(strings.ToLower(e.Message), "deadline") {
				return CallResult{Err: Timeout}
			}
			return CallResult{Err: Failed}
		}
		if t := chunk.UsageMetadata.TrafficType; t != "" {
			traffic = t
		}
		for _, cand := range chunk.Candidates {
			finished = finished || cand.FinishReason != ""
		}
	}
	if !finished {
		return CallResult{Err: Failed}
	}
	return served(traffic)
}

// waitReady polls url until it answers below 500, the process exits, or 30 s
// pass.
func (c *httpCaller) waitReady(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := c.client.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode < 500 {
				return nil
			}
		}
		select {
		case <-c.exited:
			return fmt.Errorf("%s exited before it was ready: %s", filepath.Base(c.cmd.Path), c.out.String())
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after 30 s: %s", filepath.Base(c.cmd.Path), c.out.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Close stops the process (SIGTERM, then SIGKILL after 5 s) and removes its
// folder, if it has one.
func (c *httpCaller) Close() error {
	if c.dir != "" {
		defer func() { _ = os.RemoveAll(c.dir) }()
	}
	if c.client != nil {
		c.client.CloseIdleConnections()
	}
	if c.cmd == nil || c.cmd.Process == nil {
		return nil
	}
	_ = c.cmd.Process.Signal(terminate)
	select {
	case <-c.exited:
	case <-time.After(5 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
	return nil
}

// newHTTPClient is a client that keeps enough connections for the replay's
// concurrency.
func newHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     time.Minute,
	}}
}

// requestBody is a generateContent body with one user turn of text.
func requestBody(text string) []byte {
	b, _ := json.Marshal(map[string]any{
		"contents": []any{map[string]any{"role": "user", "parts": []any{map[string]string{"text": text}}}},
	})
	return b
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
		return served(out.UsageMetadata.TrafficType)
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

// FreeAddr returns a 127.0.0.1 address with a port that was free a moment
// ago, for a process the caller starts.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	return addr, l.Close()
}

// terminate asks a child process to stop.
var terminate os.Signal = syscall.SIGTERM

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
