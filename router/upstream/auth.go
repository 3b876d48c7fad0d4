package upstream

import (
	"context"
	"fmt"
	"sync/atomic"

	"cloud.google.com/go/auth"
	"cloud.google.com/go/auth/credentials"
)

// Authorizer chooses the credentials of each call to a region, per call, so
// that one router can call as itself or as its caller. It is asked once per
// attempt, on both surfaces, and must be safe for concurrent use.
type Authorizer interface {
	// Authorization returns the value of the Authorization header (gRPC
	// metadata "authorization") the call carries, "" for none. caller is the
	// Authorization the router's caller presented, "" when it sent none; an
	// error fails the attempt before anything is sent.
	Authorization(ctx context.Context, caller string) (string, error)
}

// CallersOwn is implemented by an Authorizer whose calls carry each caller's
// own credentials and never the router's (the router's auth.Forward). Google
// refusing them then refused the caller, not the region (Report).
type CallersOwn interface {
	Authorizer
	// CallersOwn reports whether every call carries its caller's own
	// credentials.
	CallersOwn() bool
}

// cloudPlatformScope is the OAuth scope of Vertex AI calls.
const cloudPlatformScope = "https://www.googleapis.com/auth/cloud-platform"

// ApplicationDefault is the router's own identity: Application Default
// Credentials (Workload Identity on GKE) with the cloud-platform scope. The
// caller's Authorization is never used. Tokens are cached and refreshed
// before they expire by cloud.google.com/go/auth; the header is built once
// per token.
func ApplicationDefault() (Authorizer, error) {
	creds, err := credentials.DetectDefault(&credentials.DetectOptions{Scopes: []string{cloudPlatformScope}})
	if err != nil {
		return nil, fmt.Errorf("application default credentials: %w", err)
	}
	return TokenAuthorizer(creds), nil
}

// TokenAuthorizer calls as the identity tp gives tokens for, whatever the
// caller presented.
func TokenAuthorizer(tp auth.TokenProvider) Authorizer { return &tokenAuthorizer{tp: tp} }

type tokenAuthorizer struct {
	tp   auth.TokenProvider
	last atomic.Pointer[tokenHeader]
}

// tokenHeader is a token and the header made of it.
type tokenHeader struct {
	tok    *auth.Token
	header string
}

func (a *tokenAuthorizer) Authorization(ctx context.Context, _ string) (string, error) {
	tok, err := a.tp.Token(ctx)
	if err != nil {
		return "", fmt.Errorf("router credentials: %w", err)
	}
	if l := a.last.Load(); l != nil && l.tok == tok {
		return l.header, nil
	}
	typ := tok.Type
	if typ == "" {
		typ = "Bearer"
	}
	h := &tokenHeader{tok: tok, header: typ + " " + tok.Value}
	a.last.Store(h)
	return h.header, nil
}
