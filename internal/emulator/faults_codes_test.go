package emulator

import (
	"testing"

	"github.com/regionwarden/regionwarden/internal/googleerror"
)

// TestFaultCodesRoundTrip: every HTTP code a scenario's fault may inject
// reaches a REST client as that HTTP status, with the gRPC code a gRPC client
// sees, so the two surfaces of a faulty region agree.
func TestFaultCodesRoundTrip(t *testing.T) {
	for httpCode, code := range faultCodes {
		if got := googleerror.HTTPStatus(code); got != httpCode {
			t.Errorf("a fault of HTTP %d is %s over gRPC, which REST answers as HTTP %d", httpCode, code, got)
		}
	}
}
