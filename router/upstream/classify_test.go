package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/regionwarden/regionwarden/router/policy"
	"github.com/regionwarden/regionwarden/router/table"
	"github.com/regionwarden/regionwarden/router/upstream/upstreamtest"
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

// TestRegionErrorsClassify sends every code from a fake region through the
// real clients, on both surfaces, so the errors are classified as the router
// will meet them; over REST the region's error answer is kept byte for byte.
func TestRegionErrorsClassify(t *testing.T) {
	prov, shared := regions(t)
	c := newClients(t, Options{})
	pool := testPool(prov, shared, table.RequestTypeSpillover)
	for _, tc := range codeCases {
		for _, cl := range callers {
			t.Run(tc.name+"/"+cl.name, func(t *testing.T) {
				g := NewWithT(t)
				fault := status.Error(tc.code, "from the region")
				shared.Set(func(b *upstreamtest.Behavior) { b.Fault = func(int64) error { return fault } })
				_, err := cl.call(t.Context(), c, Target{Pool: pool, Region: pool.Regions[1]})
				g.Expect(Code(err)).To(Equal(tc.code))
				g.Expect(Classify(err)).To(Equal(tc.outcome), "%v", err)
				want := tc.outcome
				if tc.code == codes.Canceled {
					want = policy.Failure // the caller did not cancel
				}
				g.Expect(ClassifyContext(t.Context(), err)).To(Equal(want))
				g.Expect(status.Convert(err).Message()).To(Equal("from the region"))
				if strings.HasPrefix(cl.name, "rest/") {
					var rerr *Error
					g.Expect(errors.As(err, &rerr)).To(BeTrue())
					g.Expect(rerr.HTTPStatus).To(Equal(tc.http))
					g.Expect(rerr.Body).To(Equal(upstreamtest.ErrorJSON(fault)))
				}
			})
		}
	}
}

// TestRESTErrorsWithoutStatusName: an error answer that names no status
// (from a proxy in front of the API, say) is classified by its HTTP status.
func TestRESTErrorsWithoutStatusName(t *testing.T) {
	cases := []struct {
		http int
		want policy.Outcome
	}{
		{429, policy.Capacity}, {502, policy.Failure}, {503, policy.Failure}, {504, policy.Failure},
		{500, policy.Failure}, {400, policy.CallerFault}, {404, policy.CallerFault}, {418, policy.CallerFault},
		{529, policy.Capacity}, // Anthropic's overloaded_error
	}
	for _, tc := range cases {
		rec := httptest.NewRecorder()
		rec.WriteHeader(tc.http)
		_, _ = rec.WriteString("<html>upstream trouble</html>")
		err := readError(rec.Result())
		if got := Classify(err); got != tc.want {
			t.Errorf("%d: %v, want %v", tc.http, got, tc.want)
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
	prov, shared := regions(t)
	c := newClients(t, Options{})
	pool := testPool(prov, shared, table.RequestTypeSpillover)
	target := Target{Pool: pool, Region: pool.Regions[1]}
	for _, cl := range []caller{callers[0], callers[3]} {
		t.Run(cl.name, func(t *testing.T) {
			g := NewWithT(t)
			// The caller's own deadline runs out while the region is slow.
			shared.Set(func(b *upstreamtest.Behavior) { b.Block, b.Fault = true, nil })
			ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
			defer cancel()
			_, err := cl.call(ctx, c, target)
			g.Expect(Code(err)).To(Equal(codes.DeadlineExceeded))
			g.Expect(ClassifyContext(ctx, err)).To(Equal(gaveUp))
			g.Eventually(shared.Ended).Should(Receive())

			// The region answers DEADLINE_EXCEEDED on its own: its failure.
			shared.Set(func(b *upstreamtest.Behavior) {
				b.Block, b.Fault = false, func(int64) error { return status.Error(codes.DeadlineExceeded, "region timeout") }
			})
			_, err = cl.call(t.Context(), c, target)
			g.Expect(ClassifyContext(t.Context(), err)).To(Equal(policy.Failure))
		})
	}
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

// TestTwo429sToldApart: Google's two 429 messages ("Error code 429") reach
// the policy as two outcomes, through the real clients on both surfaces: a
// full PT spills, pay-as-you-go throttles.
func TestTwo429sToldApart(t *testing.T) {
	prov, shared := regions(t)
	c := newClients(t, Options{})
	pool := testPool(prov, shared, table.RequestTypeDedicated)
	for _, tc := range []struct {
		msg  string
		want policy.Outcome
	}{
		{"Too many requests. Exceeded the Provisioned Throughput.", policy.ProvisionedFull},
		{"Resource exhausted, please try again later.", policy.Capacity},
		{"Resource exhausted. Please try again later. Please refer to https://cloud.google.com/vertex-ai/generative-ai/docs/error-code-429 for more details.", policy.Capacity},
		{"Quota exceeded for aiplatform.googleapis.com/generate_content_requests_per_minute_per_project_per_base_model.", policy.Capacity},
	} {
		for _, cl := range callers {
			t.Run(tc.msg[:20]+"/"+cl.name, func(t *testing.T) {
				g := NewWithT(t)
				fault := status.Error(codes.ResourceExhausted, tc.msg)
				prov.Set(func(b *upstreamtest.Behavior) { b.Fault = func(int64) error { return fault } })
				_, err := cl.call(t.Context(), c, Target{Pool: pool, Region: pool.Regions[0]})
				g.Expect(Code(err)).To(Equal(codes.ResourceExhausted))
				g.Expect(Classify(err)).To(Equal(tc.want))
			})
		}
	}
}

// TestErrorArrays: an error answer wrapped in an array, as Google's
// streaming and OpenAI-compatible endpoints write it, is read as one.
func TestErrorArrays(t *testing.T) {
	rec := httptest.NewRecorder()
	rec.WriteHeader(429)
	_, _ = rec.WriteString(`[{"error": {"code": 429, "message": "Too many requests. Exceeded the Provisioned Throughput.", "status": "RESOURCE_EXHAUSTED"}}]`)
	err := readError(rec.Result())
	if got := Classify(err); got != policy.ProvisionedFull {
		t.Errorf("Classify = %v, want %v (%v)", got, policy.ProvisionedFull, err)
	}
}

// TestCallersRefusedCredentialsAreTheirFault: Report blames the caller for
// Google refusing credentials that were the caller's own, and the region for
// refusing the router's; every other code teaches the same either way.
func TestCallersRefusedCredentialsAreTheirFault(t *testing.T) {
	for _, tc := range codeCases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := status.Error(tc.code, "from the region")
			want := ClassifyContext(t.Context(), err)
			own := Report(t.Context(), err, false, table.Key{})
			g.Expect(own.Outcome).To(Equal(want), "the router's own credentials")
			g.Expect(own.Uncounted).To(BeFalse())
			refused := tc.code == codes.Unauthenticated || tc.code == codes.PermissionDenied
			if refused {
				want = policy.CallerFault
			}
			callers := Report(t.Context(), err, true, table.Key{})
			g.Expect(callers.Outcome).To(Equal(want), "the caller's own credentials")
			g.Expect(callers.Uncounted).To(Equal(refused), "a region counts no request whose credentials it refused")
		})
	}
	g := NewWithT(t)
	g.Expect(New(Options{}).CallersCredentials()).To(BeFalse(), "no credentials")
	g.Expect(New(Options{Authorizer: TokenAuthorizer(nil)}).CallersCredentials()).To(BeFalse(), "the router's own")
}

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
			err := LiveCloseError(tc.err)
			st := status.Convert(err)
			if st.Code() != tc.code || st.Message() != tc.msg {
				t.Fatalf("got %v %q, want %v %q", st.Code(), st.Message(), tc.code, tc.msg)
			}
			if o := Report(context.Background(), err, false, table.Key{}).Outcome; o != tc.out {
				t.Fatalf("the policy learns %v, want %v", o, tc.out)
			}
			if tc.code == codes.PermissionDenied {
				if o := Report(context.Background(), err, true, table.Key{}).Outcome; o != policy.CallerFault {
					t.Fatalf("with the caller's credentials the policy learns %v, want caller_fault", o)
				}
			}
			if tc.code == codes.Unavailable {
				return
			}
			// Read the other way, the code closes as Google's servers do.
			if c := LiveCloseCode(tc.code); c != tc.err.(*websocket.CloseError).Code {
				t.Fatalf("LiveCloseCode(%v) = %d, want %d", tc.code, c, tc.err.(*websocket.CloseError).Code)
			}
		})
	}
}

// TestModelNotServedIsTheRegions: Google's 404 for the pool's model, which
// the location does not serve to the project (its Gemini and partner-model
// wordings, over gRPC and REST), is the region's failure, whoever's
// credentials the call carried; a 404 for another model (one a crafted
// body named), and any other NOT_FOUND (a cached content, a file), is the
// caller's.
func TestModelNotServedIsTheRegions(t *testing.T) {
	gemini := table.Key{Project: "p", Publisher: "google", Model: "gemini-3.6-flash"}
	claude := table.Key{Project: "p", Publisher: "anthropic", Model: "claude-opus-4-5"}
	for _, tc := range []struct {
		pool table.Key
		msg  string
		want policy.Outcome
	}{
		{gemini, "Publisher Model `projects/123456/locations/europe-west9/publishers/google/models/gemini-3.6-flash` was not found or your project does not have access to it. Please ensure you are using a valid model version. For more information, see: https://cloud.google.com/vertex-ai/generative-ai/docs/learn/model-versions", policy.Failure},
		{claude, "Publisher Model `projects/p/locations/europe-west1/publishers/anthropic/models/claude-opus-4-5` not found.", policy.Failure},
		{gemini, "Publisher Model `projects/p/locations/europe-west1/publishers/google/models/gemini-3.6-flash-lite` was not found or your project does not have access to it.", policy.CallerFault},
		{gemini, "Publisher Model `projects/p/locations/europe-west1/publishers/google/models/made-up` was not found or your project does not have access to it.", policy.CallerFault},
		{table.Key{}, "Publisher Model `projects/p/locations/europe-west1/publishers/google/models/gemini-3.6-flash` was not found.", policy.CallerFault},
		{gemini, "CachedContent not found (or permission denied)", policy.CallerFault},
		{gemini, "Requested entity was not found.", policy.CallerFault},
	} {
		g := NewWithT(t)
		err := status.Error(codes.NotFound, tc.msg)
		g.Expect(Classify(err)).To(Equal(policy.CallerFault), "Classify knows no pool: %s", tc.msg)
		g.Expect(Report(t.Context(), err, false, tc.pool).Outcome).To(Equal(tc.want), "the router's credentials: %s", tc.msg)
		g.Expect(Report(t.Context(), err, true, tc.pool).Outcome).To(Equal(tc.want), "the caller's own credentials: %s", tc.msg)
		body, _ := json.Marshal(map[string]any{"error": map[string]any{"code": 404, "message": tc.msg, "status": "NOT_FOUND"}})
		rec := httptest.NewRecorder()
		rec.WriteHeader(404)
		_, _ = rec.Write(body)
		g.Expect(Report(t.Context(), readError(rec.Result()), true, tc.pool).Outcome).To(Equal(tc.want), "over REST: %s", tc.msg)
	}
}
