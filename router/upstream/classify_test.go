package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/regionwarden/regionwarden/router/policy"
	"github.com/regionwarden/regionwarden/router/table"
)

// gaveUp is the outcome of a call the caller gave up on.
const gaveUp = policy.Cancelled //nolint:misspell // the policy package's name

var codeCases = []struct {
	code    codes.Code
	outcome policy.Outcome
	http    int
	name    string
}{
	{codes.ResourceExhausted, policy.Capacity, 429, "RESOURCE_EXHAUSTED"},
	{codes.Unavailable, policy.Failure, 503, "UNAVAILABLE"},
	{codes.DeadlineExceeded, policy.Failure, 504, "DEADLINE_EXCEEDED"},
	{codes.Internal, policy.Failure, 500, "INTERNAL"},
	{codes.Unknown, policy.Failure, 500, "UNKNOWN"},
	{codes.DataLoss, policy.Failure, 500, "DATA_LOSS"},
	{codes.Aborted, policy.Failure, 409, "ABORTED"},
	{codes.PermissionDenied, policy.Failure, 403, "PERMISSION_DENIED"},
	{codes.Unauthenticated, policy.Failure, 401, "UNAUTHENTICATED"},
	{codes.InvalidArgument, policy.CallerFault, 400, "INVALID_ARGUMENT"},
	{codes.NotFound, policy.CallerFault, 404, "NOT_FOUND"},
	{codes.AlreadyExists, policy.CallerFault, 409, "ALREADY_EXISTS"},
	{codes.FailedPrecondition, policy.CallerFault, 400, "FAILED_PRECONDITION"},
	{codes.OutOfRange, policy.CallerFault, 400, "OUT_OF_RANGE"},
	{codes.Unimplemented, policy.CallerFault, 501, "UNIMPLEMENTED"},
	{codes.Canceled, gaveUp, 499, "CANCELLED"}, //nolint:misspell // the policy package's name, Google's status
}

// TestRegionErrorsClassify sends every code from a fake region through the real
// clients, so the errors are classified as the router will meet them.
func TestRegionErrorsClassify(t *testing.T) {
	f := startFake(t)
	c := newClients(t)
	pool, _, shared := testPool(f, table.RequestTypeSpillover)
	for _, tc := range codeCases {
		for _, cl := range callers {
			t.Run(tc.name+"/"+cl.method, func(t *testing.T) {
				g := NewWithT(t)
				f.set(func(f *fakeRegion) { f.err = status.Error(tc.code, "from the region") })
				_, err := cl.call(t.Context(), c, pool, shared)
				g.Expect(Code(err)).To(Equal(tc.code))
				g.Expect(Classify(err)).To(Equal(tc.outcome), "%v", err)
				want := tc.outcome
				if tc.code == codes.Canceled {
					want = policy.Failure // the caller did not cancel
				}
				g.Expect(ClassifyContext(t.Context(), err)).To(Equal(want))
			})
		}
	}
}

func TestClassifyWithoutStatus(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want policy.Outcome
	}{
		{"nil", nil, policy.Success},
		{"ok status", status.Error(codes.OK, ""), policy.Success},
		{"caller canceled", context.Canceled, gaveUp},
		{"wrapped cancel", fmt.Errorf("relay: %w", context.Canceled), gaveUp},
		{"deadline", context.DeadlineExceeded, policy.Failure},
		{"plain error", errors.New("connection reset by peer"), policy.Failure},
		{"unknown future code", status.Error(codes.Code(42), "new"), policy.Failure},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Classify(tc.err); got != tc.want {
				t.Errorf("Classify(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

func TestClassifyContextBlamesTheCallerOnlyWhenItGaveUp(t *testing.T) {
	g := NewWithT(t)
	f := startFake(t)
	c := newClients(t)
	pool, _, shared := testPool(f, table.RequestTypeSpillover)

	// The caller's own deadline runs out while the region is slow.
	f.set(func(f *fakeRegion) { f.block = true })
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err := c.GenerateContent(ctx, userRequest(), pool, shared)
	g.Expect(Code(err)).To(Equal(codes.DeadlineExceeded))
	g.Expect(ClassifyContext(ctx, err)).To(Equal(gaveUp))
	g.Eventually(f.ended).Should(Receive())

	// The region answers DEADLINE_EXCEEDED on its own: its failure.
	f.set(func(f *fakeRegion) { f.block, f.err = false, status.Error(codes.DeadlineExceeded, "region timeout") })
	_, err = c.GenerateContent(t.Context(), userRequest(), pool, shared)
	g.Expect(ClassifyContext(t.Context(), err)).To(Equal(policy.Failure))
}

func TestGoogleErrorAndHTTPStatus(t *testing.T) {
	for _, tc := range codeCases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(HTTPStatus(tc.code)).To(Equal(tc.http))
			var body map[string]map[string]any
			g.Expect(json.Unmarshal(GoogleError(tc.code, `quota "x" exceeded`), &body)).To(Succeed())
			g.Expect(body).To(Equal(map[string]map[string]any{"error": {
				"code": float64(tc.http), "message": `quota "x" exceeded`, "status": tc.name,
			}}))
		})
	}
	g := NewWithT(t)
	g.Expect(HTTPStatus(codes.OK)).To(Equal(200))
	g.Expect(HTTPStatus(codes.Code(42))).To(Equal(500))
	g.Expect(StatusName(codes.Code(42))).To(Equal("UNKNOWN"))
}
