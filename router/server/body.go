package server

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"runtime/debug"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
)

// budget bounds the bytes of request bodies held at once, all requests
// together, so that no mix of callers can make the router hold more body
// bytes than its memory allows. It takes no lock.
type budget struct {
	max  int64
	used atomic.Int64
}

// take holds n bytes, or nothing and false when they do not fit.
func (b *budget) take(n int64) bool {
	if b.used.Add(n) > b.max {
		b.used.Add(-n)
		return false
	}
	return true
}

// full is what a request the budget has no room for is told.
func (b *budget) full() string {
	return fmt.Sprintf("the router holds as many request bytes as it may (%d); retry shortly", b.max)
}

// give returns n bytes taken.
func (b *budget) give(n int64) { b.used.Add(-n) }

// defaultBodiesInFlight is a quarter of the Go memory limit when one is set
// (GOMEMLIMIT, which the manifests take from the container's limit): the
// bodies, the answers relayed and the runtime's own share fit under it with
// room for the collector to work. Without a limit, DefaultMaxBodyBytesInFlight.
func defaultBodiesInFlight() int64 {
	if lim := debug.SetMemoryLimit(-1); lim > 0 && lim < math.MaxInt64 {
		return lim / 4
	}
	return DefaultMaxBodyBytesInFlight
}

// chunkedStep is how much more of the budget a body of unknown length takes
// each time it outgrows what it holds: the first step, then doubling.
const chunkedStep = 16 << 10

// readBody reads the caller's body within the body read deadline, its bytes
// held in the budget until the exchange ends. A body whose length is known
// is held whole before any of it is read; one sent in chunks is held as it
// grows. It answers and returns false when the body is too large, does not
// fit the budget, or does not arrive in time.
func (x *exchange) readBody() bool {
	n := x.r.ContentLength
	if n > x.s.maxBody {
		x.fail(http.StatusRequestEntityTooLarge, codes.InvalidArgument, fmt.Sprintf("request body larger than %d bytes", x.s.maxBody), 0)
		return false
	}
	if n == 0 {
		return true
	}
	if n > 0 && !x.hold(n) {
		return false
	}
	_ = x.rc.SetReadDeadline(time.Now().Add(x.s.bodyTimeout))
	defer func() { _ = x.rc.SetReadDeadline(time.Time{}) }()
	var buf []byte
	var err error
	if n > 0 {
		buf = make([]byte, n)
		_, err = io.ReadFull(x.r.Body, buf)
	} else if buf, err = x.readChunked(); buf == nil && err == nil {
		return false // answered
	}
	if err != nil {
		x.w.Header().Set("Connection", "close")
		var ne interface{ Timeout() bool }
		if errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
			x.fail(http.StatusRequestTimeout, codes.DeadlineExceeded, fmt.Sprintf("request body not received within %s", x.s.bodyTimeout), 0)
		} else {
			x.fail(http.StatusBadRequest, codes.InvalidArgument, "reading the request body: "+err.Error(), 0)
		}
		return false
	}
	x.req.Body = buf
	return true
}

// readChunked reads a body of unknown length, taking budget as it grows. It
// returns nil and no error when it answered.
func (x *exchange) readChunked() ([]byte, error) {
	buf := make([]byte, 0, chunkedStep)
	if !x.hold(chunkedStep) {
		return nil, nil
	}
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) > x.s.maxBody {
				x.w.Header().Set("Connection", "close")
				x.fail(http.StatusRequestEntityTooLarge, codes.InvalidArgument, fmt.Sprintf("request body larger than %d bytes", x.s.maxBody), 0)
				return nil, nil
			}
			grow := min(int64(cap(buf)), x.s.maxBody+1-int64(cap(buf)))
			if !x.hold(grow) {
				return nil, nil
			}
			buf = append(buf, make([]byte, grow)...)[:len(buf)]
		}
		m, err := x.r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// hold takes n more bytes of the body budget for the exchange, or answers
// 429 and returns false.
func (x *exchange) hold(n int64) bool {
	if !x.s.bodies.take(n) {
		x.w.Header().Set("Connection", "close")
		x.fail(http.StatusTooManyRequests, codes.ResourceExhausted, x.s.bodies.full(), time.Second)
		return false
	}
	x.held += n
	return true
}
