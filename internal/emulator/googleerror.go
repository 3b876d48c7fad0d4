package emulator

import (
	"encoding/json"
	"net/http"

	rpccode "google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/grpc/codes"
)

// The emulator answers in Google's error model on its own, written from
// Google's documentation rather than borrowed from the router: the router's
// mapping is what the emulator tests, and a mapping shared by both sides
// could be wrong without any test failing.
//
// A Google API error is a google.rpc.Status. Over gRPC it is the call's
// status; over REST it is the JSON body
// {"error": {"code": <HTTP status>, "message": "...", "status": "<code name>"}}
// (https://cloud.google.com/apis/design/errors), with the HTTP status that
// the google.rpc.Code enum documents for the code ("HTTP Mapping").

// httpStatus is the HTTP status google.rpc.Code documents for c.
func httpStatus(c codes.Code) int {
	switch c {
	case codes.OK:
		return http.StatusOK
	case codes.InvalidArgument, codes.FailedPrecondition, codes.OutOfRange:
		return http.StatusBadRequest
	case codes.Unauthenticated:
		return http.StatusUnauthorized
	case codes.PermissionDenied:
		return http.StatusForbidden
	case codes.NotFound:
		return http.StatusNotFound
	case codes.AlreadyExists, codes.Aborted:
		return http.StatusConflict
	case codes.ResourceExhausted:
		return http.StatusTooManyRequests
	case codes.Canceled:
		return 499 // Client Closed Request: no constant in net/http
	case codes.Unimplemented:
		return http.StatusNotImplemented
	case codes.Unavailable:
		return http.StatusServiceUnavailable
	case codes.DeadlineExceeded:
		return http.StatusGatewayTimeout
	default:
		// UNKNOWN, INTERNAL and DATA_LOSS.
		return http.StatusInternalServerError
	}
}

// statusName is c's name in the google.rpc.Code enum, as a REST error's
// "status" spells it: RESOURCE_EXHAUSTED, CANCELLED.
func statusName(c codes.Code) string { return rpccode.Code(c).String() }

// googleErrorJSON is the REST body of an error with code c and message msg.
func googleErrorJSON(c codes.Code, msg string) []byte {
	b, err := json.Marshal(map[string]map[string]any{"error": {
		"code": httpStatus(c), "message": msg, "status": statusName(c),
	}})
	if err != nil {
		// Strings and ints always marshal.
		panic(err)
	}
	return b
}
