package redisserver

import (
	"strings"
	"testing"
)

// TestLinkCutsOneWayOff: a link forwards to the server until it is cut;
// then the server still answers directly and the link refuses.
func TestLinkCutsOneWayOff(t *testing.T) {
	s := ForTest(t)
	l, err := s.Link()
	if err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimSuffix(strings.TrimPrefix(l.URL(), "redis://"), "/0")
	if err := ping(addr); err != nil {
		t.Fatalf("PING through the link: %v", err)
	}
	l.Cut()
	if err := ping(addr); err == nil {
		t.Error("PING through the cut link answered")
	}
	if err := ping(s.Addr); err != nil {
		t.Errorf("PING to the server after the link was cut: %v", err)
	}
}
