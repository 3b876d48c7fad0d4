// Package upstream calls Vertex AI regions: one aiplatform client per region
// endpoint, created on first use and reused by every call to that endpoint.
//
// A call names the pool and the region chosen for it. The request's model is
// rewritten to that region's publisher model resource name, and the call
// carries the X-Vertex-AI-LLM-Request-Type the region's tier asks for. The
// router always calls with its own credentials (Application Default
// Credentials); a caller's Authorization header is never forwarded.
//
// Classify turns a call's error into the policy.Outcome the router learns
// from; HTTPStatus and GoogleError turn it into the answer the caller sees.
package upstream
