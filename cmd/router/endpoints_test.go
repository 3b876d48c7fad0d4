package main

import (
	"net/http"
	"strings"
	"testing"
)

// TestOffGoogleEndpointNeedsAllowance: a table whose region is not a Google
// API host is refused (and counted) unless --allow-endpoint-host names the
// host; the router then serves nothing from it, so no call, and no
// credential, goes there.
func TestOffGoogleEndpointNeedsAllowance(t *testing.T) {
	a := startRegion(t, "us-central1")
	dir := t.TempDir()
	kubeletWrite(t, dir, 1, renderTable(t, a))

	strict := startRouter(t, "--table-file", dir, "--allow-endpoint-host", "localhost,10.0.0.1")
	eventually(t, "the table refused for its endpoint", func() bool {
		return strings.Contains(strict.metrics(t), `regionwarden_router_table_rejections_total{reason="endpoint"} 1`)
	})
	resp, err := http.Get("http://" + strict.ops + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		t.Error("the router is ready on a table it refused")
	}
	if got, err := answer(strict.client(t)); err == nil {
		t.Errorf("the router answered %q from a region its table may not name", got)
	}

	allowed := startRun(t, "--table-file", dir)
	eventually(t, "routing to the allowed host", func() bool {
		got, err := answer(allowed.client(t))
		return err == nil && got == "us-central1"
	})
}
