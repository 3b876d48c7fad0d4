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
