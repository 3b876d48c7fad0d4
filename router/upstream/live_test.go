package upstream_test

import (
	"context"
	"errors"
	"testing"

	"github.com/gorilla/websocket"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/regionwarden/regionwarden/router/policy"
	"github.com/regionwarden/regionwarden/router/upstream"
)

// TestLiveCloseErrors: how a region closing a Live session before its
// setupComplete is read, and what the policy learns of it: the status a
// close frame's text names first, else its code; Google's quota refusal
// (1011 naming a quota) is capacity, not a failure; a connection that
// broke off is the region's failure; an invalid setup (1007) is not held
// against the region; a refused permission or model (1008) is, as a 403 is,
// unless the session carries the caller's own credentials.
func TestLiveCloseErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		code codes.Code
		msg  string
		out  policy.Outcome
	}{
		{"status named", &websocket.CloseError{Code: 1011, Text: "RESOURCE_EXHAUSTED: Too many sessions."}, codes.ResourceExhausted, "Too many sessions.", policy.Capacity},
		{"quota", &websocket.CloseError{Code: 1011, Text: "You exceeded your current quota."}, codes.ResourceExhausted, "You exceeded your current quota.", policy.Capacity},
		{"internal", &websocket.CloseError{Code: 1011, Text: "Internal error occurred."}, codes.Internal, "Internal error occurred.", policy.Failure},
		{"invalid", &websocket.CloseError{Code: 1007, Text: "Request contains an invalid argument."}, codes.InvalidArgument, "Request contains an invalid argument.", policy.CallerFault},
		{"policy", &websocket.CloseError{Code: 1008, Text: "Publisher model not found."}, codes.PermissionDenied, "Publisher model not found.", policy.Failure},
		{"broke off", &websocket.CloseError{Code: 1006}, codes.Unavailable, "the region closed the Live session with code 1006", policy.Failure},
		{"no close", errors.New("read tcp: connection reset by peer"), codes.Unavailable, "the region's Live session broke off: read tcp: connection reset by peer", policy.Failure},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := upstream.LiveCloseError(tc.err)
			st := status.Convert(err)
			if st.Code() != tc.code || st.Message() != tc.msg {
				t.Fatalf("got %v %q, want %v %q", st.Code(), st.Message(), tc.code, tc.msg)
			}
			if o := upstream.Report(context.Background(), err, false).Outcome; o != tc.out {
				t.Fatalf("the policy learns %v, want %v", o, tc.out)
			}
			if tc.code == codes.PermissionDenied {
				if o := upstream.Report(context.Background(), err, true).Outcome; o != policy.CallerFault {
					t.Fatalf("with the caller's credentials the policy learns %v, want caller_fault", o)
				}
			}
			if tc.code == codes.Unavailable {
				return
			}
			// Read the other way, the code closes as Google's servers do.
			if c := upstream.LiveCloseCode(tc.code); c != tc.err.(*websocket.CloseError).Code {
				t.Fatalf("LiveCloseCode(%v) = %d, want %d", tc.code, c, tc.err.(*websocket.CloseError).Code)
			}
		})
	}
}
