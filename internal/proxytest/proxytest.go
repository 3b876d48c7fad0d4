// Package proxytest is a TCP proxy for tests that need a server to go away
// and come back: it forwards every connection to an address until the test
// shuts it (every connection dropped, new ones accepted and closed at once,
// as a crashed server or a network cut looks to a client), opens it again,
// closes it for good, or delays what the server sends back.
package proxytest

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy forwards TCP connections to one address.
type Proxy struct {
	ln    net.Listener
	to    string
	mu    sync.Mutex
	open  bool
	conns []net.Conn
	delay time.Duration
}

// Start starts a proxy to the address to on loopback, closed when the test
// ends.
func Start(t testing.TB, to string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, to: to, open: true}
	go p.serve()
	t.Cleanup(p.Close)
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Shut drops every connection, and closes each new one at once, until Open.
func (p *Proxy) Shut() { p.set(false) }

// Open forwards connections again.
func (p *Proxy) Open() { p.set(true) }

// Close closes the listener and every connection: the server is gone for
// good, and connecting is refused.
func (p *Proxy) Close() {
	_ = p.ln.Close()
	p.set(false)
}

// DelayAnswers delays each write of what the server sends back by d, on
// connections made from now on.
func (p *Proxy) DelayAnswers(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
}

func (p *Proxy) set(open bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.open = open
	if !open {
		for _, c := range p.conns {
			_ = c.Close()
		}
		p.conns = nil
	}
}

func (p *Proxy) serve() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.to)
		p.mu.Lock()
		if err != nil || !p.open {
			p.mu.Unlock()
			_ = in.Close()
			if out != nil {
				_ = out.Close()
			}
			continue
		}
		p.conns = append(p.conns, in, out)
		delay := p.delay
		p.mu.Unlock()
		go func() { _, _ = io.Copy(out, in); _ = out.Close() }()
		go func() { _, _ = io.Copy(delayed{in, delay}, out); _ = in.Close() }()
	}
}

// delayed writes to w after a delay.
type delayed struct {
	w io.Writer
	d time.Duration
}

func (d delayed) Write(b []byte) (int, error) {
	if d.d > 0 {
		time.Sleep(d.d)
	}
	return d.w.Write(b)
}
