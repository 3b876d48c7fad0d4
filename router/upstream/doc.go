// Package upstream calls Vertex AI regions, over REST or gRPC, the way the
// caller called the router. Each region endpoint gets its connections on
// first use, reused by every later call: an HTTP transport of its own (HTTP/2
// over TLS to Google; in plaintext, to emulators, the router's own HTTP/1.1
// client) and a gRPC connection with the aiplatform clients on it.
// Retain closes those of endpoints that left the routing table once their
// calls have ended.
//
// A call names its Target: the pool and the region the policy picked, and the
// caller's own Authorization. Over REST (Send) the caller's body bytes go on
// unchanged, to the same API version, with only what routing must change:
// the host, the location in the path, the capacity headers
// X-Vertex-AI-LLM-Request-Type and X-Vertex-AI-LLM-Shared-Request-Type
// (derived here, from the capacity the policy picked: Headers) and the
// credentials. Over gRPC the request's model is rewritten and the capacity
// headers travel as metadata; fields this build's
// protos do not know travel as the protobuf runtime's unknown fields.
//
// Credentials are chosen per call by an Authorizer: the router's own
// Application Default Credentials (ApplicationDefault), or any other rule,
// such as sending the caller's own token. They travel only over TLS, unless
// Options.Insecure, the emulators' and tests' plaintext setup, says otherwise.
//
// An answer is read only as far as the router needs: AnswerScanner finds the
// usageMetadata (tokens, traffic type), a chat completion's or a Claude
// message's usage, and a
// stream's error while the bytes pass, without decoding them; BodyModel
// reads a chat completion's model (or Anthropic's count_tokens') the same way. A REST error answer is kept whole (*Error) to
// be passed on byte for byte. Classify turns a call's error into the
// policy.Outcome the router learns from, telling Google's two 429s apart
// (a full PT's, ProvisionedFull; pay-as-you-go's, Capacity); HTTPStatus and
// GoogleError turn it into the answer the caller sees when the router
// answers itself.
package upstream
