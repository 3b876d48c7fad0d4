package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/regionwarden/regionwarden/router/policy"
	"github.com/regionwarden/regionwarden/router/table"
)

// Classify says what an upstream call's error teaches the router:
//
//   - nil: Success.
//   - RESOURCE_EXHAUSTED whose message says "Exceeded the Provisioned
//     Throughput": ProvisionedFull. The attempt asked for the region's PT
//     alone and the PT is full now; the call spills to pay-as-you-go, and
//     the region is not throttled for it (see ProvisionedThroughputFull).
//   - any other RESOURCE_EXHAUSTED: Capacity. The region has no
//     pay-as-you-go capacity now (429); it is not broken.
//   - UNAVAILABLE, DEADLINE_EXCEEDED, INTERNAL, UNKNOWN, DATA_LOSS, ABORTED and
//     errors that carry no gRPC status (connection errors): Failure.
//   - PERMISSION_DENIED and UNAUTHENTICATED: Failure, for a call that carried
//     the router's own credentials (or none): Google refusing them means the
//     router's identity or its grants are wrong in that region, nothing the
//     caller did, and something another region may not share. A call that
//     carried its caller's own credentials is the caller's fault instead:
//     Report, told whose credentials went.
//   - INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS, FAILED_PRECONDITION,
//     OUT_OF_RANGE: CallerFault. The request itself is wrong and would be
//     wrong in every region. (Report makes one NOT_FOUND the region's: the
//     pool's own model not served at that location, ModelNotServed.)
//   - UNIMPLEMENTED: CallerFault. The caller asked for a method or feature the
//     API does not serve; every region answers the same, so neither a retry
//     nor an ejection would help.
//   - CANCELED and context.Canceled: the caller gave up, the outcome that counts for nothing.
//
// Classify cannot tell a DEADLINE_EXCEEDED the region returned from the
// caller's own deadline running out, nor a cancellation by the caller from one
// by the connection: use ClassifyContext with the caller's context for that.
func Classify(err error) policy.Outcome {
	if err == nil {
		return policy.Success
	}
	if errors.Is(err, context.Canceled) {
		return policy.Cancelled //nolint:misspell // the policy package's name
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return policy.Failure
	}
	s, ok := status.FromError(err)
	if !ok {
		// No status: the call never got an answer (dial or transport error).
		return policy.Failure
	}
	switch s.Code() {
	case codes.OK:
		return policy.Success
	case codes.ResourceExhausted:
		if ProvisionedThroughputFull(s.Message()) {
			return policy.ProvisionedFull
		}
		return policy.Capacity
	case codes.Canceled:
		return policy.Cancelled //nolint:misspell // the policy package's name
	case codes.InvalidArgument, codes.NotFound, codes.AlreadyExists,
		codes.FailedPrecondition, codes.OutOfRange, codes.Unimplemented:
		return policy.CallerFault
	default:
		// Unavailable, DeadlineExceeded, Internal, Unknown, DataLoss, Aborted,
		// PermissionDenied, Unauthenticated, and any code added later.
		return policy.Failure
	}
}

// ptFullMessage is the words of the 429 Google answers when an attempt asks
// for a Provisioned Throughput alone (X-Vertex-AI-LLM-Request-Type:
// dedicated) and the PT is full. Google's "Error code 429" page gives the
// two messages of its two quota frameworks:
//
//	Pay-as-you-go            Resource exhausted, please try again later.
//	Provisioned Throughput   Too many requests. Exceeded the Provisioned Throughput.
//
// (Regions answer the first as "Resource exhausted. Please try again later.
// Please refer to https://cloud.google.com/vertex-ai/generative-ai/docs/error-code-429
// for more details.", with reason rateLimitExceeded.) Both are HTTP 429,
// RESOURCE_EXHAUSTED; no error detail tells them apart, so the message does.
const ptFullMessage = "exceeded the provisioned throughput"

// ProvisionedThroughputFull reports whether a RESOURCE_EXHAUSTED message is
// the one of a full Provisioned Throughput (ptFullMessage), compared without
// case. Any other 429 is pay-as-you-go's: the region is throttling. A message
// that matches neither is taken as pay-as-you-go's, the reaction that
// protects the region.
func ProvisionedThroughputFull(message string) bool {
	return strings.Contains(strings.ToLower(message), ptFullMessage)
}

// ModelNotServed reports whether a NOT_FOUND message is the one Google
// answers when a location does not serve the model pool names to the
// pool's project: "Publisher Model
// `projects/P/locations/L/publishers/google/models/M` was not found or your
// project does not have access to it." (for a partner model, "... not
// found."), naming pool's publisher and model, compared without case.
// Every other NOT_FOUND (a cached content, a file, another model) names
// what the request referred to, which is wrong wherever it goes.
//
// Why it is the location's failure and not the caller's: a call reaches a
// region only through a pool, and the routing table sends the pool's model
// to that location. What the message says is missing (the model, or the
// project's access to it: an allowlist, a partner model's terms, an
// organization policy) is the project's at that location, whoever calls:
// an identity without the project's permission is refused first, with
// PERMISSION_DENIED. The model must be the pool's, not only a model: the
// router passes a body on as it came, and a 404 for any other model (one a
// field of the request named) says something of the request, not of what
// the table sends to the location; a caller that could fail regions by
// naming a model no location serves would fail them for everyone. So it
// holds under the callers' own credentials too, and a
// caller that still fails wherever it goes while the regions serve the
// others is told apart as for any failure (the policy's blame.go). A model
// that no location serves fails in every region a call tries, as it did
// (each answered at once, before any model ran, and retried within the
// budget); a model served in some locations and not in others, or
// withdrawn from one first, has its calls retried and then sent where it
// is served, instead of every call routed to the other location failing
// while that region looks healthy.
func ModelNotServed(message string, pool table.Key) bool {
	if pool.Model == "" {
		return false
	}
	m := strings.ToLower(message)
	name := strings.ToLower("/publishers/" + pool.Publisher + "/models/" + pool.Model + "`")
	return strings.Contains(m, "publisher model") && strings.Contains(m, "not found") && strings.Contains(m, name)
}

// ClassifyContext is Classify for a call made under the caller's context ctx.
// If ctx is done, the caller gave up or ran out of its own time: whatever error
// the call ended with, it counts as the caller giving up and the region is not
// blamed. If ctx is not done, a CANCELED error came from the connection or the
// region, not the caller, and is a Failure.
//
// Pass the caller's context, not a per-attempt one the router derived with a
// timeout of its own: a per-attempt timeout running out is the region being
// slow, a Failure.
func ClassifyContext(ctx context.Context, err error) policy.Outcome {
	if err == nil {
		return policy.Success
	}
	if ctx.Err() != nil || deadlinePassed(ctx) {
		return policy.Cancelled //nolint:misspell // the policy package's name
	}
	o := Classify(err)
	if o == policy.Cancelled { //nolint:misspell // the policy package's name
		return policy.Failure
	}
	return o
}

// Code is the gRPC code of err: OK for nil, Canceled and DeadlineExceeded for
// the context errors, Unavailable for an error without a status (the call got
// no answer: a connection refused, reset or broken off), as gRPC reports those.
func Code(err error) codes.Code {
	switch {
	case err == nil:
		return codes.OK
	case errors.Is(err, context.Canceled):
		return codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded
	}
	if s, ok := status.FromError(err); ok {
		return s.Code()
	}
	return codes.Unavailable
}

// codeInfo is the HTTP status and the REST status name of each gRPC code, as
// Google's APIs map them (google.rpc.Code).
var codeInfo = [...]struct {
	http int
	name string
}{
	codes.OK:                 {http.StatusOK, "OK"},
	codes.Canceled:           {499, "CANCELLED"}, //nolint:misspell // Google's spelling of the status
	codes.Unknown:            {http.StatusInternalServerError, "UNKNOWN"},
	codes.InvalidArgument:    {http.StatusBadRequest, "INVALID_ARGUMENT"},
	codes.DeadlineExceeded:   {http.StatusGatewayTimeout, "DEADLINE_EXCEEDED"},
	codes.NotFound:           {http.StatusNotFound, "NOT_FOUND"},
	codes.AlreadyExists:      {http.StatusConflict, "ALREADY_EXISTS"},
	codes.PermissionDenied:   {http.StatusForbidden, "PERMISSION_DENIED"},
	codes.ResourceExhausted:  {http.StatusTooManyRequests, "RESOURCE_EXHAUSTED"},
	codes.FailedPrecondition: {http.StatusBadRequest, "FAILED_PRECONDITION"},
	codes.Aborted:            {http.StatusConflict, "ABORTED"},
	codes.OutOfRange:         {http.StatusBadRequest, "OUT_OF_RANGE"},
	codes.Unimplemented:      {http.StatusNotImplemented, "UNIMPLEMENTED"},
	codes.Internal:           {http.StatusInternalServerError, "INTERNAL"},
	codes.Unavailable:        {http.StatusServiceUnavailable, "UNAVAILABLE"},
	codes.DataLoss:           {http.StatusInternalServerError, "DATA_LOSS"},
	codes.Unauthenticated:    {http.StatusUnauthorized, "UNAUTHENTICATED"},
}

// HTTPStatus is the HTTP status Google's REST APIs answer for code; 500 for a
// code it does not know.
func HTTPStatus(code codes.Code) int {
	if int(code) < len(codeInfo) {
		return codeInfo[code].http
	}
	return http.StatusInternalServerError
}

// StatusName is the REST status name of code, e.g. "RESOURCE_EXHAUSTED";
// "UNKNOWN" for a code it does not know.
func StatusName(code codes.Code) string {
	if int(code) < len(codeInfo) {
		return codeInfo[code].name
	}
	return "UNKNOWN"
}

// codeOfName is the gRPC code a REST status name spells, e.g.
// RESOURCE_EXHAUSTED.
func codeOfName(name []byte) (codes.Code, bool) {
	for c := range codeInfo {
		if codeInfo[c].name == string(name) {
			return codes.Code(c), true
		}
	}
	return codes.Unknown, false
}

// statusOverloaded is the HTTP status of Anthropic's overloaded_error.
const statusOverloaded = 529

// codeOfHTTP is the gRPC code of an HTTP error status that came without a
// status name (from a proxy in front of the API, say): the code codeInfo
// gives the status (the first, where codes share one), except where a bare
// status says more or less than that code. Other statuses are, as Google
// maps them, the region's (5xx) or the caller's (4xx).
func codeOfHTTP(httpStatus int) codes.Code {
	switch httpStatus {
	case http.StatusConflict:
		// Shared by AlreadyExists and Aborted; only a body tells them apart,
		// and a bare conflict is one to try again.
		return codes.Aborted
	case http.StatusInternalServerError:
		// Shared by Unknown, Internal and DataLoss: a failure of the region.
		return codes.Internal
	case http.StatusBadGateway:
		// A proxy that could not reach the region.
		return codes.Unavailable
	case statusOverloaded:
		// Anthropic's overloaded_error, which Vertex AI relays for Claude:
		// the model's capacity is full now, and the call was refused before
		// the model ran, as a 429 refuses one: a capacity refusal (the
		// call spills, and the region is throttled, not ejected), not a
		// failure of the region.
		return codes.ResourceExhausted
	}
	if httpStatus >= 400 {
		for c := range codeInfo {
			if codeInfo[c].http == httpStatus {
				return codes.Code(c)
			}
		}
	}
	switch {
	case httpStatus >= 500:
		return codes.Internal
	case httpStatus >= 400:
		return codes.FailedPrecondition
	}
	return codes.Unknown
}

// Error is a region's REST error answer, kept whole so that the caller can be
// given it byte for byte. Its gRPC status (GRPCStatus) is what Classify and
// Code read: the code the body's error.status names, or the one Google maps
// its HTTP status to when it names none.
type Error struct {
	// HTTPStatus is the answer's HTTP status.
	HTTPStatus int
	// Code and Message are read from the body.
	Code    codes.Code
	Message string
	// Header and Body are the answer's, Body read up to maxErrorBody bytes.
	Header http.Header
	Body   []byte
}

func (e *Error) Error() string {
	return fmt.Sprintf("region answered %d %s: %s", e.HTTPStatus, StatusName(e.Code), e.Message)
}

// GRPCStatus is the error's status, for status.FromError.
func (e *Error) GRPCStatus() *status.Status { return status.New(e.Code, e.Message) }

// maxErrorBody bounds how much of an error answer is read: Google's error
// JSON is a few hundred bytes, details included.
const maxErrorBody = 64 << 10

// readError reads a region's error answer and closes its body.
func readError(resp *http.Response) *Error {
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	e := &Error{HTTPStatus: resp.StatusCode, Code: codeOfHTTP(resp.StatusCode), Header: resp.Header, Body: body}
	if g, ok := parseGoogleError(body); ok {
		e.Message = g.Message
		if c, ok := codeOfName([]byte(g.Status)); ok && c != codes.OK {
			e.Code = c
		}
	}
	if e.Message == "" {
		e.Message = http.StatusText(resp.StatusCode)
	}
	return e
}

// parseGoogleError reads the error of a Google error answer: one object,
// {"error":{...}}, or, as Google's streaming and OpenAI-compatible endpoints
// answer, an array of them, [{"error":{...}}], of which the first counts.
func parseGoogleError(body []byte) (googleErrorBody, bool) {
	var one googleError
	if json.Unmarshal(body, &one) == nil {
		return one.Error, true
	}
	var many []googleError
	if json.Unmarshal(body, &many) == nil && len(many) > 0 {
		return many[0].Error, true
	}
	return googleErrorBody{}, false
}

// googleError is the body of a Google REST error.
type googleError struct {
	Error googleErrorBody `json:"error"`
}

type googleErrorBody struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Status  string `json:"status"`
}

// GoogleError is a JSON error body shaped like Google's REST errors, which
// Google's client libraries parse:
// {"error":{"code":429,"message":"...","status":"RESOURCE_EXHAUSTED"}}.
func GoogleError(code codes.Code, message string) []byte {
	return GoogleErrorStatus(HTTPStatus(code), code, message)
}

// GoogleErrorStatus is GoogleError for an answer whose HTTP status is not the
// one Google maps code to, such as 413 with INVALID_ARGUMENT.
func GoogleErrorStatus(httpCode int, code codes.Code, message string) []byte {
	b, err := json.Marshal(googleError{Error: googleErrorBody{Code: httpCode, Message: message, Status: StatusName(code)}})
	if err != nil {
		// Marshaling strings and ints cannot fail.
		panic(err)
	}
	return b
}

// anthropicError is the body of an Anthropic error event, with Google's
// code and status beside Anthropic's type.
type anthropicError struct {
	Type  string             `json:"type"`
	Error anthropicErrorBody `json:"error"`
}

type anthropicErrorBody struct {
	Type    string `json:"type"`
	Message string `json:"message"`
	Code    int    `json:"code"`
	Status  string `json:"status"`
}

// AnthropicError is an error shaped as Anthropic's API writes one, which
// Anthropic's SDKs read from a Claude stream's error event
// ({"type":"error","error":{"type":"api_error","message":"..."}}), carrying
// Google's code and status too, as GoogleError does.
func AnthropicError(code codes.Code, message string) []byte {
	b, err := json.Marshal(anthropicError{Type: "error", Error: anthropicErrorBody{
		Type: "api_error", Message: message, Code: HTTPStatus(code), Status: StatusName(code),
	}})
	if err != nil {
		// Marshaling strings and ints cannot fail.
		panic(err)
	}
	return b
}

// Report is what the policy learns from an attempt that ended with err:
// ClassifyContext's outcome, read on the caller's context, and a Failure that
// was DEADLINE_EXCEEDED marked as a timeout, which shrinks the region's
// in-flight limit when it waited longer than the region's slowest recent
// answer (a 429 never does).
//
// pool is the call's pool: a NOT_FOUND saying the location does not serve
// its model (ModelNotServed) is the region's Failure, whoever's credentials
// the call carried.
//
// callers says the attempt carried its caller's own credentials
// (Clients.CallersCredentials: --caller-auth=forward). Google refusing them
// (UNAUTHENTICATED: a token expired, revoked or not Google's;
// PERMISSION_DENIED: an identity without aiplatform.endpoints.predict on the
// project) then refused that caller, not the region: CallerFault, which is
// never retried and counts toward nothing. Were it a Failure, one caller with
// a stale token, or a neighbor in a shared cluster sending calls with a
// made-up one, would eject every pay-as-you-go region and demote every PT
// for all the pool's callers, and spend the retry budget they share on calls
// no region can serve. Google checks credentials before any quota, so such
// a call is also Uncounted: the router's request meters give its room back.
func Report(caller context.Context, err error, callers bool, pool table.Key) policy.Report {
	o := ClassifyContext(caller, err)
	if o == policy.CallerFault {
		// Read only for a caller fault: a success costs nothing more.
		if s, ok := status.FromError(err); ok && s.Code() == codes.NotFound && ModelNotServed(s.Message(), pool) {
			o = policy.Failure
		}
	}
	if o == policy.Failure && callers {
		switch Code(err) {
		case codes.Unauthenticated, codes.PermissionDenied:
			return policy.Report{Outcome: policy.CallerFault, Uncounted: true}
		}
	}
	return policy.Report{Outcome: o, Timeout: o == policy.Failure && Code(err) == codes.DeadlineExceeded}
}

// deadlinePassed reports whether ctx's deadline is behind us. gRPC runs its
// own timer from the deadline and can fail a call with DEADLINE_EXCEEDED a
// moment before the context itself reports it is done; the caller's deadline
// ran out all the same, and the region must not be blamed for it.
func deadlinePassed(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}
