package share

import (
	"context"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/regionwarden/regionwarden/internal/redisserver"
	"github.com/regionwarden/regionwarden/router/table"
)

// TestExchangeSnapshotIsShared has three routers exchange through a real
// Redis server: every one of them reads the same closed epoch, and the
// shares they compute from it add up to one.
func TestExchangeSnapshotIsShared(t *testing.T) {
	srv := redisserver.ForTest(t)
	ctx := context.Background()
	var xs []*Exchange
	for _, id := range []string{"a", "b", "c"} {
		x, err := NewExchange(ExchangeOptions{URL: srv.URL(), ID: id, Epoch: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = x.Close() })
		xs = append(xs, x)
	}
	demand := []float64{70, 20, 10}
	// Publish for a few epochs, then compare what each read last.
	var last [3][]Peer
	for range 8 {
		for i, x := range xs {
			got, err := x.Exchange(ctx, 3, map[string]Entry{"p/google/m": {Demand: demand[i]}})
			if err != nil {
				t.Fatal(err)
			}
			last[i] = got["p/google/m"]
		}
		time.Sleep(100 * time.Millisecond)
	}
	sum := 0.0
	for i, x := range xs {
		s, ok := Allocate(last[i], x.ID())
		if !ok {
			t.Fatalf("router %s is not in the epoch it read: %v", x.ID(), last[i])
		}
		if math.Abs(s-demand[i]/100) > 1e-9 {
			t.Errorf("router %s: share %v, want %v", x.ID(), s, demand[i]/100)
		}
		sum += s
	}
	if math.Abs(sum-1) > 1e-9 {
		t.Errorf("shares add up to %v", sum)
	}
}

// TestDemandShareAndStoreLoss runs three controllers exchanging through a
// real Redis server, with calls split 70/20/10: their shares follow the
// split and never add up to more than one. Then the server is killed: each
// router is back on its static third within MaxAge and an exchange (a
// shrinking share), or that plus the grow delay (a growing one).
func TestDemandShareAndStoreLoss(t *testing.T) {
	srv := redisserver.ForTest(t)
	const (
		interval = 50 * time.Millisecond
		maxAge   = 150 * time.Millisecond
		grow     = 300 * time.Millisecond
	)
	pool := testPool()
	key := pool.Key()
	split := []float64{0.7, 0.2, 0.1}
	var cs []*Controller
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for _, id := range []string{"a", "b", "c"} {
		x, err := NewExchange(ExchangeOptions{URL: srv.URL(), ID: id, Epoch: 2 * interval})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = x.Close() })
		var a applied
		c := New(Options{Apply: a.apply, Replicas: Static(3), Store: x, Interval: interval, MaxAge: maxAge, GrowDelay: grow})
		if err := c.SetTable(&table.Table{Version: table.Version, Pools: []table.Pool{pool}}); err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
		wg.Add(1)
		go func() { defer wg.Done(); _ = c.Run(ctx) }()
	}
	// Calls split 70/20/10: every 10 ms, 7, 2 and 1 calls (from one loop,
	// so that a busy machine cannot skew the split).
	load, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-load.Done():
				return
			case now := <-tick.C:
				for i, c := range cs {
					for range int(split[i] * 10) {
						c.Demand(key).Add(now.UnixNano())
					}
				}
			}
		}
	}()
	shares := func() []float64 {
		var out []float64
		for _, c := range cs {
			out = append(out, c.Shares()[0].Share)
		}
		return out
	}
	worst := 0.0
	deadline := time.Now().Add(5 * time.Second)
	for {
		s := shares()
		worst = max(worst, s[0]+s[1]+s[2])
		if math.Abs(s[0]-0.7) < 0.05 && math.Abs(s[1]-0.2) < 0.05 && math.Abs(s[2]-0.1) < 0.05 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("shares %v after 5s, want about 0.7, 0.2, 0.1 (sources %+v)", s, cs[0].Shares())
		}
		time.Sleep(10 * time.Millisecond)
	}
	for range 50 {
		s := shares()
		worst = max(worst, s[0]+s[1]+s[2])
		time.Sleep(10 * time.Millisecond)
	}
	if worst > 1+1e-9 {
		t.Errorf("the shares added up to %v at worst", worst)
	}
	t.Logf("demand shares %v (sum at worst %.4f), source %q", shares(), worst, cs[0].Shares()[0].Source)

	killed := time.Now()
	srv.Kill()
	var shrunk, all time.Duration
	for {
		s := shares()
		if shrunk == 0 && math.Abs(s[0]-1.0/3) < 1e-9 {
			shrunk = time.Since(killed)
		}
		if math.Abs(s[0]-1.0/3)+math.Abs(s[1]-1.0/3)+math.Abs(s[2]-1.0/3) < 1e-9 {
			all = time.Since(killed)
			break
		}
		if time.Since(killed) > 5*time.Second {
			t.Fatalf("shares %v 5s after the store was killed, want a third each", s)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("store killed: the busiest router on its static share after %v, every router after %v", shrunk, all)
	if shrunk > maxAge+3*interval {
		t.Errorf("the busiest router shrank to its static share %v after the store died, want within %v", shrunk, maxAge+3*interval)
	}
	if src := cs[0].Shares()[0]; src.StoreError == "" {
		t.Errorf("no store error shown after the store died: %+v", src)
	}
}

// TestBadStoreURLKeepsItsPasswordSecret: an error about the store's URL
// names it without its password, which would otherwise reach the logs.
func TestBadStoreURLKeepsItsPasswordSecret(t *testing.T) {
	for _, u := range []string{
		"redis://router:hunter2@localhost:6379/notadb",
		"redis://:hunter2@localhost:6379/0?dial_timeout=forever",
		"http://router:hunter2@localhost:6379/0",
	} {
		_, xerr := NewExchange(ExchangeOptions{URL: u, ID: "a"})
		_, merr := NewMeter(MeterOptions{URL: u, ID: "a"})
		for _, err := range []error{xerr, merr} {
			if err == nil {
				t.Errorf("%s: accepted", u)
				continue
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the error shows the password: %v", err)
			}
			if !strings.Contains(err.Error(), "localhost:6379") {
				t.Errorf("the error does not name the store: %v", err)
			}
		}
	}
	// A URL that does not parse: url.Parse's own error quotes it whole.
	for _, u := range []string{"redis://:hunter2@local host:6379/0", "redis://router:hunter2@localhost:port/0"} {
		_, xerr := NewExchange(ExchangeOptions{URL: u, ID: "a"})
		_, merr := NewMeter(MeterOptions{URL: u, ID: "a"})
		for _, err := range []error{xerr, merr} {
			if err == nil || strings.Contains(err.Error(), "hunter2") {
				t.Errorf("%s: error %v; want one that does not show the password", u, err)
			}
		}
	}
}
