package upstream

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/http/httpguts"
)

// h1 is the REST transport of one plaintext endpoint (Options.Insecure: the
// emulators, the tests and the data-plane benchmark): HTTP/1.1, each call
// written and its answer read by the goroutine that makes the call.
//
// Why not net/http's Transport, as over TLS: its HTTP/1.1 connections each
// run a read loop and a write loop, and a call crosses both on channels: two
// goroutine hand-offs and a context, a wanted-connection record, a cloned
// header and a transfer writer a call: about a sixth of the router's CPU a
// call in the data-plane benchmark (docs/dataplane.md). A proxy that sends
// one request at a time on a connection, and reads its answer before the
// next, needs none of it: the caller's goroutine writes the request in one
// write and parses the answer with net/http's own parser (http.ReadResponse),
// which also frames the body (Content-Length, chunked).
// Over TLS the transport stays net/http's: it speaks HTTP/2 to Google, where
// calls share connections and the loops are the protocol's.
//
// What net/http's loops gave is kept here:
//   - a connection the region closed while it was idle is not used: before a
//     reuse the connection is peeked without blocking (alive), where the read
//     loop would have seen the close; a request that could not be written at
//     all is sent again on a new connection, as net/http does;
//   - the call's context ends the call, body included: it closes the
//     connection (context.AfterFunc), and the call returns the context's error;
//   - a connection is reused only when its answer was read to the end and the
//     region did not say it closes it;
//   - idle connections are bounded in number (idleConnsPerHost) and age
//     (idleConnTimeout).
//
// Requests through an HTTP proxy from the environment (HTTP_PROXY) keep
// net/http's transport, which speaks to proxies.
type h1 struct {
	addr   string
	dialer net.Dialer

	mu     sync.Mutex
	idle   []*h1conn // most recently used last
	closed bool
}

// h1conn is one connection of an h1 and what it reuses from call to call.
type h1conn struct {
	t         *h1
	nc        net.Conn
	raw       syscall.RawConn // nil when the connection has no file descriptor
	br        *bufio.Reader
	wbuf      []byte      // the last request's head, reused for the next
	vec       [2][]byte   // the head and body of the request being written
	bufs      net.Buffers // vec as WriteTo consumes it: a field, so it is not allocated
	idleSince time.Time
	// peek is c.peekFD, and abortFn c.abort, bound once: alive and call
	// use them without allocating a method value each time.
	peek    func(fd uintptr) bool
	abortFn func()
	peekErr error
	reused  bool // had answered a call before this one
}

func newH1(addr string) *h1 {
	return &h1{addr: addr, dialer: net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}}
}

// closeIdle closes the idle connections; connections that come back from a
// call after it are closed, not kept.
func (t *h1) closeIdle() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.closed = true
	t.mu.Unlock()
	for _, c := range idle {
		_ = c.nc.Close()
	}
}

// get returns a connection for one call: the most recently used idle one that
// is still open, or a new one.
func (t *h1) get(ctx context.Context) (*h1conn, error) {
	for {
		t.mu.Lock()
		n := len(t.idle)
		if n == 0 {
			t.mu.Unlock()
			break
		}
		c := t.idle[n-1]
		t.idle[n-1] = nil
		t.idle = t.idle[:n-1]
		t.mu.Unlock()
		if time.Since(c.idleSince) < idleConnTimeout && c.alive() {
			c.reused = true
			return c, nil
		}
		_ = c.nc.Close()
	}
	nc, err := t.dialer.DialContext(ctx, "tcp", t.addr)
	if err != nil {
		return nil, err
	}
	c := &h1conn{t: t, nc: nc, br: bufio.NewReaderSize(nc, ioBuffer)}
	if sc, ok := nc.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			c.raw = raw
		}
	}
	c.peek, c.abortFn = c.peekFD, c.abort
	return c, nil
}

// put gives c back after a call whose answer it carried to the end. The
// oldest idle connection goes when it has been idle too long, so that a quiet
// endpoint does not hold connections the region has long closed.
func (t *h1) put(c *h1conn) {
	c.idleSince = time.Now()
	t.mu.Lock()
	if t.closed || len(t.idle) >= idleConnsPerHost {
		t.mu.Unlock()
		_ = c.nc.Close()
		return
	}
	t.idle = append(t.idle, c)
	var stale *h1conn
	if len(t.idle) > 1 && c.idleSince.Sub(t.idle[0].idleSince) >= idleConnTimeout {
		stale = t.idle[0]
		t.idle = append(t.idle[:0], t.idle[1:]...)
	}
	t.mu.Unlock()
	if stale != nil {
		_ = stale.nc.Close()
	}
}

// alive reports whether an idle connection is still open and has nothing
// to read: a region that closed it, or wrote to it unasked, makes it unfit
// for a call. The check is one non-blocking peek, no wait.
func (c *h1conn) alive() bool {
	if c.br.Buffered() > 0 {
		return false
	}
	if c.raw == nil {
		return true
	}
	if err := c.raw.Read(c.peek); err != nil {
		return false
	}
	// EAGAIN: open, nothing to read. No error: the region closed it (0
	// bytes) or sent something unasked.
	return errors.Is(c.peekErr, syscall.EAGAIN)
}

// send makes one call: POST path?query (path escaped, query as the caller
// sent it) with header and body, and returns the answer, whose body the
// caller reads and must close.
func (t *h1) send(ctx context.Context, path, query string, header http.Header, body []byte) (*http.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for {
		c, err := t.get(ctx)
		if err != nil {
			return nil, err
		}
		resp, retry, err := c.call(ctx, path, query, header, body)
		if retry {
			continue
		}
		return resp, err
	}
}

// call sends the request on c and reads the answer's head. retry says the
// request was not written at all on a reused connection: it may be sent again
// on another, as net/http's transport does.
func (c *h1conn) call(ctx context.Context, path, query string, header http.Header, body []byte) (resp *http.Response, retry bool, err error) {
	head, err := appendHead(c.wbuf[:0], c.t.addr, path, query, header, len(body))
	if err != nil {
		// Nothing was written: the connection serves the next call.
		c.t.put(c)
		return nil, false, err
	}
	if cap(head) <= maxKeptHead {
		c.wbuf = head
	}
	stop := context.AfterFunc(ctx, c.abortFn)
	// The head and the caller's body in one writev: one syscall, and the
	// body is not copied (it may be megabytes of inline media).
	c.vec = [2][]byte{head, body}
	c.bufs = c.vec[:]
	n, err := c.bufs.WriteTo(c.nc)
	c.vec, c.bufs = [2][]byte{}, nil
	if err != nil {
		stop()
		_ = c.nc.Close()
		if cerr := ctx.Err(); cerr != nil {
			return nil, false, cerr
		}
		return nil, n == 0 && c.reused, err
	}
	for {
		resp, err = http.ReadResponse(c.br, nil)
		if err != nil {
			stop()
			_ = c.nc.Close()
			if cerr := ctx.Err(); cerr != nil {
				return nil, false, cerr
			}
			return nil, false, fmt.Errorf("reading the answer of %s: %w", c.t.addr, err)
		}
		// An informational answer (103 Early Hints) comes before the
		// answer: skip it.
		if resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			continue
		}
		break
	}
	resp.Body = &h1body{c: c, rc: resp.Body, ctx: ctx, stop: stop, keep: !resp.Close}
	return resp, false, nil
}

// abort ends the call on c when its context ends: the read or write under
// way returns at once.
func (c *h1conn) abort() { _ = c.nc.Close() }

// h1body is an answer's body on an h1 connection: at its end the
// connection goes back to the endpoint's idle ones, if it can be reused.
type h1body struct {
	c    *h1conn
	rc   io.ReadCloser
	ctx  context.Context
	stop func() bool
	keep bool // the region keeps the connection open
	done bool
}

func (b *h1body) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.finish(true)
	} else if err != nil {
		b.finish(false)
		if cerr := b.ctx.Err(); cerr != nil {
			err = cerr
		}
	}
	return n, err
}

// Close ends the call; a body not read to its end closes the connection
// (reading the rest could take as long as the stream).
func (b *h1body) Close() error {
	if !b.done {
		b.finish(false)
	}
	return nil
}

// finish ends the call on the connection: back to the idle ones when the
// answer was read to the end, the region keeps it open, nothing more was sent
// and the context did not end it; closed otherwise.
func (b *h1body) finish(atEOF bool) {
	b.done = true
	c := b.c
	if b.stop() && atEOF && b.keep && c.br.Buffered() == 0 {
		_ = b.rc.Close()
		c.t.put(c)
		return
	}
	_ = c.nc.Close()
}

// maxKeptHead is the largest request head buffer a connection keeps for its
// next call; a larger one (a caller's outsized headers) is let go.
const maxKeptHead = 16 << 10

// appendHead appends to buf the head of an HTTP/1.1 POST to path?query on
// host, with header and a body of bodyLen bytes. A target, header name or
// value that could break the request's framing (a control character, a
// space in the target or a name, a colon in a name) is refused, with the
// checks net/http's transport makes (httpguts).
func appendHead(buf []byte, host, path, query string, header http.Header, bodyLen int) ([]byte, error) {
	if !validTarget(path) || !validTarget(query) {
		return nil, fmt.Errorf("upstream: invalid request target %q?%q", path, query)
	}
	buf = append(buf, "POST "...)
	buf = append(buf, path...)
	if query != "" {
		buf = append(buf, '?')
		buf = append(buf, query...)
	}
	buf = append(buf, " HTTP/1.1\r\nHost: "...)
	buf = append(buf, host...)
	buf = append(buf, "\r\n"...)
	for k, vs := range header {
		if !httpguts.ValidHeaderFieldName(k) {
			return nil, fmt.Errorf("upstream: invalid header name %q", k)
		}
		for _, v := range vs {
			if !httpguts.ValidHeaderFieldValue(v) {
				return nil, fmt.Errorf("upstream: invalid value of header %s", k)
			}
			buf = append(buf, k...)
			buf = append(buf, ": "...)
			buf = append(buf, v...)
			buf = append(buf, "\r\n"...)
		}
	}
	buf = append(buf, "Content-Length: "...)
	buf = strconv.AppendInt(buf, int64(bodyLen), 10)
	return append(buf, "\r\n\r\n"...), nil
}

// validTarget reports whether a request target has no byte that would end
// the request line early or smuggle a second one (a space, a control
// character), as net/http's transport checks before it writes a request.
func validTarget(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c == 0x7f {
			return false
		}
	}
	return true
}
