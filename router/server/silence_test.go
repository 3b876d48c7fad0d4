package server_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/regionwarden/regionwarden/router/table"
	"github.com/regionwarden/regionwarden/router/upstream/upstreamtest"
)

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
	eventually(t, 10*time.Second, "the region answering while its streams flow", func() bool { return !r.snapshotOf("europe-west1").Silent })
	cancel()
	for range 3 {
		<-ended
	}
}
