package tcpproxy

import (
	"bufio"
	"net"
	"testing"
)

// echo serves one line back on every connection, until the test ends.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				line, err := bufio.NewReader(c).ReadString('\n')
				if err == nil {
					_, _ = c.Write([]byte(line))
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// roundTrip sends a line to addr and reports whether it came back.
func roundTrip(addr string) bool {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return false
	}
	defer func() { _ = c.Close() }()
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && line == "ping\n"
}

// TestShutOpenClose: the proxy forwards until shut, again once opened, and
// never after it is closed, while the server still answers directly.
func TestShutOpenClose(t *testing.T) {
	srv := echo(t)
	p, err := New(srv)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if !roundTrip(p.Addr()) {
		t.Fatal("no answer through the proxy")
	}
	p.Shut()
	if roundTrip(p.Addr()) {
		t.Error("an answer through the shut proxy")
	}
	p.Open()
	if !roundTrip(p.Addr()) {
		t.Error("no answer through the proxy opened again")
	}
	p.Close()
	if roundTrip(p.Addr()) {
		t.Error("an answer through the closed proxy")
	}
	if !roundTrip(srv) {
		t.Error("the server does not answer directly after the proxy closed")
	}
}
