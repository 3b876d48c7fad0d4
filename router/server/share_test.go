package server_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/regionwarden/regionwarden/router/server"
	"github.com/regionwarden/regionwarden/router/share"
	"github.com/regionwarden/regionwarden/router/table"
)

// TestShares runs the server under a share controller, as cmd/router does:
// the controller applies the table scaled by the share, each call counts in
// its pool's demand, refused or not, and /debug/pools shows the share in
// force and the hash of the table as its source gave it.
func TestShares(t *testing.T) {
	a := startRegion(t, "us-central1", table.TierShared)
	var srv *server.Server
	var ctl *share.Controller
	r := startRouterWith(t, func(o *server.Options) {
		ctl = share.New(share.Options{Apply: func(tb *table.Table) error { return srv.Apply(tb) }, Replicas: share.Static(2), Now: o.Now})
		o.Shares = ctl
		// Calls that have no time to wait for the next second's room
		// (policy.Call.PickWaiting) are refused at once.
		o.RequestTimeout = time.Second
	})
	srv = r.srv
	// 2 calls a second for the cluster: 1 for each of 2 routers. The clock
	// stands still, so this router's second and third calls find no room.
	tbl := &table.Table{Version: table.Version, Pools: []table.Pool{poolOf(generous(), region(a, 2))}}
	if err := ctl.SetTable(tbl); err != nil {
		t.Fatal(err)
	}
	for i, want := range []int{http.StatusOK, http.StatusTooManyRequests, http.StatusTooManyRequests} {
		if resp, body := r.post(generatePath, `{"contents":[{"parts":[{"text":"hi"}]}]}`, nil); resp.StatusCode != want {
			t.Fatalf("call %d answered %d, want %d: %s", i+1, resp.StatusCode, want, body)
		}
	}
	code, body := r.get("/debug/pools")
	var dbg struct {
		TableHash string            `json:"tableHash"`
		Shares    []share.PoolShare `json:"shares"`
	}
	if err := json.Unmarshal([]byte(body), &dbg); code != http.StatusOK || err != nil {
		t.Fatalf("/debug/pools: %d %v: %s", code, err, body)
	}
	if dbg.TableHash != tbl.Hash() {
		t.Errorf("tableHash %q, want the source table's %q", dbg.TableHash, tbl.Hash())
	}
	if len(dbg.Shares) != 1 {
		t.Fatalf("shares: %s", body)
	}
	s := dbg.Shares[0]
	// Three calls count as demand, the refused ones included: at least 3
	// over the whole window.
	if s.Share != 0.5 || s.Replicas != 2 || s.Source != "--replicas 2" || s.Demand < 3/share.DemandWindow.Seconds() {
		t.Errorf("share in force %+v, want 0.5 of 2 replicas from --replicas, and a demand of all 3 calls", s)
	}
}
