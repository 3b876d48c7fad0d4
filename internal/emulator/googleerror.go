package emulator

import (
	"encoding/json"
	"net/http"
	"slices"

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

// httpStatus is the HTTP status google.rpc.Code documents for c.
func httpStatus(c codes.Code) int {
	for status, cs := range googleHTTPStatus {
		if slices.Contains(cs, c) {
			return status
		}
	}
	return http.StatusInternalServerError
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
