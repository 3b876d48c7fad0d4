// Package auth decides who a call to the router is from, and what the pool
// lets it do: whether it may call at all, and the highest priority it may
// claim. The router never is more powerful than its caller.
//
// How the router knows its callers is the Mode (the router's --caller-auth):
//
//   - ModeForward (the default): the caller's own Google token, its
//     "Authorization: Bearer" header, goes to Google with its call (Forward
//     is the upstream Authorizer that does it), and the router holds no
//     Google identity. Every call is the caller's in IAM and in Cloud Audit
//     Logs; a call without a token is refused (401). The pool's
//     callers.maxPriority caps what any caller may claim.
//   - ModeKubernetes: the router calls Google as itself and admits only
//     callers that present a Kubernetes ServiceAccount token with the
//     audience "regionwarden" (a projected token), checked with a
//     TokenReview through the API server (Reviewer, cached by the token's
//     hash until it expires, within a bounded cache). The pool's
//     callers.serviceAccounts list who may call (403 otherwise) and each
//     one's ceiling.
//   - ModeNone: nobody is checked; for emulators and tests only (the router
//     allows it only with --upstream-insecure). The pool-wide ceiling still
//     applies.
//
// Refusals are *Error values that carry the HTTP status and gRPC code of
// Google's error model, so the router answers them as Google would.
//
// This package imports nothing from the operator: router pods run without the
// operator's types.
package auth
