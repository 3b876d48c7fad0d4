// Package tcpproxy is a TCP proxy that can make a server go away for its
// clients and come back: it forwards every connection to an address until
// it is shut (every connection dropped, new ones accepted and closed at once,
// as a crashed server or a network cut looks to a client), opened again,
// closed for good (connecting is refused), or made to delay what the server
// sends back. The replays cut one router off from the share store with it;
// tests use it through proxytest.
package tcpproxy

import (
	"io"
	"net"
	"sync"
	"time"
)

// Proxy forwards TCP connections to one address.
type Proxy struct {
	ln    net.Listener
	to    string
	mu    sync.Mutex
	open  bool
	conns map[net.Conn]struct{} // both ends of every connection forwarded now
	delay time.Duration
}

// New starts a proxy to the address to on loopback.
func New(to string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, to: to, open: true, conns: map[net.Conn]struct{}{}}
	go p.serve()
	return p, nil
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
		for c := range p.conns {
			_ = c.Close()
		}
		clear(p.conns)
	}
}

func (p *Proxy) serve() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		// While shut the server is not dialed: it sees nothing of the
		// client, as behind a cut.
		if !p.isOpen() {
			_ = in.Close()
			continue
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
		p.conns[in], p.conns[out] = struct{}{}, struct{}{}
		delay := p.delay
		p.mu.Unlock()
		var both sync.WaitGroup
		both.Go(func() { _, _ = io.Copy(out, in); _ = out.Close() })
		both.Go(func() { _, _ = io.Copy(delayed{in, delay}, out); _ = in.Close() })
		go func() {
			both.Wait()
			p.mu.Lock()
			defer p.mu.Unlock()
			delete(p.conns, in)
			delete(p.conns, out)
		}()
	}
}

func (p *Proxy) isOpen() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.open
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
