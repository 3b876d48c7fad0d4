// Package emulator runs emulated Vertex AI regions for incident replays and
// demos: each region is a real gRPC PredictionService and a Vertex REST front,
// both on one loopback address as on Google's regional endpoints (and the REST
// front alone on a second one), with the capacity, latency and faults that a
// Scenario declares, and a Cloud Monitoring MetricService that reports the
// Provisioned Throughput the scenario bought.
//
// Time is scenario time: a Clock maps real time onto it with a scale factor, so
// a 30-minute incident replays in a minute at scale 30. Every rule the scenario
// states (fault windows, capacity windows, latencies) is read on that clock,
// and tests drive a ManualClock by hand.
//
// What a region does with one call, in order:
//
//  1. A full outage refuses the call (connection dropped, or UNAVAILABLE).
//  2. Capacity admits it or answers 429, according to the request type that
//     the x-vertex-ai-llm-request-type header asks for: dedicated (PT only:
//     429 "Too many requests. Exceeded the Provisioned Throughput." beyond
//     it), shared (pay-as-you-go only) or absent (PT first, then spillover to
//     pay-as-you-go), and to the pay-as-you-go tier that
//     x-vertex-ai-llm-shared-request-type names: standard (none, the
//     region's capacity, ON_DEMAND), priority (ON_DEMAND_PRIORITY) or flex
//     (ON_DEMAND_FLEX), each with a quota of its own where the scenario
//     offers it, and refused (400) where it does not. Pay-as-you-go beyond
//     its quota answers 429 "Resource exhausted. Please try again later.".
//  3. The active fault windows may fail it with their code, in bursts.
//  4. The region waits its latency (scenario time) and answers, carrying
//     usageMetadata with token counts and the trafficType that served it.
//     A stream (streamGenerateContent: server-sent events or a JSON array
//     over REST, a server stream over gRPC) comes in a few chunks, the
//     latency spread before them; a call the faults fail fails before its
//     first chunk, or, under a fault that breaks streams, after it (the
//     error as the stream's last event), where it cannot be retried.
//
// Each region serves the OpenAI-compatible chat completions too
// (openai.go), and a partner model's rawPredict and streamRawPredict as
// Anthropic's Messages API (anthropic.go: a scenario of publisher
// anthropic emulates Claude on Vertex AI) and Live API sessions, each turn
// served as a call (live.go), from the same capacity, and
// keeps the context caches made in it (caches.go): a call that names a cache another region holds is
// refused, as Google refuses it.
//
// Randomness is seeded per region and per fault window, so the same seed
// gives the same fault pattern for the same arrival order.
package emulator
