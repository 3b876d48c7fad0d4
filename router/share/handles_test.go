package share

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/regionwarden/regionwarden/internal/proxytest"
	"github.com/regionwarden/regionwarden/internal/redisserver"
	"github.com/regionwarden/regionwarden/internal/waittest"
)

// TestHandlesAreSharedAndNotKept: a handle one router notes is read by
// another through a real Redis server, with its region and caller, for
// HandleTTL; the store holds the handle's hash, never the handle, which
// resumes its session for whoever holds it. A handle no router noted is
// unknown; with the store gone, the meter says it cannot tell.
func TestHandlesAreSharedAndNotKept(t *testing.T) {
	srv := redisserver.ForTest(t)
	a, b := newTestMeter(t, srv.URL(), "a"), newTestMeter(t, srv.URL(), "b")
	ctx := context.Background()
	const handle = "CiQ5NzQ2-the-session-handle"
	a.RememberHandle(handle, "us-central1", 0xabc)
	waittest.For(t, 10*time.Second, "the handle in the store", func() bool {
		_, _, ok, _ := b.HandleOf(ctx, handle)
		return ok
	})
	if region, caller, _, err := b.HandleOf(ctx, handle); region != "us-central1" || caller != 0xabc || err != nil {
		t.Fatalf("the other router reads %q, %x; want us-central1, abc", region, caller)
	}
	if _, _, ok, err := b.HandleOf(ctx, "another-handle"); ok || err != nil {
		t.Fatalf("a handle no router noted: known %v, %v; want unknown, and said so", ok, err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer func() { _ = rdb.Close() }()
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys %q (%v), want the handle's", keys, err)
	}
	v, _ := rdb.Get(ctx, keys[0]).Result()
	if strings.Contains(keys[0], handle) || strings.Contains(v, handle) {
		t.Fatalf("the store holds the handle: %q = %q", keys[0], v)
	}
	if ttl := rdb.TTL(ctx, keys[0]).Val(); ttl <= HandleTTL-time.Minute || ttl > HandleTTL {
		t.Fatalf("the handle is kept for %v, want %v", ttl, HandleTTL)
	}
	srv.Kill()
	if _, _, ok, err := b.HandleOf(ctx, handle); ok || !errors.Is(err, ErrHandlesUnknown) {
		t.Fatalf("the store gone: known %v, %v; want ErrHandlesUnknown", ok, err)
	}
}

// TestHandlesAreReadFromASlowStore: a store that answers in 100 ms, slower
// than the meter's 20 ms for a call's metering (a store in another zone on a
// bad day), still tells a router where a handle was issued: a resumption
// waits for it rather than be refused or sent where its state is not.
func TestHandlesAreReadFromASlowStore(t *testing.T) {
	srv := redisserver.ForTest(t)
	slow := proxytest.Start(t, srv.Addr)
	slow.DelayAnswers(100 * time.Millisecond)
	a := newTestMeter(t, srv.URL(), "a")
	b := meterWith(t, MeterOptions{URL: "redis://" + slow.Addr() + "/0", ID: "b", Timeout: DefaultMeterTimeout})
	ctx := context.Background()
	a.RememberHandle("the-handle", "europe-west4", 7)
	waittest.For(t, 10*time.Second, "the handle in the store", func() bool {
		_, _, ok, _ := a.HandleOf(ctx, "the-handle")
		return ok
	})
	if region, caller, ok, err := b.HandleOf(ctx, "the-handle"); !ok || err != nil || region != "europe-west4" || caller != 7 {
		t.Fatalf("through the slow store: %q, %d, known %v, %v; want europe-west4, 7", region, caller, ok, err)
	}
}
