package server_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/regionwarden/regionwarden/internal/waittest"
	"github.com/regionwarden/regionwarden/router/server"
	"github.com/regionwarden/regionwarden/router/table"
	"github.com/regionwarden/regionwarden/router/upstream/upstreamtest"
)

// poolInFlight is the calls in flight in the only pool, as the policy counts them.
func (r *router) poolInFlight() int64 {
	r.t.Helper()
	snaps := r.srv.Snapshots()
	if len(snaps) != 1 {
		r.t.Fatalf("%d pools", len(snaps))
	}
	return snaps[0].InFlight
}

// TestSlowBodySenderIsCut: a client that sends 10 bytes of a 100 kB body and
// stops is answered 408 and cut off within the body read deadline, and its
// call gives back its place in the pool.
func TestSlowBodySenderIsCut(t *testing.T) {
	pt := startRegion(t, "europe-west1", table.TierProvisioned)
	const deadline = 200 * time.Millisecond
	r := startRouterWith(t, func(o *server.Options) { o.BodyReadTimeout = deadline }, poolOf(generous(), region(pt, 0)))
	conn, err := net.Dial("tcp", r.http.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	start := time.Now()
	_, err = fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: router\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"content", generatePath)
	if err != nil {
		t.Fatal(err)
	}
	// The client waits ten times the deadline for the router to give up.
	_ = conn.SetReadDeadline(time.Now().Add(10 * deadline))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer within %s of a stalled body: %v", 10*deadline, err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || !resp.Close {
		t.Errorf("answer %d (close %v): %s; want 408 and the connection closed", resp.StatusCode, resp.Close, body)
	}
	if _, msg, st := googleErr(t, body); st != "DEADLINE_EXCEEDED" || !strings.Contains(msg, deadline.String()) {
		t.Errorf("error %s %q", st, msg)
	}
	t.Logf("cut after %s", time.Since(start).Round(time.Millisecond))
	if n := r.poolInFlight(); n != 0 {
		t.Errorf("%d calls in flight after the cut, want 0", n)
	}
	if n := pt.calls.Load(); n != 0 {
		t.Errorf("a call without its body reached the region %d times", n)
	}
}

// TestStalledStreamReaderIsCut: a client that stops reading a stream is cut
// off once a write has waited the write timeout; its call ends, the region's
// stream with it, and its place in the pool is given back.
func TestStalledStreamReaderIsCut(t *testing.T) {
	pt := startRegion(t, "europe-west1", table.TierProvisioned)
	pt.set(func(b *upstreamtest.Behavior) { b.Endless, b.Pad = true, 64<<10 })
	r := startRouterWith(t, func(o *server.Options) { o.WriteTimeout = 200 * time.Millisecond }, poolOf(generous(), region(pt, 0)))
	conn, err := net.Dial("tcp", r.http.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	body := `{"contents":[{"parts":[{"text":"hi"}]}]}`
	path := strings.Replace(generatePath, ":generateContent", ":streamGenerateContent?alt=sse", 1)
	if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: router\r\nContent-Length: %d\r\n\r\n%s", path, len(body), body); err != nil {
		t.Fatal(err)
	}
	// The client reads the answer's first bytes, then nothing more.
	if _, err := io.ReadFull(conn, make([]byte, 64)); err != nil {
		t.Fatal(err)
	}
	waittest.For(t, 10*time.Second, "the stalled call gives back its place", func() bool { return r.poolInFlight() == 0 })
	// The router closed the connection: once the client drains what was
	// sent before the cut, it reads the end.
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, conn); err != nil {
		t.Errorf("the cut connection did not end: %v", err)
	}
}

// TestConcurrentHugeBodiesStayUnderTheMemoryLimit sends 24 bodies of 32 MiB
// at once to a router whose memory limit is 512 MiB, as in its manifests:
// the router holds no more body bytes than its budget (a quarter of the
// limit), answers the rest 429 with Retry-After before reading them, and its
// heap stays under the limit.
func TestConcurrentHugeBodiesStayUnderTheMemoryLimit(t *testing.T) {
	const (
		limit   = 512 << 20
		size    = 32 << 20
		callers = 24
	)
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(limit))
	pt := startRegion(t, "europe-west1", table.TierProvisioned)
	pt.set(func(b *upstreamtest.Behavior) { b.Discard = true })
	r := startRouterWith(t, func(o *server.Options) { o.MaxBodyBytes = size }, poolOf(generous(), region(pt, 0)))
	if got := r.srv.MaxBodyBytesInFlight(); got != limit/4 {
		t.Fatalf("body budget %d, want a quarter of the memory limit, %d", got, limit/4)
	}

	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()

	prefix, suffix := `{"contents":[{"role":"user","parts":[{"text":"`, `"}]}]}`
	var wg sync.WaitGroup
	codes := make([]int, callers)
	retryAfter := make([]string, callers)
	for i := range callers {
		wg.Go(func() {
			body := io.MultiReader(strings.NewReader(prefix), io.LimitReader(zeros{}, size-int64(len(prefix)+len(suffix))), strings.NewReader(suffix))
			req, err := http.NewRequest(http.MethodPost, r.http.URL+generatePath, body)
			if err != nil {
				t.Error(err)
				return
			}
			req.ContentLength = size
			resp, err := r.http.Client().Do(req)
			if err != nil {
				t.Errorf("call %d: %v", i, err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			codes[i], retryAfter[i] = resp.StatusCode, resp.Header.Get("Retry-After")
		})
	}
	wg.Wait()
	close(stop)
	<-sampled

	var ok, refused int
	for i, c := range codes {
		switch c {
		case http.StatusOK:
			ok++
		case http.StatusTooManyRequests:
			refused++
			if ra, err := strconv.Atoi(retryAfter[i]); err != nil || ra < 1 {
				t.Errorf("429 with Retry-After %q", retryAfter[i])
			}
		default:
			t.Errorf("call %d answered %d", i, c)
		}
	}
	t.Logf("%d answered, %d refused; heap peak %d MiB (limit %d MiB)", ok, refused, peak.Load()>>20, limit>>20)
	if ok == 0 || refused == 0 {
		t.Errorf("%d answered and %d refused; want both", ok, refused)
	}
	if peak.Load() >= limit {
		t.Errorf("heap peaked at %d MiB, over the %d MiB limit", peak.Load()>>20, limit>>20)
	}
	if got := pt.Last().BodyLen; ok > 0 && got != size {
		t.Errorf("the region got %d bytes of a body, want %d", got, size)
	}
}

// zeros reads as an endless run of 'x'.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

// TestFlowingStreamIsNotSilence: a region whose streams keep sending
// chunks is answering, however long the streams last. The region answers a
// first call in 1 s of the router's clock, then three endless streams
// start (the pool judges a region on three calls); the clock moves 2 s, past
// that slowest answer, and the chunks that keep arriving say the region is
// not silent. Told only of the streams' first bytes, the router would take
// it for silent from then on.
func TestFlowingStreamIsNotSilence(t *testing.T) {
	pt := startRegion(t, "europe-west1", table.TierProvisioned)
	hold := make(chan struct{})
	pt.set(func(b *upstreamtest.Behavior) { b.Hold = hold })
	pol := generous()
	pol.Ejection.MinRequests = 3
	r := startRouter(t, poolOf(pol, region(pt, 0)))

	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = r.post(generatePath, `{"contents":[{"parts":[{"text":"hi"}]}]}`, nil)
	}()
	<-pt.Started
	r.clock.Advance(time.Second)
	close(hold)
	<-done

	pt.set(func(b *upstreamtest.Behavior) { b.Hold, b.Endless = nil, true })
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	path := strings.Replace(generatePath, ":generateContent", ":streamGenerateContent?alt=sse", 1)
	flowing, ended := make(chan struct{}, 3), make(chan struct{}, 3)
	for range 3 {
		go func() {
			defer func() { ended <- struct{}{} }()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.http.URL+path, strings.NewReader(`{"contents":[{"parts":[{"text":"hi"}]}]}`))
			if err != nil {
				return
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return
			}
			defer func() { _ = resp.Body.Close() }()
			if _, err := io.ReadFull(resp.Body, make([]byte, 1024)); err != nil {
				return
			}
			flowing <- struct{}{}
			_, _ = io.Copy(io.Discard, resp.Body)
		}()
	}
	// The streams' first chunks have reached their callers (and the
	// router has heard them) before the clock moves.
	for range 3 {
		select {
		case <-flowing:
		case <-time.After(10 * time.Second):
			t.Fatal("the streams did not start")
		}
	}
	r.clock.Advance(2 * time.Second)
	waittest.For(t, 10*time.Second, "the region answering while its streams flow", func() bool { return !r.snapshotOf("europe-west1").Silent })
	cancel()
	for range 3 {
		<-ended
	}
}
