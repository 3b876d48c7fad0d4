package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"cloud.google.com/go/aiplatform/apiv1/aiplatformpb"
	"google.golang.org/genproto/googleapis/api/httpbody"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/regionwarden/regionwarden/router/policy"
	"github.com/regionwarden/regionwarden/router/table"
	"github.com/regionwarden/regionwarden/router/upstream"
)

// metadataPriority is HeaderPriority as gRPC metadata.
var metadataPriority = strings.ToLower(HeaderPriority)

// RegisterGRPC serves Vertex AI's gRPC surface for publisher models on g:
// PredictionService's GenerateContent, StreamGenerateContent, Predict and
// EmbedContent (embeddings) and LlmUtilityService's CountTokens and
// ComputeTokens, so that applications using the aiplatform
// clients point their endpoint at the router; and GenAiCacheService, whose
// calls go to the location they name (caches.go). Calls are routed by the same
// pools and policy as the REST surface, found by the project, publisher and
// model of the request's model (CountTokens: endpoint) resource name, and
// forwarded with the aiplatform clients. A request's fields this build's
// protos do not know travel as the protobuf runtime's unknown fields, both
// ways; the caller's metadata goes on but for what stays with the router.
// The priority is the metadata key x-regionwarden-priority.
func (s *Server) RegisterGRPC(g *grpc.Server) {
	aiplatformpb.RegisterPredictionServiceServer(g, &predictionService{s: s})
	aiplatformpb.RegisterLlmUtilityServiceServer(g, &llmUtilityService{s: s})
	aiplatformpb.RegisterGenAiCacheServiceServer(g, &cacheService{s: s})
}

type predictionService struct {
	aiplatformpb.UnimplementedPredictionServiceServer
	s *Server
}

type llmUtilityService struct {
	aiplatformpb.UnimplementedLlmUtilityServiceServer
	s *Server
}

// grpcCall is one gRPC call on its way through the server.
type grpcCall struct {
	call
	method string // the metric label
	start  time.Time
	code   codes.Code
}

// startGRPC finds the pool of resource, reads the call's priority and
// caller, and admits the call. It returns the call and the context its
// attempts run under (the request timeout, and the caller's metadata to go
// on), with the function that ends both; or the error to answer with.
func (s *Server) startGRPC(ctx context.Context, method, resource string, req proto.Message) (*grpcCall, context.Context, func(), error) {
	g := &grpcCall{call: call{s: s, ctx: ctx}, method: method, start: time.Now()}
	md, _ := metadata.FromIncomingContext(ctx)
	key, err := poolKey(resource)
	if err == nil {
		g.prio, err = parsePriority(first(md, metadataPriority))
		ctx = g.startSpan(ctx, upstream.MetadataCarrier(md), method, key.Model)
	}
	if err != nil {
		return nil, nil, nil, g.end(status.Error(codes.InvalidArgument, err.Error()))
	}
	if g.pool = s.lookup(key); g.pool == nil {
		return nil, nil, nil, g.end(status.Errorf(codes.NotFound,
			"no routing pool for project %q, publisher %q, model %q (the location is not used to find a pool)", key.Project, key.Publisher, key.Model))
	}
	if err := g.authorize(ctx, first(md, "authorization")); err != nil {
		return nil, nil, nil, g.end(status.Error(err.Code, err.Message))
	}
	if gr, ok := req.(*aiplatformpb.GenerateContentRequest); ok {
		if err := g.pinTo(gr.GetCachedContent(), false); err != nil {
			return nil, nil, nil, g.end(status.Error(codes.InvalidArgument, err.Error()))
		}
	}
	// The request is held until its last attempt.
	held, err := s.holdMessage(req)
	if err != nil {
		return nil, nil, nil, g.end(err)
	}
	actx, cancel := context.WithTimeout(metadata.NewOutgoingContext(ctx, forwarded(md)), s.timeout)
	g.pool.inFlight.Inc()
	done := func() {
		cancel()
		g.pool.inFlight.Dec()
		s.bodies.give(held)
	}
	if err := g.admit(actx); err != nil {
		done()
		code, msg, retryAfter := g.refusal(err)
		return nil, nil, nil, g.end(withRetryInfo(status.New(code, msg), retryAfter).Err())
	}
	return g, actx, done, nil
}

// end counts and logs the call, gives back its pool and returns err, the
// call's answer.
func (g *grpcCall) end(err error) error {
	g.code = status.Code(err)
	code, d := upstream.HTTPStatus(g.code), time.Since(g.start)
	if g.pool != nil {
		g.pool.series.request(g.method, code, d)
		g.pool.release()
	} else {
		g.s.metrics.Request("", g.method, code, d)
	}
	g.endSpan(0, g.code)
	return err
}

// fail is the answer to a call whose attempts ended with err: the region's
// status as it gave it, with the Retry-After of a 429 as RetryInfo when it
// carries none.
func (g *grpcCall) fail(err error, retryAfter time.Duration) error {
	st, ok := status.FromError(err)
	if !ok {
		st = status.New(upstream.Code(err), err.Error())
	}
	if st.Code() == codes.ResourceExhausted {
		st = withRetryInfo(st, max(retryAfter, time.Second))
	}
	return g.end(st.Err())
}

// holdMessage takes a gRPC request's bytes from the router's budget of
// request bytes, as a REST body's are: gRPC read it whole before the call
// reached the router. The caller gives them back when the call ends; a
// full budget is RESOURCE_EXHAUSTED with a RetryInfo.
func (s *Server) holdMessage(req proto.Message) (int64, error) {
	held := int64(proto.Size(req))
	if !s.bodies.take(held) {
		return 0, withRetryInfo(status.New(codes.ResourceExhausted, s.bodies.full()), time.Second).Err()
	}
	return held, nil
}

// withRetryInfo adds google.rpc.RetryInfo to st when retryAfter is positive
// and st carries none, as Google's APIs say when to retry over gRPC.
func withRetryInfo(st *status.Status, retryAfter time.Duration) *status.Status {
	if retryAfter <= 0 {
		return st
	}
	for _, d := range st.Details() {
		if _, ok := d.(*errdetails.RetryInfo); ok {
			return st
		}
	}
	if withInfo, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(retryAfter)}); err == nil {
		return withInfo
	}
	return st
}

// poolKey is the pool of a publisher model resource name:
// projects/{p}/locations/{l}/publishers/{pub}/models/{m}.
func poolKey(resource string) (table.Key, error) {
	parts := strings.Split(resource, "/")
	if len(parts) != 8 || parts[0] != "projects" || parts[2] != "locations" || parts[4] != "publishers" || parts[6] != "models" ||
		parts[1] == "" || parts[5] == "" || parts[7] == "" {
		return table.Key{}, fmt.Errorf("%q is not a publisher model: projects/{project}/locations/{location}/publishers/{publisher}/models/{model}", resource)
	}
	return table.Key{Project: parts[1], Publisher: parts[5], Model: parts[7]}, nil
}

func first(md metadata.MD, key string) string {
	if v := md.Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

// forwarded is the caller's metadata that goes on to the region: all of it
// but the transport's own keys (":authority", "content-type", "user-agent",
// "te", "grpc-*"), the credentials (the Authorizer's), the request type and
// shared request type (the capacity the policy picked decides them), the
// router's priority, and what the aiplatform
// client sets itself (x-goog-api-client, and x-goog-request-params, which
// names the caller's location).
func forwarded(in metadata.MD) metadata.MD {
	out := metadata.MD{}
	for k, v := range in {
		switch {
		case strings.HasPrefix(k, ":"), strings.HasPrefix(k, "grpc-"):
			continue
		}
		switch k {
		case "content-type", "user-agent", "te", "authorization", upstream.RequestTypeHeader, upstream.SharedRequestTypeHeader, metadataPriority,
			"x-goog-api-client", "x-goog-request-params":
			continue
		}
		out[k] = v
	}
	return out
}

// tokens is the total an answer's usage reports.
func tokens(u *aiplatformpb.GenerateContentResponse_UsageMetadata) int64 {
	return int64(u.GetTotalTokenCount())
}

// countTraffic counts the answer by the traffic type that served it, and
// records its usage for the trace.
func (g *grpcCall) countTraffic(u *aiplatformpb.GenerateContentResponse_UsageMetadata, t aiplatformpb.GenerateContentResponse_UsageMetadata_TrafficType) {
	g.pool.series.traffic(&g.target.Region, t.String())
	traffic := ""
	if t != aiplatformpb.GenerateContentResponse_UsageMetadata_TRAFFIC_TYPE_UNSPECIFIED {
		traffic = t.String()
	}
	g.answered(int64(u.GetPromptTokenCount()), int64(u.GetCandidatesTokenCount())+int64(u.GetThoughtsTokenCount()), traffic)
}

// GenerateContent routes a unary call.
func (p *predictionService) GenerateContent(ctx context.Context, req *aiplatformpb.GenerateContentRequest) (*aiplatformpb.GenerateContentResponse, error) {
	return unary(ctx, p.s, methodGenerate, req.GetModel(), req, func(ctx context.Context, g *grpcCall) (*aiplatformpb.GenerateContentResponse, policy.Report, error) {
		r, err := p.s.up.GenerateContent(ctx, req, g.target)
		if err != nil {
			return nil, policy.Report{}, err
		}
		g.countTraffic(r.GetUsageMetadata(), r.GetUsageMetadata().GetTrafficType())
		return r, policy.Report{Outcome: policy.Success, Tokens: tokens(r.GetUsageMetadata())}, nil
	})
}

// unary routes a unary call of method to the model resource names: it
// starts the call, tries call on the regions the policy picks until one
// answers or the policy gives up, and ends the call. call returns the
// answer and its report, or the region's error, which the policy is told of.
func unary[Resp any](ctx context.Context, s *Server, method, resource string, req proto.Message,
	call func(context.Context, *grpcCall) (Resp, policy.Report, error),
) (Resp, error) {
	var resp Resp
	g, actx, done, err := s.startGRPC(ctx, method, resource, req)
	if err != nil {
		return resp, err
	}
	defer done()
	retryAfter, err := g.attempts(actx, func(ctx context.Context) (policy.Report, bool, error) {
		r, rep, err := call(ctx, g)
		if err != nil {
			return g.report(err), false, err
		}
		resp = r
		return rep, false, nil
	})
	if err != nil {
		var zero Resp
		return zero, g.fail(err, retryAfter)
	}
	return resp, g.end(nil)
}

// RawPredict routes a partner model's unary call (Claude's Messages API in
// an HttpBody), found by its endpoint, the model resource name; the
// answer's usage is read as the REST surface reads it (rawUsage).
func (p *predictionService) RawPredict(ctx context.Context, req *aiplatformpb.RawPredictRequest) (*httpbody.HttpBody, error) {
	method, resource := methodRaw, req.GetEndpoint()
	if prefix, ok := strings.CutSuffix(resource, "/models/"+upstream.AnthropicCountTokens); ok {
		// Anthropic's count_tokens: the pool is the body's model's, as
		// over REST (rest.go); the region is called with count-tokens.
		model, err := upstream.BodyModel(req.GetHttpBody().GetData())
		if err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		method, resource = methodCount, prefix+"/models/"+model
	}
	return unary(ctx, p.s, method, resource, req, func(ctx context.Context, g *grpcCall) (*httpbody.HttpBody, policy.Report, error) {
		r, err := p.s.up.RawPredict(ctx, req, g.target)
		if err != nil {
			return nil, policy.Report{}, err
		}
		if method == methodCount {
			return r, policy.Report{Outcome: policy.Success}, nil // no generation to count
		}
		scan := upstream.NewAnswerScanner(upstream.FrameObject)
		_, _ = scan.Write(r.GetData())
		g.rawUsage(scan)
		return r, policy.Report{Outcome: policy.Success, Tokens: scan.Tokens}, nil
	})
}

// rawUsage counts a partner model's answer, its usage read by scan: the
// publisher's format carries no traffic type.
func (g *grpcCall) rawUsage(scan *upstream.AnswerScanner) {
	g.pool.series.traffic(&g.target.Region, aiplatformpb.GenerateContentResponse_UsageMetadata_TRAFFIC_TYPE_UNSPECIFIED.String())
	g.answered(scan.InputTokens, scan.OutputTokens, scan.TrafficType)
}

// StreamRawPredict routes a partner model's streamed call: its answer is
// the publisher's server-sent events, in HttpBody messages, relayed as
// StreamGenerateContent relays its messages; an error event (Anthropic's)
// ends the attempt as the region's error, counted before the caller has it.
func (p *predictionService) StreamRawPredict(req *aiplatformpb.StreamRawPredictRequest, out aiplatformpb.PredictionService_StreamRawPredictServer) error {
	g, actx, done, err := p.s.startGRPC(out.Context(), methodStreamRaw, req.GetEndpoint(), req)
	if err != nil {
		return err
	}
	defer done()
	const ended = "the region ended the stream with an error"
	retryAfter, err := g.attempts(actx, func(ctx context.Context) (policy.Report, bool, error) {
		scan := upstream.NewAnswerScanner(upstream.FrameObject)
		return relayStream(ctx, g, out,
			func(ctx context.Context) (receiver[*httpbody.HttpBody], error) {
				return p.s.up.StreamRawPredict(ctx, req, g.target)
			},
			func(m *httpbody.HttpBody) int64 {
				_, _ = scan.Write(m.GetData())
				if scan.Err != codes.OK && !g.settled {
					g.settle(g.report(status.Error(scan.Err, ended)))
				}
				return scan.Tokens
			},
			func() policy.Report {
				if scan.Err != codes.OK {
					return g.report(status.Error(scan.Err, ended))
				}
				g.rawUsage(scan)
				return policy.Report{Outcome: policy.Success}
			})
	})
	if err != nil {
		return g.fail(err, retryAfter)
	}
	return g.end(nil)
}

// ComputeTokens routes a ComputeTokens call, found as CountTokens is.
func (u *llmUtilityService) ComputeTokens(ctx context.Context, req *aiplatformpb.ComputeTokensRequest) (*aiplatformpb.ComputeTokensResponse, error) {
	return routed(ctx, u.s, methodCompute, endpointOr(req.GetEndpoint(), req.GetModel()), req, u.s.up.ComputeTokens)
}

// Predict routes a Predict call (an embedding model's), found by its
// endpoint, the model resource name.
func (p *predictionService) Predict(ctx context.Context, req *aiplatformpb.PredictRequest) (*aiplatformpb.PredictResponse, error) {
	return routed(ctx, p.s, methodPredict, req.GetEndpoint(), req, p.s.up.Predict)
}

// EmbedContent routes an EmbedContent call (a Gemini embedding model's),
// found by its model.
func (p *predictionService) EmbedContent(ctx context.Context, req *aiplatformpb.EmbedContentRequest) (*aiplatformpb.EmbedContentResponse, error) {
	return routed(ctx, p.s, methodEmbed, req.GetModel(), req, p.s.up.EmbedContent)
}

// StreamGenerateContent routes a streamed call. Until the region's first
// message the attempt can fail and be retried elsewhere; from then on the
// stream is committed, relayed message by message, each of which the caller
// must take within the write timeout.
func (p *predictionService) StreamGenerateContent(req *aiplatformpb.GenerateContentRequest, out aiplatformpb.PredictionService_StreamGenerateContentServer) error {
	g, actx, done, err := p.s.startGRPC(out.Context(), methodStream, req.GetModel(), req)
	if err != nil {
		return err
	}
	defer done()
	retryAfter, err := g.attempts(actx, func(ctx context.Context) (policy.Report, bool, error) {
		var (
			used    int64
			usage   *aiplatformpb.GenerateContentResponse_UsageMetadata // the last: a running total
			traffic aiplatformpb.GenerateContentResponse_UsageMetadata_TrafficType
		)
		return relayStream(ctx, g, out,
			func(ctx context.Context) (receiver[*aiplatformpb.GenerateContentResponse], error) {
				return p.s.up.StreamGenerateContent(ctx, req, g.target)
			},
			func(m *aiplatformpb.GenerateContentResponse) int64 {
				if u := m.GetUsageMetadata(); u != nil {
					used, usage = max(used, tokens(u)), u
					if u.GetTrafficType() != 0 {
						traffic = u.GetTrafficType()
					}
				}
				return used
			},
			func() policy.Report {
				g.countTraffic(usage, traffic)
				return policy.Report{Outcome: policy.Success}
			})
	})
	if err != nil {
		return g.fail(err, retryAfter)
	}
	return g.end(nil)
}

// receiver is a region's stream as the router reads it.
type receiver[M any] interface{ Recv() (M, error) }

// relayStream makes one streamed attempt of g: open opens the region's
// stream under ctx. Until its first message the attempt can fail and be
// retried elsewhere; from then on the stream is committed, relayed to out
// message by message, each of which the caller must take within the write
// timeout. seen reads each message before it is sent and returns the
// tokens the stream has used so far; ended says what the policy learns of
// a stream the region ended well (its tokens set here).
func relayStream[M proto.Message](ctx context.Context, g *grpcCall, out grpc.ServerStream,
	open func(context.Context) (receiver[M], error), seen func(M) int64, ended func() policy.Report,
) (policy.Report, bool, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	in, err := open(ctx)
	if err != nil {
		return g.report(err), false, err
	}
	m, err := in.Recv()
	if err != nil && !errors.Is(err, io.EOF) {
		return g.report(err), false, err
	}
	var used int64
	for err == nil {
		g.att.Heard() // the region answers: see relay
		used = seen(m)
		if werr := g.s.sendWithin(out, m); werr != nil {
			return policy.Report{Outcome: gaveUp, Tokens: used}, true, werr
		}
		m, err = in.Recv()
	}
	if !errors.Is(err, io.EOF) {
		rep := g.report(err)
		rep.Tokens = used
		return rep, true, err
	}
	rep := ended()
	rep.Tokens = used
	return rep, true, nil
}

// sendWithin sends m on out, or gives up when the caller has not taken it
// within the write timeout: gRPC's Send waits for the caller's flow-control
// window without end, and a caller that stopped reading would hold its place
// for as long. On giving up the handler returns, which ends the stream and
// the Send with it.
func (s *Server) sendWithin(out grpc.ServerStream, m proto.Message) error {
	sent := make(chan error, 1)
	go func() { sent <- out.SendMsg(m) }()
	t := time.NewTimer(s.writeTimeout)
	defer t.Stop()
	select {
	case err := <-sent:
		return err
	case <-t.C:
		return status.Errorf(codes.DeadlineExceeded, "the caller did not take the stream's next message within %s", s.writeTimeout)
	}
}

// CountTokens routes a CountTokens call, found by its endpoint (the model
// resource name), or its model when it names no endpoint.
func (u *llmUtilityService) CountTokens(ctx context.Context, req *aiplatformpb.CountTokensRequest) (*aiplatformpb.CountTokensResponse, error) {
	return routed(ctx, u.s, methodCount, endpointOr(req.GetEndpoint(), req.GetModel()), req, u.s.up.CountTokens)
}

// endpointOr is the resource of a call that names an endpoint and may name
// a model instead.
func endpointOr(endpoint, model string) string {
	if endpoint == "" {
		return model
	}
	return endpoint
}

// routed routes a unary call whose answer reports no usage (the policy
// learns a success, no tokens): send makes one attempt on a region.
func routed[Q proto.Message, R any](ctx context.Context, s *Server, method, resource string, req Q,
	send func(context.Context, Q, upstream.Target) (R, error),
) (R, error) {
	return unary(ctx, s, method, resource, req, func(ctx context.Context, g *grpcCall) (R, policy.Report, error) {
		r, err := send(ctx, req, g.target)
		return r, policy.Report{Outcome: policy.Success}, err
	})
}
