package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/regionwarden/regionwarden/internal/redisserver"
	"github.com/regionwarden/regionwarden/router/upstream"
)

// TestShareStoreMetersOneQuota runs three routers (--replicas 3) with a
// real Redis server as their share store, in front of a region with a quota
// of 6 requests a second, and sends every call to one of them, as
// keep-alive pins a client to one router: with the store, that router may
// use the whole quota, which the store meters for all three; with the store
// killed, it falls back to its share, 2 a second, at once.
func TestShareStoreMetersOneQuota(t *testing.T) {
	srv := redisserver.ForTest(t)
	region := startRegion(t, "us-central1")
	dir := t.TempDir()
	kubeletWrite(t, dir, 1, renderTableOf(t, region.TableRegion(6)))
	var routers []*started
	for range 3 {
		s := startRun(t, "--table-file", dir, "--replicas", "3", "--share-store", srv.URL())
		s.waitReady(t)
		routers = append(routers, s)
	}
	first := routers[0]
	// A caller that gives a call 0.2 s: a full quota that has room only
	// later than half of that is answered 429 at once rather than waited for.
	call := func() int {
		req, err := http.NewRequest(http.MethodPost, "http://"+first.api+generatePath, strings.NewReader(`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer caller")
		req.Header.Set(upstream.HeaderServerTimeout, "0.2")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	burst := func(n int) (ok, throttled int) {
		for range n {
			switch code := call(); code {
			case http.StatusOK:
				ok++
			case http.StatusTooManyRequests:
				throttled++
			default:
				t.Fatalf("status %d", code)
			}
		}
		return ok, throttled
	}

	if ok, throttled := burst(8); ok != 6 || throttled != 2 {
		t.Errorf("with the store: %d answered and %d throttled of 8 calls in a burst, want the whole quota, 6, and 2", ok, throttled)
	}
	if got := sample(first.metrics(t), "regionwarden_router_share_store_up"); got != "regionwarden_router_share_store_up 1" {
		t.Errorf("with the store: %q", got)
	}
	srv.Kill()
	// Once the burst has left the quota's second, the router's share alone.
	time.Sleep(1200 * time.Millisecond)
	if ok, throttled := burst(4); ok != 2 || throttled != 2 {
		t.Errorf("store killed: %d answered and %d throttled of 4 calls in a burst, want the router's share, 2, and 2", ok, throttled)
	}
	if got := sample(first.metrics(t), "regionwarden_router_share_store_up"); got != "regionwarden_router_share_store_up 0" {
		t.Errorf("store killed: %q", got)
	}
	if n := region.Counter().Load(); n != 8 {
		t.Errorf("the region received %d calls, want 8", n)
	}
}

// sample is the line of metrics text that holds series name without labels.
func sample(text, name string) string {
	for l := range strings.SplitSeq(text, "\n") {
		if strings.HasPrefix(l, name+" ") {
			return l
		}
	}
	return ""
}

// TestShareStorePasswordFromTheEnvironment: a store that requires a
// password is used with the one in REGIONWARDEN_SHARE_STORE_PASSWORD (set
// from a Secret, out of the router's arguments); a router without it finds
// the store refusing it and meters its share.
func TestShareStorePasswordFromTheEnvironment(t *testing.T) {
	srv := redisserver.ForTest(t)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	if err := admin.ConfigSet(context.Background(), "requirepass", "s3cret").Err(); err != nil {
		t.Fatal(err)
	}
	_ = admin.Close()
	region := startRegion(t, "us-central1")
	dir := t.TempDir()
	kubeletWrite(t, dir, 1, renderTableOf(t, region.TableRegion(6)))
	without := startRun(t, "--table-file", dir, "--share-store", srv.URL())
	t.Setenv(shareStorePasswordEnv, "s3cret")
	with := startRun(t, "--table-file", dir, "--share-store", srv.URL())
	for _, tc := range []struct {
		s    *started
		want string
	}{{with, "regionwarden_router_share_store_up 1"}, {without, "regionwarden_router_share_store_up 0"}} {
		tc.s.waitReady(t)
		if _, err := answer(tc.s.client(t)); err != nil {
			t.Fatal(err)
		}
		if got := sample(tc.s.metrics(t), "regionwarden_router_share_store_up"); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}
