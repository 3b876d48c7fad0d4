package upstream

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/regionwarden/regionwarden/router/table"
)

// Request is one Vertex REST call as the router's caller made it, to be sent
// to a region: the caller's body bytes and headers go on unchanged but for
// what routing must change.
type Request struct {
	// Version is the API version the caller used, v1 or v1beta1; the region
	// is called with the same.
	Version string
	// Method is the method in the path (generateContent,
	// streamGenerateContent, countTokens, rawPredict, ...) or
	// MethodChatCompletions.
	Method string
	// PathModel, when set, is the model the path names in place of the
	// pool's: Anthropic's count_tokens is rawPredict of the model
	// "count-tokens", the model it counts for named in the body.
	PathModel string
	// RawQuery is the caller's query string (?alt=sse), sent as it is.
	RawQuery string
	// Header is the caller's header. Send never modifies it.
	Header http.Header
	// Body is the caller's body. Send never modifies it.
	Body []byte
}

// Header names the router sets or drops, canonical.
var (
	headerRequestType       = textproto.CanonicalMIMEHeaderKey(table.HeaderRequestType)
	headerSharedRequestType = textproto.CanonicalMIMEHeaderKey(table.HeaderSharedRequestType)
	headerAuthorization     = "Authorization"
)

// headerValues are the values of the capacity headers, shared by every
// call: the transport never modifies a request's header.
var headerValues = map[string][]string{
	string(table.RequestTypeDedicated): {string(table.RequestTypeDedicated)},
	table.RequestTypeShared:            {table.RequestTypeShared},
	string(table.PayGoPriority):        {string(table.PayGoPriority)},
	string(table.PayGoFlex):            {string(table.PayGoFlex)},
}

// headerValue is v as a header's values, shared when it is a known one.
func headerValue(v string) []string {
	if hv, ok := headerValues[v]; ok {
		return hv
	}
	return []string{v}
}

// HeaderServerTimeout is Google's system parameter by which a REST caller
// bounds, in seconds, how long the server may take to finish its request
// (https://cloud.google.com/apis/docs/system-parameters); the genai SDKs
// send it when a call has a timeout. The router reads it as the call's
// deadline (ParseServerTimeout) and sends each attempt on with what is left
// of that deadline, so that a region does not work on past the moment the
// caller stops waiting.
const HeaderServerTimeout = "X-Server-Timeout"

// ParseServerTimeout reads a HeaderServerTimeout value: a number of seconds,
// whole or decimal, greater than zero.
func ParseServerTimeout(v string) (time.Duration, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || !(f > 0) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("header %s: %q is not a number of seconds greater than zero", HeaderServerTimeout, v)
	}
	if f >= maxServerTimeout.Seconds() {
		return maxServerTimeout, nil
	}
	return time.Duration(f * float64(time.Second)), nil
}

// maxServerTimeout bounds what ParseServerTimeout returns: a year, far
// beyond any request timeout, and within a Duration.
const maxServerTimeout = 365 * 24 * time.Hour

// serverTimeout is the HeaderServerTimeout value that tells a region how long
// is left until deadline, in whole seconds rounded up (Google reads whole
// seconds), at least one.
func serverTimeout(deadline time.Time) []string {
	left := time.Until(deadline)
	secs := max(int64((left+time.Second-1)/time.Second), 1)
	return []string{strconv.FormatInt(secs, 10)}
}

// HeaderPriority is the router's own request header that sets a call's
// priority for shedding; it is never sent on.
const HeaderPriority = "X-Regionwarden-Priority"

// dropped reports whether a caller's request header stays with the router:
//   - hop-by-hop headers (RFC 9110, section 7.6.1) and those the transport
//     sets itself (Host, Content-Length);
//   - Authorization, which the Authorizer decides;
//   - the request type and the shared request type, which the capacity the
//     policy picked decides;
//   - Accept-Encoding: the router reads the answers it relays and asks for
//     them uncompressed;
//   - the router's own priority header;
//   - a websocket handshake's own headers (a Live session's), which the
//     router's dialer writes for its own handshake with the region.
func dropped(key string) bool {
	switch key {
	case "Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization",
		"Te", "Trailer", "Transfer-Encoding", "Upgrade", "Host", "Content-Length",
		"Sec-Websocket-Key", "Sec-Websocket-Version", "Sec-Websocket-Extensions", "Sec-Websocket-Protocol", "Sec-Websocket-Accept",
		headerAuthorization, "Accept-Encoding", headerRequestType, headerSharedRequestType, HeaderPriority:
		return true
	}
	return false
}

// outHeader is the header of a call to a region: the caller's, less what
// stays with the router, plus the capacity headers and the credentials. A
// caller's HeaderServerTimeout is replaced by what is left until deadline
// (when it is not zero): an attempt after a wait or a failed one has less
// time than the caller first gave.
func outHeader(in http.Header, requestType, sharedRequestType, authorization string, deadline time.Time) http.Header {
	out := make(http.Header, len(in)+3)
	for k, v := range in {
		if !dropped(k) {
			out[k] = v
		}
	}
	// Headers the caller's Connection header names are hop-by-hop too.
	for _, v := range in["Connection"] {
		for name := range strings.SplitSeq(v, ",") {
			delete(out, textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(name)))
		}
	}
	if requestType != "" {
		out[headerRequestType] = headerValue(requestType)
	}
	if sharedRequestType != "" {
		out[headerSharedRequestType] = headerValue(sharedRequestType)
	}
	if authorization != "" {
		out[headerAuthorization] = []string{authorization}
	}
	if _, ok := out[HeaderServerTimeout]; ok && !deadline.IsZero() {
		out[HeaderServerTimeout] = serverTimeout(deadline)
	}
	return out
}

// AnswerHeader copies the header of a region's answer onto the header of the
// router's answer: all of it but hop-by-hop headers, Content-Length (the
// router's server sets its own) and Alt-Svc (it advertises Google's
// alternative services, which would be wrong for the router's address).
func AnswerHeader(dst, src http.Header) {
	for k, v := range src {
		switch k {
		case "Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Te", "Trailer",
			"Transfer-Encoding", "Upgrade", "Content-Length", "Alt-Svc":
			continue
		}
		dst[k] = v
	}
}

// MethodChatCompletions is the Request.Method of the OpenAI-compatible chat
// completions: POST /{version}/projects/{p}/locations/{l}/endpoints/openapi/chat/completions,
// the model named in the body as "{publisher}/{model}".
const MethodChatCompletions = "chat/completions"

// path is the REST path of a call to t: the caller's, with the region's
// location and the pool's names.
func path(r *Request, t *Target) string {
	if r.Method == MethodChatCompletions {
		return "/" + r.Version + "/projects/" + t.Pool.Project + "/locations/" + t.Region.Name + "/endpoints/openapi/chat/completions"
	}
	var b strings.Builder
	b.WriteByte('/')
	b.WriteString(r.Version)
	b.WriteByte('/')
	model := t.Pool.Model
	if r.PathModel != "" {
		model = r.PathModel
	}
	writeModelName(&b, t.Pool, t.Region.Name, model, len(r.Version)+len(r.Method)+3)
	b.WriteByte(':')
	b.WriteString(r.Method)
	return b.String()
}

// sending is one REST call's own state on net/http's transport, in one
// allocation: its URL and the reader of its body.
type sending struct {
	u    url.URL
	body bytes.Reader
	raw  []byte
}

// getBody reads the body again: the transport knows a bytes.Reader in a
// NopCloser as an in-memory body, sends it with the headers in one write,
// and calls getBody when it retries on a connection that turned out dead.
func (s *sending) getBody() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(s.raw)), nil }

// Send calls the region of t over REST with r and returns its answer when it
// is 200 OK: the caller reads the body as it arrives and must close it. Any
// other answer is read (its first maxErrorBody bytes) and returned as an
// *Error; a call that got no answer returns the transport's error. ctx bounds
// the whole call, body included.
func (c *Clients) Send(ctx context.Context, t Target, r *Request) (*http.Response, error) {
	e, err := c.acquire(t.Region.Endpoint)
	if err != nil {
		return nil, err
	}
	auth, err := c.authorization(ctx, &t)
	if err != nil {
		e.release()
		return nil, err
	}
	rt, srt := Headers(&t)
	header := outHeader(r.Header, rt, srt, auth, deadlineOf(ctx))
	c.opts.Propagator.Inject(ctx, propagation.HeaderCarrier(header))
	var resp *http.Response
	if e.h1 != nil {
		resp, err = e.h1.send(ctx, escapedPath(path(r, &t)), r.RawQuery, header, r.Body)
	} else {
		resp, err = e.roundTrip(ctx, &t, r, header)
	}
	if err != nil {
		e.release()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		rerr := readError(resp)
		e.release()
		return nil, rerr
	}
	resp.Body = &releasing{ReadCloser: resp.Body, e: e}
	return resp, nil
}

// roundTrip sends a call through e's net/http transport: over TLS, and
// plaintext through a proxy.
func (e *endpoint) roundTrip(ctx context.Context, t *Target, r *Request, header http.Header) (*http.Response, error) {
	return e.do(ctx, http.MethodPost, t.Region.Endpoint, path(r, t), r.RawQuery, header, r.Body)
}

// do sends one request of method to host through e's net/http transport,
// body (the caller's bytes, not copied) with its length.
func (e *endpoint) do(ctx context.Context, method, host, path, query string, header http.Header, body []byte) (*http.Response, error) {
	s := &sending{raw: body}
	s.u = url.URL{Scheme: "https", Host: host, Path: path, RawQuery: query}
	if e.insecure {
		s.u.Scheme = "http"
	}
	req := (&http.Request{
		Method:     method,
		URL:        &s.u,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     header,
		Body:       http.NoBody,
		Host:       s.u.Host,
	}).WithContext(ctx)
	if len(body) > 0 {
		s.body.Reset(body)
		req.Body, req.GetBody, req.ContentLength = io.NopCloser(&s.body), s.getBody, int64(len(body))
	}
	return e.rest.RoundTrip(req)
}

// escapedPath is p as a request line carries it, escaped as net/http
// escapes a URL's path (the names of projects and models are not checked
// for what a path may carry). It does not allocate when nothing needs
// escaping.
func escapedPath(p string) string { return (&url.URL{Path: p}).EscapedPath() }

// deadlineOf is ctx's deadline; zero if it has none.
func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

// releasing is an answer's body that ends its call on the endpoint when closed.
type releasing struct {
	io.ReadCloser
	e    *endpoint
	done bool
}

func (b *releasing) Close() error {
	err := b.ReadCloser.Close()
	if !b.done {
		b.done = true
		b.e.release()
	}
	return err
}

// Passthrough is a REST call the router forwards to one location as it
// came, outside routing (the cached contents of a location, which only
// that location serves): its method, path and query are sent unchanged,
// with the caller's headers less those that stay with the router.
type Passthrough struct {
	Method, Path, RawQuery string
	// Header is the caller's header. Forward never modifies it.
	Header http.Header
	// Body is the caller's body; empty for none. Forward never modifies it.
	Body []byte
}

// Forward sends p to endpoint over REST, with the credentials the
// Authorizer gives for callerAuthorization, and returns the answer whatever
// its status: the caller relays it and must close its body. ctx bounds the
// whole call, body included. It goes through the endpoint's net/http
// transport (HTTP/2 over TLS): such calls are few, and need every method.
func (c *Clients) Forward(ctx context.Context, endpoint, callerAuthorization string, p *Passthrough) (*http.Response, error) {
	e, err := c.acquire(endpoint)
	if err != nil {
		return nil, err
	}
	auth, err := c.authorization(ctx, &Target{CallerAuthorization: callerAuthorization})
	if err != nil {
		e.release()
		return nil, err
	}
	header := outHeader(p.Header, "", "", auth, deadlineOf(ctx))
	c.opts.Propagator.Inject(ctx, propagation.HeaderCarrier(header))
	resp, err := e.do(ctx, p.Method, endpoint, p.Path, p.RawQuery, header, p.Body)
	if err != nil {
		e.release()
		return nil, err
	}
	resp.Body = &releasing{ReadCloser: resp.Body, e: e}
	return resp, nil
}
