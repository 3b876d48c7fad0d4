package upstream

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// h1Region is a plaintext HTTP/1.1 server that counts the connections made
// to it, and the h1 transport that calls it.
func h1Region(t *testing.T, h http.HandlerFunc) (*h1, *httptest.Server, *atomic.Int64) {
	t.Helper()
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	tr := newH1(srv.Listener.Addr().String())
	t.Cleanup(tr.closeIdle)
	return tr, srv, &conns
}

// h1Call makes one call of generateBody and reads its answer to the end.
func h1Call(ctx context.Context, tr *h1, path string) (int, string, error) {
	return h1Send(ctx, tr, path, "", http.Header{"Content-Type": {"application/json"}}, []byte(generateBody))
}

// h1Send makes one call and reads its answer to the end.
func h1Send(ctx context.Context, tr *h1, path, query string, header http.Header, body []byte) (int, string, error) {
	resp, err := tr.send(ctx, path, query, header, body)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// TestPlaintextConnectionsAreReused: calls one after another share one
// connection; an answer left unread, or one that says the region closes the
// connection, is never followed by a call on the same connection.
func TestPlaintextConnectionsAreReused(t *testing.T) {
	tr, _, conns := h1Region(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || string(body) != generateBody || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "unexpected request", http.StatusBadRequest)
			return
		}
		switch r.URL.Path {
		case "/hints":
			w.Header().Set("Link", "</x>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
		case "/close":
			w.Header().Set("Connection", "close")
		case "/long":
			_, _ = w.Write([]byte(strings.Repeat("x", 1<<20)))
			return
		}
		_, _ = w.Write([]byte(`{"ok":true}`))
	})
	ctx := context.Background()
	for i := range 20 {
		code, body, err := h1Call(ctx, tr, "/v1/a")
		if err != nil || code != http.StatusOK || body != `{"ok":true}` {
			t.Fatalf("call %d: %d %q %v", i, code, body, err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("20 calls one after another made %d connections, want 1", n)
	}
	if code, body, err := h1Call(ctx, tr, "/hints"); err != nil || code != http.StatusOK || body != `{"ok":true}` {
		t.Fatalf("after early hints: %d %q %v", code, body, err)
	}

	// An answer closed before its end: the rest is not read, the
	// connection not reused.
	resp, err := tr.send(ctx, "/long", "", nil, []byte(generateBody))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := resp.Body.Read(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if _, _, err := h1Call(ctx, tr, "/a"); err != nil {
		t.Fatal(err)
	}
	if n := conns.Load(); n != 2 {
		t.Fatalf("after an answer left unread: %d connections, want 2", n)
	}

	// Connection: close.
	if _, _, err := h1Call(ctx, tr, "/close"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h1Call(ctx, tr, "/a"); err != nil {
		t.Fatal(err)
	}
	if n := conns.Load(); n != 3 {
		t.Fatalf("after Connection: close: %d connections, want 3", n)
	}
}

// TestPlaintextIdleCloseIsNotAFailure: a region that closes its idle
// connections (a restart, an idle timeout) fails no call: the closed
// connection is found before it is used.
func TestPlaintextIdleCloseIsNotAFailure(t *testing.T) {
	tr, srv, conns := h1Region(t, func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{}`))
	})
	ctx := context.Background()
	for i := range 5 {
		if _, _, err := h1Call(ctx, tr, "/a"); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		srv.CloseClientConnections()
		// The close reaches the router's end of the connection.
		time.Sleep(20 * time.Millisecond)
	}
	if n := conns.Load(); n != 5 {
		t.Fatalf("%d connections, want 5 (one a call)", n)
	}
}

// TestPlaintextContextEndsCall: the call's context ends it while it waits
// for the answer and while its body streams, with the context's error, and
// the connection is not reused.
func TestPlaintextContextEndsCall(t *testing.T) {
	release := make(chan struct{})
	tr, _, conns := h1Region(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/stream" {
			_, _ = w.Write([]byte("first"))
			w.(http.Flusher).Flush()
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := tr.send(ctx, "/wait", "", nil, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting for the head: %v, want the deadline", err)
	}

	ctx, cancel = context.WithCancel(context.Background())
	resp, err := tr.send(ctx, "/stream", "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := resp.Body.Read(buf)
	if err != nil || string(buf[:n]) != "first" {
		t.Fatalf("first chunk: %q %v (a chunk must arrive before the answer ends)", buf[:n], err)
	}
	time.AfterFunc(20*time.Millisecond, cancel)
	_, err = io.ReadAll(resp.Body)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("reading on after the cancel: %v, want context.Canceled", err)
	}
	_ = resp.Body.Close()
	tr.mu.Lock()
	idle := len(tr.idle)
	tr.mu.Unlock()
	if idle != 0 || conns.Load() != 2 {
		t.Fatalf("%d idle connections of %d, want none of 2", idle, conns.Load())
	}
}

// TestPlaintextRefusesBrokenHeaders: a header or a query that would end the
// request's head or line early is refused before anything is sent.
func TestPlaintextRefusesBrokenHeaders(t *testing.T) {
	var calls atomic.Int64
	tr, _, _ := h1Region(t, func(http.ResponseWriter, *http.Request) { calls.Add(1) })
	for _, h := range []http.Header{
		{"X-A": {"ok\r\nX-Injected: 1"}},
		{"X-A\r\nX-B": {"ok"}},
		{"X A": {"ok"}},
		{"": {"ok"}},
	} {
		if _, err := tr.send(context.Background(), "/a", "", h, nil); err == nil {
			t.Errorf("header %q was sent", h)
		}
	}
	// A hostile caller's query (the router passes it on as it came).
	for _, q := range []string{"alt=sse HTTP/1.1\r\nX-Injected: 1", "a\x00b", "a b"} {
		if _, err := tr.send(context.Background(), "/a", q, nil, nil); err == nil {
			t.Errorf("query %q was sent", q)
		}
	}
	if calls.Load() != 0 {
		t.Fatalf("the region got %d calls", calls.Load())
	}
	if code, _, err := h1Call(context.Background(), tr, "/a"); err != nil || code != http.StatusOK || calls.Load() != 1 {
		t.Fatalf("a call after the refusals: %d %v", code, err)
	}
}

func TestEscapedPath(t *testing.T) {
	for in, want := range map[string]string{
		"/v1/projects/p/locations/us-central1/publishers/anthropic/models/claude-x@20240620:rawPredict": "/v1/projects/p/locations/us-central1/publishers/anthropic/models/claude-x@20240620:rawPredict",
		"/v1/projects/p/models/a b":  "/v1/projects/p/models/a%20b",
		"/v1/projects/p/models/a?b#": "/v1/projects/p/models/a%3Fb%23",
	} {
		if got := escapedPath(in); got != want {
			t.Errorf("escapedPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestPlaintextSendsLargeBodies: a body of megabytes (inline media) reaches
// the region whole, with the query, and the connection keeps no buffer of
// the size of an outsized head.
func TestPlaintextSendsLargeBodies(t *testing.T) {
	body := []byte(strings.Repeat(`{"inlineData":"0123456789abcdef"},`, 100_000))
	tr, _, _ := h1Region(t, func(w http.ResponseWriter, r *http.Request) {
		got, err := io.ReadAll(r.Body)
		if err != nil || string(got) != string(body) || r.ContentLength != int64(len(body)) || r.URL.RawQuery != "alt=sse" {
			http.Error(w, "body or query changed", http.StatusBadRequest)
			return
		}
		_, _ = w.Write([]byte(`{}`))
	})
	for range 2 {
		code, answer, err := h1Send(context.Background(), tr, "/a", "alt=sse", http.Header{"X-Big": {strings.Repeat("v", maxKeptHead)}}, body)
		if err != nil || code != http.StatusOK {
			t.Fatalf("%d %s %v", code, answer, err)
		}
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.idle) != 1 || cap(tr.idle[0].wbuf) > maxKeptHead {
		t.Fatalf("%d idle connections, the first keeping a %d-byte buffer", len(tr.idle), cap(tr.idle[0].wbuf))
	}
}
