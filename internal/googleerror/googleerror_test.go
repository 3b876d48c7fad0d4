package googleerror

import (
	"encoding/json"
	"testing"

	"google.golang.org/grpc/codes"
)

// TestGoogleErrorJSON: the REST body is Google's error shape, with the HTTP
// status as the code and the google.rpc.Code name, in Google's spelling, as
// the status.
func TestGoogleErrorJSON(t *testing.T) {
	for _, tc := range []struct {
		code   codes.Code
		http   int
		status string
	}{
		{codes.ResourceExhausted, 429, "RESOURCE_EXHAUSTED"},
		{codes.Canceled, 499, "CANCELLED"}, //nolint:misspell // Google's spelling
		{codes.Unavailable, 503, "UNAVAILABLE"},
		{codes.DeadlineExceeded, 504, "DEADLINE_EXCEEDED"},
		{codes.FailedPrecondition, 400, "FAILED_PRECONDITION"},
		{codes.DataLoss, 500, "DATA_LOSS"},
	} {
		var body struct {
			Error struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
				Status  string `json:"status"`
			} `json:"error"`
		}
		if err := json.Unmarshal(JSON(tc.code, "why"), &body); err != nil {
			t.Fatal(err)
		}
		if e := body.Error; e.Code != tc.http || e.Status != tc.status || e.Message != "why" {
			t.Errorf("%s: got %+v, want code %d, status %s, message why", tc.code, e, tc.http, tc.status)
		}
	}
}

// TestLiveClose: a Live session's close names the status first, with the
// code Google's servers close with, and its text fits a close frame.
func TestLiveClose(t *testing.T) {
	for _, tc := range []struct {
		code  codes.Code
		close int
	}{
		{codes.InvalidArgument, 1007},
		{codes.PermissionDenied, 1008},
		{codes.NotFound, 1008},
		{codes.ResourceExhausted, 1011},
		{codes.Unavailable, 1011},
	} {
		code, text := LiveClose(tc.code, "why")
		if code != tc.close || text != StatusName(tc.code)+": why" {
			t.Errorf("%s: %d %q, want %d %q", tc.code, code, text, tc.close, StatusName(tc.code)+": why")
		}
	}
	long := make([]byte, 200)
	for i := range long {
		long[i] = 'x'
	}
	if _, text := LiveClose(codes.Internal, string(long)); len(text) != 123 {
		t.Errorf("a long message's close text is %d bytes, want the 123 a close frame holds", len(text))
	}
}
