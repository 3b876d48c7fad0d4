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
//	POST /{v1,v1beta1}/projects/{p}/locations/{l}/endpoints/openapi/chat/completions
//	GET  /metrics, /debug/pools, /healthz, /readyz
//
// The pool is found by project, publisher and model; the location in the path
// is the client's wish, not an order. The OpenAI-compatible chat completions
// (chat.go) name the model in the body, "google/{model}", which the router
// reads without decoding the rest; they are routed and forwarded like the
// other calls, streams (server-sent events) included.
//
// # Bytes through
//
// The router does not decode bodies. The caller's body bytes go to the
// region's Vertex REST endpoint, on the API version the caller used, with
// only the host, the location in the path, the capacity headers (the request
// type and the pay-as-you-go tier, from the capacity the policy picked) and
// the credentials changed (router/upstream); the answer comes back as it
// arrives, streams flushed chunk by chunk, server-sent events (?alt=sse) or
// one JSON array alike. Of the answer the router reads only what it needs,
// as the bytes pass: the status, Google's error JSON (whose message tells a
// full PT's 429 from pay-as-you-go's), and the usageMetadata (or a chat
// completion's usage) with its traffic type and token counts. A field neither the router nor its
// protos know passes untouched in both directions, and an error the region
// answers reaches the caller byte for byte. The errors the router answers
// itself are Google's error JSON ({"error":{"code","message","status"}}),
// which the client libraries parse.
//
// The gRPC surface (RegisterGRPC) serves PredictionService's GenerateContent
// and StreamGenerateContent and LlmUtilityService's CountTokens, routed by
// the same pools and policy and forwarded with the aiplatform clients; a
// field this build's protos do not know travels as the protobuf runtime's
// unknown fields, both ways.
//
// # One request
//
// Each request starts a policy.Call. Its first attempt is picked before the
// body is read (admission: the pool's and the region's in-flight places),
// and the body's bytes are taken from the router's budget of body bytes in
// flight (over it: 429 with Retry-After); then the body is read within the
// body read deadline. Each attempt calls the region the policy picked, with
// the credentials the upstream's Authorizer chooses, and reports the outcome
// with the tokens the answer used (Attempt.Finish), so provisioned token
// capacity is accounted. A failed or throttled attempt is retried in another
// region while the policy allows it (attempts, retry budget, the overall
// deadline). A stream is retried only before its first chunk reached the
// caller: once bytes are sent the answer is committed, and each write must
// complete within the write timeout, or the caller is cut off and the call
// ends. Over-capacity and shed refusals answer 429 with Retry-After. The call
// (serveREST, the gRPC methods, and call) and each attempt (call.attempts)
// are the places where tracing spans begin.
//
// # Tables
//
// Apply installs a routing table: one policy.Pool per table pool, updated in
// place when the pool was already served (policy.Pool.Update keeps the live
// state of regions still present), dropped when the pool left the table; one
// policy.Budget is shared by every pool. A request holds the pool it started
// with until it ends. The metric series of a pool that left are deleted once
// its last request ends, and connections to endpoints no pool names are
// closed once their calls end. The router is ready while it serves a pool.
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
