package upstream

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/gorilla/websocket"
	"go.opentelemetry.io/otel/propagation"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The Live API: Vertex AI's BidiGenerateContent, a session over a
// websocket (genai's client.Live.Connect). The caller opens the socket at
// LivePath on the location's endpoint, sends a setup message naming the
// model (projects/P/locations/L/publishers/PUB/models/M), gets
// setupComplete, and the session goes on in messages both ways until one
// side closes it.

// LivePath is the path of the Live API's websocket for an API version (v1
// or v1beta1), as genai's Live client and Google's other SDKs open it.
func LivePath(version string) string {
	return "/ws/google.cloud.aiplatform." + version + ".LlmBidiService/BidiGenerateContent"
}

// liveBuffer is the size of a Live session's read and write buffers.
const liveBuffer = 8 << 10

// liveDialer opens Live sessions: through the environment's proxy, TLS 1.2
// at least, within the dial timeout, without compression (the router reads
// the answers it relays, as over REST).
var liveDialer = &websocket.Dialer{
	Proxy:            http.ProxyFromEnvironment,
	TLSClientConfig:  &tls.Config{MinVersion: tls.VersionTLS12},
	HandshakeTimeout: dialTimeout,
	// A session's messages are small (a turn, a chunk of audio): small
	// buffers, as a session holds its own for minutes (a larger message
	// is read in several reads).
	ReadBufferSize:  liveBuffer,
	WriteBufferSize: liveBuffer,
}

// Live opens a Live session's websocket with the region of t for API
// version, ctx bounding the handshake: wss:// (ws:// with Options.Insecure)
// at t's endpoint, with the caller's header less what stays with the router
// (the websocket handshake's own headers among them: dropped), plus the capacity headers
// and the credentials, as Send does for REST. A handshake the region refuses
// is an *Error of its answer, classified as a REST answer is.
func (c *Clients) Live(ctx context.Context, t Target, version string, in http.Header) (*websocket.Conn, error) {
	auth, err := c.authorization(ctx, &t)
	if err != nil {
		return nil, err
	}
	rt, srt := Headers(&t)
	header := outHeader(in, rt, srt, auth, deadlineOf(ctx))
	c.opts.Propagator.Inject(ctx, propagation.HeaderCarrier(header))
	scheme := "wss://"
	if c.opts.Insecure {
		scheme = "ws://"
	}
	conn, resp, err := liveDialer.DialContext(ctx, scheme+t.Region.Endpoint+LivePath(version), header)
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			return nil, readError(resp)
		}
		if resp != nil {
			_ = resp.Body.Close()
		}
		return nil, err
	}
	return conn, nil
}

// LiveCloseError is the error a region closing a Live session with ce
// stands for, as a gRPC status: Google closes with the status in the close
// frame's text more often than not ("RESOURCE_EXHAUSTED: ..." and the like,
// read first), else by the close code: 1007 (invalid payload) is
// INVALID_ARGUMENT, 1008 (policy violation: a model or permission the
// caller names) PERMISSION_DENIED, 1011 (internal error) INTERNAL unless its
// text speaks of a quota (RESOURCE_EXHAUSTED), and a connection closed
// without a code or as going away UNAVAILABLE.
func LiveCloseError(err error) error {
	var ce *websocket.CloseError
	if !errors.As(err, &ce) {
		return status.Error(codes.Unavailable, "the region's Live session broke off: "+err.Error())
	}
	text := ce.Text
	if text == "" {
		text = "the region closed the Live session with code " + strconv.Itoa(ce.Code)
	}
	if name, msg, ok := strings.Cut(text, ":"); ok {
		if c, ok := codeOfName([]byte(strings.TrimSpace(name))); ok && c != codes.OK {
			return status.Error(c, strings.TrimSpace(msg))
		}
	}
	switch ce.Code {
	case websocket.CloseInvalidFramePayloadData:
		return status.Error(codes.InvalidArgument, text)
	case websocket.ClosePolicyViolation:
		return status.Error(codes.PermissionDenied, text)
	case websocket.CloseInternalServerErr:
		if strings.Contains(strings.ToLower(text), "quota") || strings.Contains(text, "RESOURCE_EXHAUSTED") {
			return status.Error(codes.ResourceExhausted, text)
		}
		return status.Error(codes.Internal, text)
	case websocket.CloseTryAgainLater:
		return status.Error(codes.Unavailable, text)
	}
	return status.Error(codes.Unavailable, text)
}

// LiveCloseCode is the close code a Live session ends with for a gRPC
// code, as Google's servers close them (LiveCloseError read the other way).
func LiveCloseCode(code codes.Code) int {
	switch code {
	case codes.InvalidArgument:
		return websocket.CloseInvalidFramePayloadData
	case codes.PermissionDenied, codes.Unauthenticated, codes.NotFound, codes.FailedPrecondition:
		return websocket.ClosePolicyViolation
	case codes.Unavailable:
		return websocket.CloseTryAgainLater
	}
	return websocket.CloseInternalServerErr
}
