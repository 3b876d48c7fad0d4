package emulator

import (
	"bytes"
	"io"
	"net"
	"sync"
	"time"
)

// http2Preface opens every HTTP/2 connection made with prior knowledge, as
// gRPC over plaintext is; an HTTP/1.1 request starts with its method.
const http2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// sniffTimeout bounds how long a new connection may take to send its first
// bytes before it is dropped.
const sniffTimeout = 10 * time.Second

// protocolMux serves gRPC and Vertex REST on one address, as Google's
// regional endpoints do (there told apart by ALPN over TLS; here, in
// plaintext, by the connection's first bytes): a connection that opens with
// the HTTP/2 preface goes to the gRPC listener, any other to the REST one. A
// router whose table names one endpoint per region calls both surfaces there.
type protocolMux struct {
	base       net.Listener
	grpc, rest *muxListener
	closeOnce  sync.Once
}

// newProtocolMux starts sorting the connections base accepts until base is
// closed, which closing either side does.
func newProtocolMux(base net.Listener) *protocolMux {
	m := &protocolMux{base: base}
	m.grpc = &muxListener{m: m, conns: make(chan net.Conn), done: make(chan struct{})}
	m.rest = &muxListener{m: m, conns: make(chan net.Conn), done: make(chan struct{})}
	go m.serve()
	return m
}

func (m *protocolMux) serve() {
	for {
		c, err := m.base.Accept()
		if err != nil {
			m.close()
			return
		}
		go m.route(c)
	}
}

// route reads the first bytes of c and hands it, those bytes included, to
// the side they name.
func (m *protocolMux) route(c net.Conn) {
	head := make([]byte, 3)
	_ = c.SetReadDeadline(time.Now().Add(sniffTimeout))
	if _, err := io.ReadFull(c, head); err != nil {
		_ = c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	to := m.rest
	if bytes.Equal(head, []byte(http2Preface[:3])) {
		to = m.grpc
	}
	select {
	case to.conns <- &prefixConn{Conn: c, prefix: head}:
	case <-to.done:
		_ = c.Close()
	}
}

func (m *protocolMux) close() {
	m.closeOnce.Do(func() {
		_ = m.base.Close()
		close(m.grpc.done)
		close(m.rest.done)
	})
}

// muxListener is one side of a protocolMux.
type muxListener struct {
	m     *protocolMux
	conns chan net.Conn
	done  chan struct{}
}

func (l *muxListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close closes the shared address: both sides stop.
func (l *muxListener) Close() error { l.m.close(); return nil }

func (l *muxListener) Addr() net.Addr { return l.m.base.Addr() }

// prefixConn is a connection whose first bytes were already read.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}
