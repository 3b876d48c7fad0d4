// Package tracing sets up OpenTelemetry tracing for the operator and the
// router from the standard OTEL_* environment variables, and carries trace
// and span IDs into logs.
//
// It is configured by the environment alone, as every OpenTelemetry SDK is:
// OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) turns it
// on; OTEL_EXPORTER_OTLP_PROTOCOL (grpc or http/protobuf, the default), the
// headers, timeout, compression and certificate variables, OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES and OTEL_TRACES_SAMPLER (with
// OTEL_TRACES_SAMPLER_ARG) are read by the SDK and its exporters. With no
// endpoint set, or OTEL_SDK_DISABLED=true, or OTEL_TRACES_EXPORTER=none,
// tracing is off and costs a no-op span per instrumented call.
//
// A collector that is down never slows a traced call: spans go through the
// SDK's batch span processor, whose queue is bounded (OTEL_BSP_MAX_QUEUE_SIZE,
// 2048 by default) and drops spans when full instead of blocking; exports and
// their retries run on its own goroutine.
//
// The W3C trace context (traceparent, tracestate) and baggage are the
// propagators, on or off, so a caller's trace continues through regionwarden
// to Google even when regionwarden records no spans of its own.
//
// Nothing here imports the operator's API or controllers: the router uses it
// too.
package tracing
