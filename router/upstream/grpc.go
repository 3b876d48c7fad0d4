package upstream

import (
	"context"
	"strings"

	"cloud.google.com/go/aiplatform/apiv1/aiplatformpb"
	"google.golang.org/genproto/googleapis/api/httpbody"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// outgoing returns ctx with the capacity headers of the call in its
// outgoing metadata, replacing any ctx already carried (from an earlier
// attempt to another region, or from the caller), and the call's
// credentials for callCredentials.
func (c *Clients) outgoing(ctx context.Context, t *Target) (context.Context, error) {
	requestType, sharedRequestType := Headers(t)
	return c.withMetadata(ctx, t.CallerAuthorization, func(md metadata.MD) {
		delete(md, RequestTypeHeader)
		delete(md, SharedRequestTypeHeader)
		if requestType != "" {
			md.Set(RequestTypeHeader, requestType)
		}
		if sharedRequestType != "" {
			md.Set(SharedRequestTypeHeader, sharedRequestType)
		}
	})
}

// withMetadata readies ctx for one gRPC call: the credentials the
// Authorizer gives for callerAuthorization (for callCredentials), and a
// copy of the outgoing metadata ctx carries, changed by edit, with the
// call's trace context, which replaces the caller's traceparent when ctx
// carries a span.
func (c *Clients) withMetadata(ctx context.Context, callerAuthorization string, edit func(metadata.MD)) (context.Context, error) {
	auth, err := c.authorization(ctx, &Target{CallerAuthorization: callerAuthorization})
	if err != nil {
		return nil, err
	}
	if auth != "" {
		ctx = context.WithValue(ctx, authKey{}, auth)
	}
	md, ok := metadata.FromOutgoingContext(ctx)
	if ok {
		md = md.Copy()
	} else {
		md = metadata.MD{}
	}
	edit(md)
	c.opts.Propagator.Inject(ctx, MetadataCarrier(md))
	if !ok && len(md) == 0 {
		return ctx, nil
	}
	return metadata.NewOutgoingContext(ctx, md), nil
}

// MetadataCarrier carries a trace context in gRPC metadata, for an
// OpenTelemetry propagator.
type MetadataCarrier metadata.MD

// Get returns the first value of key.
func (m MetadataCarrier) Get(key string) string {
	if v := metadata.MD(m).Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

// Set replaces the values of key.
func (m MetadataCarrier) Set(key, value string) { metadata.MD(m).Set(key, value) }

// Keys lists the keys.
func (m MetadataCarrier) Keys() []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}

// start counts a call on the endpoint of t and readies its context; the
// caller must release the endpoint.
func (c *Clients) start(ctx context.Context, t *Target) (*endpoint, context.Context, error) {
	e, err := c.acquire(t.Region.Endpoint)
	if err != nil {
		return nil, nil, err
	}
	if ctx, err = c.outgoing(ctx, t); err != nil {
		e.release()
		return nil, nil, err
	}
	return e, ctx, nil
}

// shallowCopy returns a new message of m's type sharing m's field values, so
// that a request can be given another model without touching the caller's
// request or copying its contents. Unknown fields are kept: a field this
// build's protos do not know reaches the region as the caller sent it.
func shallowCopy[M proto.Message](m M) M {
	src := m.ProtoReflect()
	dst := src.New()
	src.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		dst.Set(fd, v)
		return true
	})
	if u := src.GetUnknown(); len(u) > 0 {
		dst.SetUnknown(u)
	}
	return dst.Interface().(M)
}

// GenerateContent calls GenerateContent on the region of t. req is not
// modified; the call carries a copy whose model is ModelName(t.Pool,
// t.Region).
func (c *Clients) GenerateContent(ctx context.Context, req *aiplatformpb.GenerateContentRequest, t Target) (*aiplatformpb.GenerateContentResponse, error) {
	e, ctx, err := c.start(ctx, &t)
	if err != nil {
		return nil, err
	}
	defer e.release()
	return e.prediction.GenerateContent(ctx, forRegion(req, t))
}

// forRegion is a copy of req that names the model of t's pool in t's region.
func forRegion(req *aiplatformpb.GenerateContentRequest, t Target) *aiplatformpb.GenerateContentRequest {
	r := shallowCopy(req)
	r.Model = ModelName(t.Pool, t.Region)
	return r
}

// StreamGenerateContent starts StreamGenerateContent on the region of t and
// returns the stream, so that the caller can relay chunks as they come. The
// stream lives as long as ctx: the caller must cancel ctx when done with it,
// which also ends its count on the endpoint. req is not modified.
func (c *Clients) StreamGenerateContent(ctx context.Context, req *aiplatformpb.GenerateContentRequest, t Target) (aiplatformpb.PredictionService_StreamGenerateContentClient, error) {
	e, sctx, err := c.start(ctx, &t)
	if err != nil {
		return nil, err
	}
	context.AfterFunc(ctx, e.release)
	return e.prediction.StreamGenerateContent(sctx, forRegion(req, t))
}

// CountTokens calls CountTokens on the region of t. For a publisher model
// the request's endpoint field holds the model resource name (the REST path
// .../publishers/*/models/*:countTokens binds to it), so it is set to
// ModelName(t.Pool, t.Region), and so is the model field when the caller set
// it. req is not modified.
func (c *Clients) CountTokens(ctx context.Context, req *aiplatformpb.CountTokensRequest, t Target) (*aiplatformpb.CountTokensResponse, error) {
	return call(c, ctx, t, req, nameEndpoint[*aiplatformpb.CountTokensRequest],
		func(e *endpoint, ctx context.Context, r *aiplatformpb.CountTokensRequest) (*aiplatformpb.CountTokensResponse, error) {
			return e.utility.CountTokens(ctx, r)
		})
}

// nameEndpoint sets the endpoint field of a token request (CountTokens,
// ComputeTokens) to name, and its model field too when the caller set it.
// For a publisher model the REST path .../publishers/*/models/*:countTokens
// binds to the endpoint field; the two requests have the same fields and
// no common interface to set them, so they are set by name.
func nameEndpoint[Q proto.Message](r Q, name string) {
	m := r.ProtoReflect()
	fields := m.Descriptor().Fields()
	m.Set(fields.ByName("endpoint"), protoreflect.ValueOfString(name))
	if f := fields.ByName("model"); m.Has(f) {
		m.Set(f, protoreflect.ValueOfString(name))
	}
}

// call makes one unary call on the region of t with a copy of req that
// name gives the region's model name (ModelName): the caller's request is
// not modified, and its unknown fields go on.
func call[Q proto.Message, R any](c *Clients, ctx context.Context, t Target, req Q, name func(Q, string),
	send func(*endpoint, context.Context, Q) (R, error),
) (R, error) {
	e, ctx, err := c.start(ctx, &t)
	if err != nil {
		var zero R
		return zero, err
	}
	defer e.release()
	r := shallowCopy(req)
	name(r, ModelName(t.Pool, t.Region))
	return send(e, ctx, r)
}

// Caches readies a call of Vertex AI's GenAiCacheService on endpoint,
// outside routing (a location's cached contents, which only it serves): the
// service on the endpoint's connection, and ctx with the credentials the
// Authorizer gives for callerAuthorization and with routing, the resource
// the call names as the aiplatform clients send it (x-goog-request-params,
// "name=..." or "parent=..."). The caller's other outgoing metadata in ctx
// goes on. done ends the call's count on the endpoint.
func (c *Clients) Caches(ctx context.Context, endpoint, callerAuthorization, routing string) (svc aiplatformpb.GenAiCacheServiceClient, cctx context.Context, done func(), err error) {
	e, err := c.acquire(endpoint)
	if err != nil {
		return nil, nil, nil, err
	}
	cctx, err = c.withMetadata(ctx, callerAuthorization, func(md metadata.MD) { md.Set("x-goog-request-params", routing) })
	if err != nil {
		e.release()
		return nil, nil, nil, err
	}
	return aiplatformpb.NewGenAiCacheServiceClient(e.conn), cctx, e.release, nil
}

// ComputeTokens calls ComputeTokens on the region of t, its endpoint and
// model set as CountTokens sets them. req is not modified.
func (c *Clients) ComputeTokens(ctx context.Context, req *aiplatformpb.ComputeTokensRequest, t Target) (*aiplatformpb.ComputeTokensResponse, error) {
	return call(c, ctx, t, req, nameEndpoint[*aiplatformpb.ComputeTokensRequest],
		func(e *endpoint, ctx context.Context, r *aiplatformpb.ComputeTokensRequest) (*aiplatformpb.ComputeTokensResponse, error) {
			return e.utility.ComputeTokens(ctx, r)
		})
}

// Predict calls Predict on the region of t, its endpoint set to the
// region's model name. req is not modified.
func (c *Clients) Predict(ctx context.Context, req *aiplatformpb.PredictRequest, t Target) (*aiplatformpb.PredictResponse, error) {
	return call(c, ctx, t, req, func(r *aiplatformpb.PredictRequest, name string) { r.Endpoint = name },
		func(e *endpoint, ctx context.Context, r *aiplatformpb.PredictRequest) (*aiplatformpb.PredictResponse, error) {
			return e.prediction.Predict(ctx, r)
		})
}

// RawPredict calls RawPredict (a partner model's: Claude's Messages API in
// an HttpBody) on the region of t, its endpoint set to the region's model
// name; for Anthropic's count_tokens, whose endpoint names the model
// count-tokens (the model counted for is in the body), to that model of
// the region. req is not modified.
func (c *Clients) RawPredict(ctx context.Context, req *aiplatformpb.RawPredictRequest, t Target) (*httpbody.HttpBody, error) {
	counts := strings.HasSuffix(req.GetEndpoint(), "/models/"+AnthropicCountTokens)
	return call(c, ctx, t, req, func(r *aiplatformpb.RawPredictRequest, name string) {
		if counts {
			name = name[:strings.LastIndex(name, "/models/")] + "/models/" + AnthropicCountTokens
		}
		r.Endpoint = name
	},
		func(e *endpoint, ctx context.Context, r *aiplatformpb.RawPredictRequest) (*httpbody.HttpBody, error) {
			return e.prediction.RawPredict(ctx, r)
		})
}

// AnthropicCountTokens is the model of Anthropic's count_tokens on Vertex
// AI: rawPredict of publishers/anthropic/models/count-tokens, the model it
// counts for named in the body. Over REST the server names it in the path
// (Request.PathModel); over gRPC RawPredict keeps it in the endpoint.
const AnthropicCountTokens = "count-tokens"

// StreamRawPredict opens StreamRawPredict on the region of t, as
// StreamGenerateContent opens its stream, the request's endpoint set to the
// region's model name. req is not modified.
func (c *Clients) StreamRawPredict(ctx context.Context, req *aiplatformpb.StreamRawPredictRequest, t Target) (aiplatformpb.PredictionService_StreamRawPredictClient, error) {
	e, sctx, err := c.start(ctx, &t)
	if err != nil {
		return nil, err
	}
	context.AfterFunc(ctx, e.release)
	r := shallowCopy(req)
	r.Endpoint = ModelName(t.Pool, t.Region)
	return e.prediction.StreamRawPredict(sctx, r)
}

// EmbedContent calls EmbedContent on the region of t, its model set to the
// region's model name. req is not modified.
func (c *Clients) EmbedContent(ctx context.Context, req *aiplatformpb.EmbedContentRequest, t Target) (*aiplatformpb.EmbedContentResponse, error) {
	return call(c, ctx, t, req, func(r *aiplatformpb.EmbedContentRequest, name string) { r.Model = &name },
		func(e *endpoint, ctx context.Context, r *aiplatformpb.EmbedContentRequest) (*aiplatformpb.EmbedContentResponse, error) {
			return e.prediction.EmbedContent(ctx, r)
		})
}
