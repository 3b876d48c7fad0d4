// Package server is the router's front: it speaks Vertex AI's REST surface
// for publisher models, so that applications point their genai SDK at the
// router and change nothing else, and it routes each call to a region of the
// pool the routing table gives for the call's project, publisher and model.
//
// # Surface
//
//	POST /{v1,v1beta1}/projects/{p}/locations/{l}/publishers/{pub}/models/{m}:generateContent
//	POST /{v1,v1beta1}/projects/{p}/locations/{l}/publishers/{pub}/models/{m}:streamGenerateContent[?alt=sse]
//	POST /{v1,v1beta1}/projects/{p}/locations/{l}/publishers/{pub}/models/{m}:countTokens
//	GET  /metrics, /debug/pools, /healthz, /readyz
//
// The pool is found by project, publisher and model; the location in the path
// is the client's wish, not an order. Bodies are protojson; every error is
// Google's error JSON ({"error":{"code","message","status"}}), which the
// client libraries parse. A stream is server-sent events with ?alt=sse (each
// event a "data: {json}" line and a blank line) and one JSON array without it.
//
// # One request
//
// The caller's Authorization header is never forwarded: the router calls
// Vertex AI with its own credentials (router/upstream). Each request starts a
// policy.Call; each attempt asks Call.Pick for a region, calls it with the
// model rewritten to that region and the request type the region's tier asks
// for, and reports the outcome with the tokens the answer used
// (Attempt.Finish), so provisioned token capacity is accounted. A failed or
// throttled attempt is retried in another region while the policy allows it
// (attempts, retry budget, the overall deadline). A stream is retried only
// before its first chunk reached the caller: once bytes are sent the answer
// is committed. Over-capacity and shed refusals answer 429 with Retry-After.
//
// # Tables
//
// Apply installs a routing table: one policy.Pool per table pool, updated in
// place when the pool was already served (policy.Pool.Update keeps the live
// state of regions still present), dropped when the pool left the table; one
// policy.Budget is shared by every pool. A request holds the pool it started
// with until it ends.
//
// # Clock
//
// The policy reads an injected clock (Options.Now). Incident replays run the
// router with a clock that runs faster than real time (ScaledClock); request
// deadlines, which are real time, are translated onto that clock
// (Options.ClockScale).
//
// # Logging
//
// Requests are logged with method, path, pool, region, status and latency;
// never prompts, responses or the Authorization header.
package server
