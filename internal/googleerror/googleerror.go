// Package googleerror is Google's API error model as Google documents it,
// for the fakes that stand in for Google (internal/emulator and
// router/upstream/upstreamtest). It is written from the documentation rather
// than borrowed from the router: router/upstream's own mapping is what the
// fakes test, and a mapping shared by the router and its fakes could be wrong
// without any test failing.
//
// A Google API error is a google.rpc.Status. Over gRPC it is the call's
// status; over REST it is the JSON body
// {"error": {"code": <HTTP status>, "message": "...", "status": "<code name>"}}
// (https://cloud.google.com/apis/design/errors), with the HTTP status that
// the google.rpc.Code enum documents for the code ("HTTP Mapping").
package googleerror

import (
	"encoding/json"
	"net/http"
	"slices"

	rpccode "google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/grpc/codes"
)

// googleHTTPStatus is the HTTP status of each google.rpc.Code, grouped by
// status as the enum's documentation gives them. UNKNOWN, INTERNAL and
// DATA_LOSS, and codes it does not know, are 500.
var googleHTTPStatus = map[int][]codes.Code{
	200: {codes.OK},
	400: {codes.InvalidArgument, codes.FailedPrecondition, codes.OutOfRange},
	401: {codes.Unauthenticated},
	403: {codes.PermissionDenied},
	404: {codes.NotFound},
	409: {codes.AlreadyExists, codes.Aborted},
	429: {codes.ResourceExhausted},
	499: {codes.Canceled}, // Client Closed Request
	501: {codes.Unimplemented},
	503: {codes.Unavailable},
	504: {codes.DeadlineExceeded},
}

// HTTPStatus is the HTTP status google.rpc.Code documents for c.
func HTTPStatus(c codes.Code) int {
	for status, cs := range googleHTTPStatus {
		if slices.Contains(cs, c) {
			return status
		}
	}
	return http.StatusInternalServerError
}

// StatusName is c's name in the google.rpc.Code enum, as a REST error's
// "status" spells it: RESOURCE_EXHAUSTED, CANCELLED.
func StatusName(c codes.Code) string { return rpccode.Code(c).String() }

// JSON is the REST body of an error with code c and message msg.
func JSON(c codes.Code, msg string) []byte {
	b, err := json.Marshal(map[string]map[string]any{"error": {
		"code": HTTPStatus(c), "message": msg, "status": StatusName(c),
	}})
	if err != nil {
		// Strings and ints always marshal.
		panic(err)
	}
	return b
}

// A Live API session (Vertex AI's BidiGenerateContent over a websocket)
// that Google's servers end with an error is closed with a close frame
// (RFC 6455) whose text is the status's name and message: 1007 (invalid
// frame payload data) for INVALID_ARGUMENT, 1008 (policy violation) for a
// model or project the caller has no access to, 1011 (internal error) for
// the rest, a full quota among them.
const (
	closeInvalidPayload  = 1007
	closePolicyViolation = 1008
	closeInternal        = 1011
	// closeTextMax is what a close frame's text may hold: a control
	// frame's 125 bytes less the code's 2.
	closeTextMax = 123
)

// LiveClose is the close code and text a Live session ends with for an
// error with code c and message msg, the text cut to what a close frame
// holds.
func LiveClose(c codes.Code, msg string) (int, string) {
	code := closeInternal
	switch c {
	case codes.InvalidArgument:
		code = closeInvalidPayload
	case codes.PermissionDenied, codes.NotFound:
		code = closePolicyViolation
	}
	text := StatusName(c) + ": " + msg
	if len(text) > closeTextMax {
		text = text[:closeTextMax]
	}
	return code, text
}
