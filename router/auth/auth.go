package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"google.golang.org/grpc/codes"

	"github.com/regionwarden/regionwarden/router/table"
)

// Mode is how the router knows its callers.
type Mode string

const (
	// ModeForward sends each caller's own Google token with its call.
	ModeForward Mode = "forward"
	// ModeKubernetes admits callers by their Kubernetes ServiceAccount token.
	ModeKubernetes Mode = "kubernetes"
	// ModeNone checks nobody: emulators and tests only.
	ModeNone Mode = "none"
)

// ParseMode reads a mode as the --caller-auth flag spells it.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeForward, ModeKubernetes, ModeNone:
		return m, nil
	}
	return "", fmt.Errorf("%q is not a caller authentication mode (forward, kubernetes or none)", s)
}

// Caller is who a call is from, as far as the router knows, and what its
// pool lets it claim.
type Caller struct {
	// Namespace and Name are the caller's ServiceAccount under
	// ModeKubernetes; empty in the other modes, where the router does not
	// know who the caller is (Google does, under ModeForward).
	Namespace, Name string
	// MaxPriority is the highest priority the pool lets the caller claim.
	MaxPriority table.Priority
}

// Priority is the priority the call runs at: what the caller asked for,
// lowered to its ceiling. Asking for more is not an error: the call runs at
// the most it may have.
func (c Caller) Priority(asked table.Priority) table.Priority {
	return asked.Cap(c.MaxPriority)
}

// Error is a call refused for who it is from (or is not).
type Error struct {
	// Status is the HTTP status: 401, 403, or 503 when the router could not
	// check the caller.
	Status int
	// Code is the gRPC code of the same answer.
	Code codes.Code
	// Message says why, for the caller.
	Message string
}

func (e *Error) Error() string { return e.Message }

// Reason is a short, fixed word for the refusal, for metrics:
// unauthenticated, forbidden or unavailable.
func (e *Error) Reason() string {
	switch e.Code {
	case codes.Unauthenticated:
		return "unauthenticated"
	case codes.PermissionDenied:
		return "forbidden"
	}
	return "unavailable"
}

func unauthenticated(format string, args ...any) *Error {
	return &Error{Status: http.StatusUnauthorized, Code: codes.Unauthenticated, Message: fmt.Sprintf(format, args...)}
}

// errNoCredential is Google's answer to a call without credentials, in
// substance.
var errNoCredential = unauthenticated("Request is missing required authentication credential: " +
	"send an OAuth 2 access token as \"Authorization: Bearer TOKEN\"")

// ReviewerInterface checks a Kubernetes ServiceAccount token; *Reviewer
// implements it.
type ReviewerInterface interface {
	Review(ctx context.Context, token string) (Identity, error)
}

// Authenticator decides who each call is from. The zero value is not
// usable: make one with New.
type Authenticator struct {
	mode     Mode
	reviewer ReviewerInterface
}

// New returns an Authenticator for mode. ModeKubernetes needs reviewer, the
// others ignore it.
func New(mode Mode, reviewer ReviewerInterface) (*Authenticator, error) {
	if _, err := ParseMode(string(mode)); err != nil {
		return nil, err
	}
	if mode == ModeKubernetes && reviewer == nil {
		return nil, errors.New("caller authentication kubernetes needs a token reviewer")
	}
	return &Authenticator{mode: mode, reviewer: reviewer}, nil
}

// Mode is the authenticator's mode.
func (a *Authenticator) Mode() Mode { return a.mode }

// Authenticate decides who a call to pool is from, given the Authorization
// its caller presented ("" for none). A refusal is an *Error.
func (a *Authenticator) Authenticate(ctx context.Context, authorization string, pool *table.Pool) (Caller, error) {
	switch a.mode {
	case ModeNone:
		return Caller{MaxPriority: pool.Callers.MaxPriority}, nil
	case ModeForward:
		if _, ok := BearerToken(authorization); !ok {
			return Caller{}, errNoCredential
		}
		return Caller{MaxPriority: pool.Callers.MaxPriority}, nil
	}
	token, ok := BearerToken(authorization)
	if !ok {
		return Caller{}, unauthenticated("Request is missing required authentication credential: "+
			"send a Kubernetes ServiceAccount token with the audience %q as \"Authorization: Bearer TOKEN\"", Audience)
	}
	id, err := a.reviewer.Review(ctx, token)
	if err != nil {
		return Caller{}, err
	}
	ceiling, ok := pool.Callers.MaxPriorityFor(id.Namespace, id.Name)
	if !ok {
		return Caller{}, &Error{Status: http.StatusForbidden, Code: codes.PermissionDenied, Message: fmt.Sprintf(
			"ServiceAccount %s/%s may not call %s/%s/%s: the RegionPool %s/%s does not list it in spec.callers.serviceAccounts",
			id.Namespace, id.Name, pool.Project, pool.Publisher, pool.Model, pool.Namespace, pool.Name)}
	}
	return Caller{Namespace: id.Namespace, Name: id.Name, MaxPriority: ceiling}, nil
}

// BearerToken is the token of an "Authorization: Bearer TOKEN" value; false
// when the value is not one (the scheme is matched without case, as RFC
// 9110 says).
func BearerToken(authorization string) (string, bool) {
	scheme, token, ok := strings.Cut(authorization, " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" || strings.ContainsAny(token, " \t\r\n") {
		return "", false
	}
	return token, true
}

// Forward is the upstream Authorizer of ModeForward: each call carries the
// caller's own bearer token, and nothing else ever. A call without one
// fails before anything is sent (the Authenticator has already refused it;
// this holds even if it had not).
type Forward struct{}

// CallersOwn is true: Google refusing a call's credentials refused its
// caller, not the region (upstream.Report).
func (Forward) CallersOwn() bool { return true }

// Authorization returns the caller's Authorization when it is a bearer token.
func (Forward) Authorization(_ context.Context, caller string) (string, error) {
	token, ok := BearerToken(caller)
	if !ok {
		return "", errNoCredential
	}
	return "Bearer " + token, nil
}
