package server_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	aiplatform "cloud.google.com/go/aiplatform/apiv1"
	"cloud.google.com/go/aiplatform/apiv1/aiplatformpb"
	"google.golang.org/api/option"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/regionwarden/regionwarden/internal/waittest"
	"github.com/regionwarden/regionwarden/router/server"
	"github.com/regionwarden/regionwarden/router/table"
	"github.com/regionwarden/regionwarden/router/upstream/upstreamtest"
)

// grpcClients are the official aiplatform clients pointed at the router's
// gRPC surface.
type grpcClients struct {
	prediction *aiplatform.PredictionClient
	utility    *aiplatform.LlmUtilityClient
	caches     *aiplatform.GenAiCacheClient
}

// serveGRPC serves the router's gRPC surface on a loopback port and returns
// the aiplatform clients dialed to it, as an application would.
func (r *router) serveGRPC() grpcClients {
	r.t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		r.t.Fatal(err)
	}
	g := grpc.NewServer()
	r.srv.RegisterGRPC(g)
	go func() { _ = g.Serve(lis) }()
	r.t.Cleanup(g.Stop)
	opts := []option.ClientOption{
		option.WithEndpoint(lis.Addr().String()),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
	}
	pc, err := aiplatform.NewPredictionClient(context.Background(), opts...)
	if err != nil {
		r.t.Fatal(err)
	}
	uc, err := aiplatform.NewLlmUtilityClient(context.Background(), opts...)
	if err != nil {
		r.t.Fatal(err)
	}
	cc, err := aiplatform.NewGenAiCacheClient(context.Background(), opts...)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { _ = pc.Close(); _ = uc.Close(); _ = cc.Close() })
	return grpcClients{prediction: pc, utility: uc, caches: cc}
}

// callerModel is the model as the caller names it: its own location.
const callerModel = "projects/" + project + "/locations/us-east4/publishers/google/models/" + model

func grpcRequest(text string) *aiplatformpb.GenerateContentRequest {
	return &aiplatformpb.GenerateContentRequest{
		Model:    callerModel,
		Contents: []*aiplatformpb.Content{{Role: "user", Parts: []*aiplatformpb.Part{{Data: &aiplatformpb.Part_Text{Text: text}}}}},
	}
}

// TestAiplatformClientThroughRouter calls the router's gRPC surface with the
// official aiplatform clients: answers arrive intact, the region sees its own
// model name and the request type of its tier, and the caller's credentials
// and priority stay with the router.
func TestAiplatformClientThroughRouter(t *testing.T) {
	pt, _, r := ptAndShared(t)
	c := r.serveGRPC()
	ctx := metadata.AppendToOutgoingContext(context.Background(),
		"authorization", "Bearer "+callerTok, "x-regionwarden-priority", "critical", "x-goog-user-project", "billing",
		"x-vertex-ai-llm-request-type", "shared")

	resp, err := c.prediction.GenerateContent(ctx, grpcRequest("Which regions hold capacity?"))
	if err != nil {
		t.Fatal(err)
	}
	if got := answerOf(resp); got != "europe-west1 answers: Which regions hold capacity?" {
		t.Errorf("text %q", got)
	}
	st, err := c.prediction.StreamGenerateContent(ctx, grpcRequest("Stream it."))
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := upstreamtest.RecvAll(st)
	if err != nil {
		t.Fatal(err)
	}
	if got := answerOf(chunks...); got != "[europe-west1 chunk 0][europe-west1 chunk 1][europe-west1 chunk 2]" {
		t.Errorf("streamed %q", got)
	}
	if u := chunks[len(chunks)-1].GetUsageMetadata(); u.GetTotalTokenCount() != 12 || u.GetTrafficType() != aiplatformpb.GenerateContentResponse_UsageMetadata_PROVISIONED_THROUGHPUT {
		t.Errorf("last chunk's usage %v", u)
	}
	ct, err := c.utility.CountTokens(ctx, &aiplatformpb.CountTokensRequest{Endpoint: callerModel, Contents: grpcRequest("count me").Contents})
	if err != nil {
		t.Fatal(err)
	}
	if ct.GetTotalTokens() != 42 {
		t.Errorf("countTokens %v", ct)
	}
	// The model field, when the caller sets it, names the region's model
	// too.
	comp, err := c.utility.ComputeTokens(ctx, &aiplatformpb.ComputeTokensRequest{Endpoint: callerModel, Model: callerModel, Contents: grpcRequest("count me").Contents})
	if err != nil {
		t.Fatal(err)
	}
	if info := comp.GetTokensInfo(); len(info) != 1 || string(info[0].GetTokens()[0]) != "europe-west1" {
		t.Errorf("computeTokens %v", comp)
	}
	if last, want := pt.Last(), pt.ModelName(project, "google", model); last.Endpoint != want || last.Model != want {
		t.Errorf("computeTokens reached the region for endpoint %q and model %q, want both %q", last.Endpoint, last.Model, want)
	}

	want := pt.ModelName(project, "google", model)
	for _, call := range pt.Seen() {
		if call.Surface != upstreamtest.GRPC {
			t.Errorf("%s came over %s, want gRPC", call.Method, call.Surface)
		}
		if call.Model != want && call.Endpoint != want {
			t.Errorf("%s: model %q endpoint %q, want %q", call.Method, call.Model, call.Endpoint, want)
		}
		if len(call.RequestType) != 0 {
			t.Errorf("%s: request type %q, want none (provisioned with spillover)", call.Method, call.RequestType)
		}
		if len(call.Auth) != 0 || len(call.Metadata.Get("x-regionwarden-priority")) != 0 {
			t.Errorf("%s: the caller's credentials or priority reached the region: %v", call.Method, call.Metadata)
		}
		if got := call.Metadata.Get("x-goog-user-project"); len(got) != 1 || got[0] != "billing" {
			t.Errorf("%s: x-goog-user-project %q, want the caller's", call.Method, got)
		}
	}
	if n := len(pt.Seen()); n != 4 {
		t.Errorf("the provisioned region saw %d calls, want 4", n)
	}
	if got := counter(t, r.metrics, "regionwarden_router_traffic_type_total", map[string]string{"region": "europe-west1", "traffic_type": "PROVISIONED_THROUGHPUT"}); got != 2 {
		t.Errorf("traffic_type_total PROVISIONED_THROUGHPUT = %v, want 2", got)
	}
}

func answerOf(ms ...*aiplatformpb.GenerateContentResponse) string {
	var b strings.Builder
	for _, m := range ms {
		for _, c := range m.GetCandidates() {
			for _, p := range c.GetContent().GetParts() {
				b.WriteString(p.GetText())
			}
		}
	}
	return b.String()
}

// unknownField is a field no aiplatform proto of this build knows, as wire
// bytes: field 9999, a length-delimited value holding a nested field.
func unknownField(tag protowire.Number) []byte {
	inner := protowire.AppendTag(nil, 1, protowire.VarintType)
	inner = protowire.AppendVarint(inner, 42)
	b := protowire.AppendTag(nil, tag, protowire.BytesType)
	return protowire.AppendBytes(b, inner)
}

// TestUnknownFieldsPassThroughGRPC: a request carrying fields no aiplatform
// proto knows (top level, and inside generation_config) reaches the region
// with those bytes as they were sent, through the Go protobuf runtime of the
// router's server and client; the region's answer carrying such fields
// reaches the caller the same way, unary and streamed.
func TestUnknownFieldsPassThroughGRPC(t *testing.T) {
	pt := startRegion(t, "europe-west1", table.TierProvisioned)
	answerExtra := unknownField(9998)
	pt.set(func(b *upstreamtest.Behavior) { b.ExtraProto = answerExtra })
	r := startRouter(t, poolOf(generous(), region(pt, 0)))
	c := r.serveGRPC()

	top, nested := unknownField(9999), unknownField(9997)
	req := grpcRequest("hi")
	req.GenerationConfig = &aiplatformpb.GenerationConfig{Temperature: proto.Float32(0.2)}
	req.GenerationConfig.ProtoReflect().SetUnknown(nested)
	req.ProtoReflect().SetUnknown(top)

	check := func(what string) {
		t.Helper()
		got := pt.Last().Request.(*aiplatformpb.GenerateContentRequest)
		if u := got.ProtoReflect().GetUnknown(); string(u) != string(top) {
			t.Errorf("%s: the region got top-level unknown bytes %x, want %x", what, u, top)
		}
		if u := got.GetGenerationConfig().ProtoReflect().GetUnknown(); string(u) != string(nested) {
			t.Errorf("%s: the region got generation_config unknown bytes %x, want %x", what, u, nested)
		}
	}
	resp, err := c.prediction.GenerateContent(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	check("unary")
	if u := resp.ProtoReflect().GetUnknown(); string(u) != string(answerExtra) {
		t.Errorf("unary: the caller got unknown bytes %x, want %x", u, answerExtra)
	}

	st, err := c.prediction.StreamGenerateContent(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := upstreamtest.RecvAll(st)
	if err != nil {
		t.Fatal(err)
	}
	check("stream")
	if len(chunks) != upstreamtest.StreamChunks {
		t.Fatalf("%d chunks", len(chunks))
	}
	for i, m := range chunks {
		if u := m.ProtoReflect().GetUnknown(); string(u) != string(answerExtra) {
			t.Errorf("chunk %d: the caller got unknown bytes %x, want %x", i, u, answerExtra)
		}
	}
}

// TestGRPCErrors: the router's own refusals and the region's errors come back
// as gRPC statuses, a 429 with when to retry.
func TestGRPCErrors(t *testing.T) {
	pt := startRegion(t, "europe-west1", table.TierProvisioned)
	other := startRegion(t, "us-central1", table.TierShared)
	r := startRouter(t, poolOf(generous(), region(pt, 0), region(other, 1)))
	c := r.serveGRPC()
	ctx := context.Background()

	cases := []struct {
		name  string
		model string
		prio  string
		fault error
		code  codes.Code
		msg   string
	}{
		{"not a model", "models/" + model, "", nil, codes.InvalidArgument, "is not a publisher model"},
		{"no pool", strings.Replace(callerModel, model, "gemini-0.1", 1), "", nil, codes.NotFound, `model "gemini-0.1"`},
		{"bad priority", callerModel, "urgent", nil, codes.InvalidArgument, `"urgent"`},
		{"caller fault passed on", callerModel, "", status.Error(codes.InvalidArgument, "bad request"), codes.InvalidArgument, "bad request"},
		{"429 retried, then passed on", callerModel, "", status.Error(codes.ResourceExhausted, "quota"), codes.ResourceExhausted, "quota"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, f := range []*fakeRegion{pt, other} {
				f.set(func(b *upstreamtest.Behavior) {
					b.Fault = nil
					if tc.fault != nil {
						b.Fault = func(int64) error { return tc.fault }
					}
				})
			}
			ctx := ctx
			if tc.prio != "" {
				ctx = metadata.AppendToOutgoingContext(ctx, "x-regionwarden-priority", tc.prio)
			}
			req := grpcRequest("hi")
			req.Model = tc.model
			r.clock.Advance(time.Second)
			_, err := c.prediction.GenerateContent(ctx, req)
			st := status.Convert(err)
			if st.Code() != tc.code || !strings.Contains(st.Message(), tc.msg) {
				t.Fatalf("error %v, want %v saying %q", err, tc.code, tc.msg)
			}
			if tc.code == codes.ResourceExhausted && retryDelay(st) < time.Second {
				t.Errorf("429 without RetryInfo of a second or more: %v", st.Details())
			}
		})
	}
}

// retryDelay is the RetryInfo of st; 0 without one.
func retryDelay(st *status.Status) time.Duration {
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration()
		}
	}
	return 0
}

// TestStalledGRPCStreamReaderIsCut: a gRPC caller that stops reading a
// stream is cut off once a message has waited the write timeout, and its
// call gives back its place.
func TestStalledGRPCStreamReaderIsCut(t *testing.T) {
	pt := startRegion(t, "europe-west1", table.TierProvisioned)
	pt.set(func(b *upstreamtest.Behavior) { b.Endless, b.Pad = true, 64<<10 })
	r := startRouterWith(t, func(o *server.Options) { o.WriteTimeout = 200 * time.Millisecond }, poolOf(generous(), region(pt, 0)))
	c := r.serveGRPC()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := c.prediction.StreamGenerateContent(ctx, grpcRequest("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	// The caller reads nothing more.
	waittest.For(t, 10*time.Second, "the stalled call gives back its place", func() bool { return r.poolInFlight() == 0 })
	// The attempt is counted just after the policy learns of it (call.settle
	// gives its place back first): wait for the count too.
	waittest.Until(t, 10*time.Second, "one attempt counted cancelled (the caller went, not the region)",
		func() float64 { return r.attempts("europe-west1", "provisioned", gaveUp) },
		func(got float64) bool { return got == 1 })
}

// TestGRPCRequestBytesCountInTheBudget: a gRPC request's bytes are held in
// the same budget as REST bodies; one that does not fit is refused with
// RESOURCE_EXHAUSTED and when to retry, before any region is called.
func TestGRPCRequestBytesCountInTheBudget(t *testing.T) {
	pt := startRegion(t, "europe-west1", table.TierProvisioned)
	r := startRouterWith(t, func(o *server.Options) { o.MaxBodyBytes, o.MaxBodyBytesInFlight = 1<<10, 1<<10 }, poolOf(generous(), region(pt, 0)))
	c := r.serveGRPC()
	if _, err := c.prediction.GenerateContent(context.Background(), grpcRequest("small")); err != nil {
		t.Fatalf("a request that fits: %v", err)
	}
	_, err := c.prediction.GenerateContent(context.Background(), grpcRequest(strings.Repeat("x", 2<<10)))
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted || retryDelay(st) < time.Second {
		t.Fatalf("a request over the budget: %v %v, want RESOURCE_EXHAUSTED with RetryInfo", err, st.Details())
	}
	if n := pt.calls.Load(); n != 1 {
		t.Errorf("the region got %d calls, want only the one that fit", n)
	}
}
