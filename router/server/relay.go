package server

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/regionwarden/regionwarden/router/policy"
	"github.com/regionwarden/regionwarden/router/upstream"
)

// gaveUp is the outcome of an attempt whose caller went away.
const gaveUp = policy.Cancelled //nolint:misspell // the policy package's name

// relayBuffer is the buffer an answer passes through. A unary answer that
// fits is read whole before any of it is written, so that a region that
// breaks off in the middle of one can still be retried elsewhere, and is sent
// with its length in one write.
const relayBuffer = 32 << 10

// relayBuffers reuses relay buffers across requests: a relay reads into one
// and writes from it before it returns, so none outlives its request.
var relayBuffers = sync.Pool{New: func() any {
	b := make([]byte, relayBuffer)
	return &b
}}

// relay passes a region's 200 answer on to the caller as its bytes arrive,
// reading on the way only what the router needs (AnswerScanner): the tokens
// the answer used, the traffic type that served it, and an error a stream
// ends with. A stream's chunks are flushed as they come. Until the answer's
// first bytes arrive nothing is written, and the attempt can fail and be
// retried; from then on the answer is committed. Each write must complete
// within the write timeout, or the caller is cut off and the call ends.
func (x *exchange) relay(resp *http.Response) (policy.Report, bool, error) {
	defer func() { _ = resp.Body.Close() }()
	sse := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	stream := x.streams(sse)
	sse = stream && sse
	framing := upstream.FrameObject
	if stream && !sse {
		framing = upstream.FrameArray
	}
	x.scan.Reset(framing)
	bp := relayBuffers.Get().(*[]byte)
	defer relayBuffers.Put(bp)
	buf := *bp

	n, err := x.read(resp.Body, buf, stream)
	if n == 0 && err != nil && !errors.Is(err, io.EOF) {
		return x.report(err), false, err
	}
	h := x.w.Header()
	upstream.AnswerHeader(h, resp.Header)
	if !stream && errors.Is(err, io.EOF) {
		// The whole answer is here: it is counted before the caller has it.
		h["Content-Length"] = []string{strconv.Itoa(n)}
		_, _ = x.scan.Write(buf[:n])
		x.count()
		x.settle(policy.Report{Outcome: policy.Success, Tokens: x.scan.Tokens})
		x.status = http.StatusOK
		x.w.WriteHeader(http.StatusOK)
		if x.write(buf[:n], false) != nil || x.flush() != nil {
			x.abort = true
		}
		return policy.Report{Outcome: policy.Success, Tokens: x.scan.Tokens}, true, nil
	}
	x.status = http.StatusOK
	x.w.WriteHeader(http.StatusOK)
	for {
		if n > 0 {
			if stream {
				// The region is answering: a stream may last minutes,
				// and the policy must not take it for a silent region.
				x.att.Heard()
			}
			_, _ = x.scan.Write(buf[:n])
			if x.scan.Err != codes.OK && !x.settled {
				// The region ends the stream with an error of its own,
				// which the caller gets as it is: the attempt is committed,
				// and counted before the caller can see it.
				x.count()
				x.settle(x.streamError())
			}
			if werr := x.write(buf[:n], stream); werr != nil {
				// The caller is gone or stopped reading: closing the
				// answer's body ends the region's call, and the
				// connection is cut rather than written to again.
				x.abort = true
				return policy.Report{Outcome: gaveUp, Tokens: x.scan.Tokens}, true, werr
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			// Counted before the caller can see how it ended, as an
			// error the region sent is.
			rep := x.report(err)
			rep.Tokens = x.scan.Tokens
			x.settle(rep)
			x.breakOff(err, sse)
			return rep, true, err
		}
		n, err = x.read(resp.Body, buf, stream)
	}
	if !stream {
		if werr := x.flush(); werr != nil {
			x.abort = true
			return policy.Report{Outcome: gaveUp, Tokens: x.scan.Tokens}, true, werr
		}
	}
	if x.scan.Err != codes.OK {
		return x.streamError(), true, status.Error(x.scan.Err, "the region ended the stream with an error")
	}
	x.count()
	return policy.Report{Outcome: policy.Success, Tokens: x.scan.Tokens}, true, nil
}

// streams reports whether the answer is a stream, relayed chunk by chunk:
// always for streamGenerateContent and streamRawPredict; for a chat
// completion or a rawPredict when the region answers server-sent events
// (the body asked "stream": true, and the router does not decode the body
// to know).
func (x *exchange) streams(sse bool) bool {
	switch x.method {
	case methodStream, methodStreamRaw:
		return true
	case methodChat, methodRaw:
		return sse
	}
	return false
}

// streamError is what the policy learns from a stream the region ended with
// an error.
func (x *exchange) streamError() policy.Report {
	rep := x.report(status.Error(x.scan.Err, "the region ended the stream with an error"))
	rep.Tokens = x.scan.Tokens
	return rep
}

// count counts the answer by the traffic type that served it.
func (x *exchange) count() {
	switch x.method {
	case methodCount, methodCompute, methodPredict, methodEmbed:
		return // no generation, no traffic type to count
	}
	traffic := x.scan.TrafficType
	if traffic == "" {
		traffic = "TRAFFIC_TYPE_UNSPECIFIED"
	}
	x.pool.series.traffic(&x.target.Region, traffic)
	x.answered(x.scan.InputTokens, x.scan.OutputTokens, x.scan.TrafficType)
}

// read reads the next piece of an answer: for a stream whatever has arrived,
// for a unary answer as much as fills buf. An answer that ended reads io.EOF.
func (x *exchange) read(body io.Reader, buf []byte, stream bool) (int, error) {
	if !stream {
		n, err := io.ReadFull(body, buf)
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = io.EOF
		}
		return n, err
	}
	for {
		n, err := body.Read(buf)
		if n > 0 || err != nil {
			return n, err
		}
	}
}

// write writes p to the caller within the write timeout, and flushes it when
// asked (a stream's chunk).
func (x *exchange) write(p []byte, flush bool) error {
	x.extendWrite()
	if _, err := x.w.Write(p); err != nil {
		return err
	}
	if flush {
		return x.flush()
	}
	return nil
}

// flush sends what is buffered to the caller. A ResponseWriter that cannot
// flush (in tests) is not an error.
func (x *exchange) flush() error {
	if err := x.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// breakOff ends an answer the region broke off after bytes reached the
// caller. A stream that broke between two chunks ends with an error chunk in
// Google's error JSON, which the SDKs read as the stream's error: an event
// for server-sent events (after a blank line, which ends any event cut short
// of its own), an element for a JSON array. Any other answer cannot be ended
// well formed: the connection is cut, so the caller sees it broken.
func (x *exchange) breakOff(err error, sse bool) {
	if (x.method != methodStream && !sse) || !x.scan.Between() {
		x.abort = true
		return
	}
	text := "the region's stream broke off: " + err.Error()
	msg := upstream.GoogleError(codes.Unavailable, text)
	var out []byte
	switch {
	case sse && (x.method == methodRaw || x.method == methodStreamRaw):
		// A partner model's events are its publisher's: Anthropic's SDKs
		// read an error only from an event named "error" (they skip
		// unnamed ones, and the stream would seem to end well), in
		// Anthropic's error object, which carries Google's code and status
		// too.
		out = append(append(append(out, "\r\n\r\nevent: error\r\ndata: "...), upstream.AnthropicError(codes.Unavailable, text)...), "\r\n\r\n"...)
	case sse:
		out = append(append(append(out, "\r\n\r\ndata: "...), msg...), "\r\n\r\n"...)
	case x.scan.Objects == 0:
		out = append(append(out, msg...), ']')
	default:
		out = append(append(append(out, ",\r\n"...), msg...), ']')
	}
	if x.write(out, true) != nil {
		x.abort = true
	}
}
