package upstream

import (
	"context"
	"net"
	"sync"
	"testing"

	"cloud.google.com/go/aiplatform/apiv1/aiplatformpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/regionwarden/regionwarden/router/table"
)

// call is what a fake region saw of one call.
type call struct {
	method      string
	model       string
	endpoint    string
	requestType []string
	params      []string
	auth        []string
}

// fakeRegion is an in-process Vertex AI region on loopback: it records every
// call and answers with the text it is given, or with err.
type fakeRegion struct {
	addr string

	mu    sync.Mutex
	calls []call
	// err, when set, is every call's answer.
	err error
	// chunks is how many chunks a streamed answer has.
	chunks int
	// block makes calls wait for their context to end; each call then sends
	// its method on ended.
	block bool
	ended chan string
	// started receives the method of every blocked call as it starts.
	started chan string
}

type predictionServer struct {
	aiplatformpb.UnimplementedPredictionServiceServer
	f *fakeRegion
}

type utilityServer struct {
	aiplatformpb.UnimplementedLlmUtilityServiceServer
	f *fakeRegion
}

func startFake(t testing.TB) *fakeRegion {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeRegion{addr: lis.Addr().String(), chunks: 3, ended: make(chan string, 16), started: make(chan string, 16)}
	s := grpc.NewServer()
	aiplatformpb.RegisterPredictionServiceServer(s, &predictionServer{f: f})
	aiplatformpb.RegisterLlmUtilityServiceServer(s, &utilityServer{f: f})
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return f
}

// record notes a call and returns the error to answer, after blocking if asked.
func (f *fakeRegion) record(ctx context.Context, method, model, endpoint string) error {
	md, _ := metadata.FromIncomingContext(ctx)
	f.mu.Lock()
	f.calls = append(f.calls, call{
		method: method, model: model, endpoint: endpoint,
		requestType: md.Get(RequestTypeHeader), params: md.Get("x-goog-request-params"), auth: md.Get("authorization"),
	})
	block, err := f.block, f.err
	f.mu.Unlock()
	if block {
		f.started <- method
		<-ctx.Done()
		f.ended <- method
		return ctx.Err()
	}
	return err
}

func (f *fakeRegion) lastCall() call {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.calls) == 0 {
		return call{}
	}
	return f.calls[len(f.calls)-1]
}

func (f *fakeRegion) set(fn func(f *fakeRegion)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func answer(text string) *aiplatformpb.GenerateContentResponse {
	return &aiplatformpb.GenerateContentResponse{Candidates: []*aiplatformpb.Candidate{{
		Content: &aiplatformpb.Content{Role: "model", Parts: []*aiplatformpb.Part{{Data: &aiplatformpb.Part_Text{Text: text}}}},
	}}}
}

func answerText(r *aiplatformpb.GenerateContentResponse) string {
	if len(r.GetCandidates()) == 0 || len(r.GetCandidates()[0].GetContent().GetParts()) == 0 {
		return ""
	}
	return r.GetCandidates()[0].GetContent().GetParts()[0].GetText()
}

func (p *predictionServer) GenerateContent(ctx context.Context, req *aiplatformpb.GenerateContentRequest) (*aiplatformpb.GenerateContentResponse, error) {
	if err := p.f.record(ctx, "GenerateContent", req.GetModel(), ""); err != nil {
		return nil, err
	}
	return answer("unary from " + req.GetModel()), nil
}

func (p *predictionServer) StreamGenerateContent(req *aiplatformpb.GenerateContentRequest, stream aiplatformpb.PredictionService_StreamGenerateContentServer) error {
	if err := p.f.record(stream.Context(), "StreamGenerateContent", req.GetModel(), ""); err != nil {
		return err
	}
	p.f.mu.Lock()
	n := p.f.chunks
	p.f.mu.Unlock()
	for i := range n {
		if err := stream.Send(answer(string(rune('a' + i)))); err != nil {
			return err
		}
	}
	return nil
}

func (u *utilityServer) CountTokens(ctx context.Context, req *aiplatformpb.CountTokensRequest) (*aiplatformpb.CountTokensResponse, error) {
	if err := u.f.record(ctx, "CountTokens", req.GetModel(), req.GetEndpoint()); err != nil {
		return nil, err
	}
	return &aiplatformpb.CountTokensResponse{TotalTokens: int32(len(req.GetContents()))}, nil
}

// testPool is a pool with one provisioned and one shared region, both served by f.
func testPool(f *fakeRegion, rt table.RequestType) (*table.Pool, table.Region, table.Region) {
	p := &table.Pool{
		Project: "proj", Publisher: "google", Model: "gemini-2.5-flash",
		Regions: []table.Region{
			{Name: "europe-west1", Endpoint: f.addr, Tier: table.TierProvisioned},
			{Name: "us-central1", Endpoint: f.addr, Tier: table.TierShared},
		},
	}
	p.Policy.Provisioned.RequestType = rt
	return p, p.Regions[0], p.Regions[1]
}

func newClients(t testing.TB) *Clients {
	t.Helper()
	c := New(Options{Insecure: true})
	t.Cleanup(func() { _ = c.Close() })
	return c
}
