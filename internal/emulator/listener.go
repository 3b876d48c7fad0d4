package emulator

import (
	"net"
	"sync"
)

// dropListener is a listener that can drop every connection it accepted, and
// closes new ones at once while refuse says so: how a region in a "refused"
// outage looks from the client, a transport failure on every call.
type dropListener struct {
	net.Listener
	refuse func() bool

	mu    sync.Mutex
	conns map[*trackedConn]struct{}
}

func newDropListener(l net.Listener, refuse func() bool) *dropListener {
	return &dropListener{Listener: l, refuse: refuse, conns: map[*trackedConn]struct{}{}}
}

// Accept returns the next connection that is not refused.
func (l *dropListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.refuse != nil && l.refuse() {
			_ = c.Close()
			continue
		}
		tc := &trackedConn{Conn: c, owner: l}
		l.mu.Lock()
		l.conns[tc] = struct{}{}
		l.mu.Unlock()
		return tc, nil
	}
}

// dropAll closes every open connection.
func (l *dropListener) dropAll() {
	l.mu.Lock()
	conns := make([]*trackedConn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// trackedConn removes itself from its listener's set when closed.
type trackedConn struct {
	net.Conn
	owner *dropListener
	once  sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.owner.mu.Lock()
		delete(c.owner.conns, c)
		c.owner.mu.Unlock()
	})
	return c.Conn.Close()
}
