package server_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/genai"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/regionwarden/regionwarden/router/policy"
	"github.com/regionwarden/regionwarden/router/table"
	"github.com/regionwarden/regionwarden/router/upstream/upstreamtest"
)

// gaveUp is the outcome of an attempt whose caller went away.
const gaveUp = policy.Cancelled //nolint:misspell // the policy package's name

// streamText reads a whole stream through the SDK.
func streamText(c *genai.Client) (string, error) {
	var b strings.Builder
	for resp, err := range c.Models.GenerateContentStream(context.Background(), model, genai.Text("hi"), nil) {
		if err != nil {
			return b.String(), err
		}
		b.WriteString(resp.Text())
	}
	return b.String(), nil
}

// TestStreamRetriedBeforeFirstChunk: a stream that fails before any chunk
// reached the caller is retried in another region.
func TestStreamRetriedBeforeFirstChunk(t *testing.T) {
	pt := startRegion(t, "europe-west1", table.TierProvisioned)
	shared := startRegion(t, "us-central1", table.TierShared)
	pt.set(func(b *upstreamtest.Behavior) {
		b.Fault = func(int64) error { return status.Error(codes.Unavailable, "region down") }
	})
	r := startRouter(t, poolOf(generous(), region(pt, 0), region(shared, 0)))
	text, err := streamText(r.client(""))
	if err != nil {
		t.Fatal(err)
	}
	if text != "[us-central1 chunk 0][us-central1 chunk 1][us-central1 chunk 2]" {
		t.Errorf("streamed %q", text)
	}
	if pt.calls.Load() != 1 || shared.calls.Load() != 1 {
		t.Errorf("calls: provisioned %d, shared %d; want 1 each", pt.calls.Load(), shared.calls.Load())
	}
}

// TestStreamNotRetriedAfterFirstChunk: once a chunk reached the caller the
// answer is committed; a later failure ends the stream with an error the SDK
// reads, and is never retried.
func TestStreamNotRetriedAfterFirstChunk(t *testing.T) {
	pt := startRegion(t, "europe-west1", table.TierProvisioned)
	shared := startRegion(t, "us-central1", table.TierShared)
	pt.set(func(b *upstreamtest.Behavior) { b.FailAfterFirstChunk = true })
	r := startRouter(t, poolOf(generous(), region(pt, 0), region(shared, 0)))
	text, err := streamText(r.client(""))
	var apiErr genai.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != 503 || apiErr.Status != "UNAVAILABLE" {
		t.Fatalf("stream ended with %v, want a 503 UNAVAILABLE APIError", err)
	}
	if text != "[europe-west1 chunk 0]" {
		t.Errorf("streamed %q before the error", text)
	}
	if n := shared.calls.Load(); n != 0 {
		t.Errorf("a committed stream was retried: shared region got %d calls", n)
	}
	if got := r.attempts("europe-west1", "provisioned", policy.Failure); got != 1 {
		t.Errorf("attempts failure = %v, want 1", got)
	}
}

// TestCallerCancellationCancelsUpstream: when the caller gives up, the
// region's call is canceled, nothing is retried and the region is not blamed.
func TestCallerCancellationCancelsUpstream(t *testing.T) {
	for _, method := range []string{"generate", "stream"} {
		t.Run(method, func(t *testing.T) {
			pt := startRegion(t, "europe-west1", table.TierProvisioned)
			shared := startRegion(t, "us-central1", table.TierShared)
			pt.set(func(b *upstreamtest.Behavior) { b.Block = true })
			r := startRouter(t, poolOf(generous(), region(pt, 0), region(shared, 0)))
			c := r.client("")
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				if method == "generate" {
					_, err := c.Models.GenerateContent(ctx, model, genai.Text("hi"), nil)
					done <- err
					return
				}
				for _, err := range c.Models.GenerateContentStream(ctx, model, genai.Text("hi"), nil) {
					if err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
			<-pt.Started
			cancel()
			select {
			case err := <-pt.Ended:
				if !errors.Is(err, context.Canceled) {
					t.Errorf("region's call ended with %v, want canceled", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the region's call was not canceled")
			}
			if err := <-done; err == nil {
				t.Error("canceled call returned no error")
			}
			// The router reports the attempt after the region's call returns.
			deadline := time.Now().Add(10 * time.Second)
			for r.attempts("europe-west1", "provisioned", gaveUp) != 1 && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			if got := r.attempts("europe-west1", "provisioned", gaveUp); got != 1 {
				t.Errorf("attempts canceled = %v, want 1", got)
			}
			if n := shared.calls.Load(); n != 0 {
				t.Errorf("a canceled call was retried: shared region got %d calls", n)
			}
		})
	}
}
