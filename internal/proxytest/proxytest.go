// Package proxytest is tcpproxy for tests: a TCP proxy for tests that need a
// server to go away and come back, closed when the test ends.
package proxytest

import (
	"testing"

	"github.com/regionwarden/regionwarden/internal/tcpproxy"
)

// Proxy forwards TCP connections to one address (tcpproxy.Proxy).
type Proxy = tcpproxy.Proxy

// Start starts a proxy to the address to on loopback, closed when the test
// ends.
func Start(t testing.TB, to string) *Proxy {
	t.Helper()
	p, err := tcpproxy.New(to)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}
