package upstream

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	aiplatform "cloud.google.com/go/aiplatform/apiv1"
	"cloud.google.com/go/aiplatform/apiv1/aiplatformpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/regionwarden/regionwarden/router/table"
)

// RequestTypeHeader is the metadata key that tells Vertex AI which capacity a
// call may use: "dedicated" (Provisioned Throughput only), "shared"
// (pay-as-you-go only), or absent (Provisioned Throughput, then spillover to
// pay-as-you-go).
const RequestTypeHeader = "x-vertex-ai-llm-request-type"

// Request type values of RequestTypeHeader, as table.Provisioned.Header gives them.
const (
	RequestTypeDedicated = string(table.RequestTypeDedicated)
	RequestTypeShared    = string(table.TierShared)
)

// ErrClosed is returned by calls made after Close.
var ErrClosed = errors.New("upstream: clients closed")

// Options configures Clients.
type Options struct {
	// Insecure dials plaintext gRPC without credentials: for emulators and
	// tests on loopback, never for Google. Default false: TLS and Application
	// Default Credentials with the cloud-platform scope.
	Insecure bool
	// ClientOptions are appended to every client's options, after the
	// endpoint and the Insecure options. Default none.
	ClientOptions []option.ClientOption
}

// endpoint holds the clients of one host:port. CountTokens lives on the
// LlmUtilityService, the rest on the PredictionService.
type endpoint struct {
	prediction *aiplatform.PredictionClient
	utility    *aiplatform.LlmUtilityClient
}

// Clients holds one set of aiplatform clients per region endpoint. An
// endpoint's clients are made on first use and reused by every later call,
// until Close. It is safe for concurrent use; a call to a known endpoint takes
// no lock.
type Clients struct {
	opts Options
	// endpoints is a copy-on-write map: readers load it, writers (under mu)
	// store a new one.
	endpoints atomic.Pointer[map[string]*endpoint]
	mu        sync.Mutex // serializes writers of endpoints and closed
	closed    bool
}

// New returns an empty set of clients.
func New(opts Options) *Clients {
	c := &Clients{opts: opts}
	c.endpoints.Store(&map[string]*endpoint{})
	return c
}

// Endpoints returns how many endpoints have clients.
func (c *Clients) Endpoints() int { return len(*c.endpoints.Load()) }

// get returns the clients of hostport, making them on first use.
func (c *Clients) get(hostport string) (*endpoint, error) {
	if e := (*c.endpoints.Load())[hostport]; e != nil {
		return e, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	old := *c.endpoints.Load()
	if e := old[hostport]; e != nil {
		return e, nil
	}
	e, err := c.dial(hostport)
	if err != nil {
		return nil, err
	}
	next := make(map[string]*endpoint, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[hostport] = e
	c.endpoints.Store(&next)
	return e, nil
}

// dial makes an endpoint's clients. gRPC connects lazily, so this does not
// wait for the network; with Application Default Credentials it finds the
// credentials once per endpoint. No caller's context is used: the clients
// outlive every call.
func (c *Clients) dial(hostport string) (*endpoint, error) {
	opts := []option.ClientOption{option.WithEndpoint(hostport), option.WithUserAgent("regionwarden-router")}
	if c.opts.Insecure {
		opts = append(opts,
			option.WithoutAuthentication(),
			option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	}
	opts = append(opts, c.opts.ClientOptions...)
	ctx := context.Background()
	pc, err := aiplatform.NewPredictionClient(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("upstream %s: prediction client: %w", hostport, err)
	}
	uc, err := aiplatform.NewLlmUtilityClient(ctx, opts...)
	if err != nil {
		_ = pc.Close()
		return nil, fmt.Errorf("upstream %s: llm utility client: %w", hostport, err)
	}
	return &endpoint{prediction: pc, utility: uc}, nil
}

// Close closes every client. Calls made after Close return ErrClosed; calls
// in flight end with an error.
func (c *Clients) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	var errs []error
	for _, e := range *c.endpoints.Load() {
		errs = append(errs, e.prediction.Close(), e.utility.Close())
	}
	c.endpoints.Store(&map[string]*endpoint{})
	return errors.Join(errs...)
}

// ModelName is the publisher model resource name of pool's model in region:
// projects/{project}/locations/{region}/publishers/{publisher}/models/{model}.
func ModelName(pool *table.Pool, region table.Region) string {
	var b strings.Builder
	b.Grow(len("projects//locations//publishers//models/") + len(pool.Project) + len(region.Name) + len(pool.Publisher) + len(pool.Model))
	b.WriteString("projects/")
	b.WriteString(pool.Project)
	b.WriteString("/locations/")
	b.WriteString(region.Name)
	b.WriteString("/publishers/")
	b.WriteString(pool.Publisher)
	b.WriteString("/models/")
	b.WriteString(pool.Model)
	return b.String()
}

// RequestType is the RequestTypeHeader value a call to region of pool carries,
// or "" for none. A shared region is called "shared", so pay-as-you-go capacity
// is all it uses. A provisioned region is called "dedicated" when the pool asks
// for dedicated calls, and without the header (Provisioned Throughput with
// spillover) otherwise.
func RequestType(pool *table.Pool, region table.Region) string {
	return pool.Policy.Provisioned.Header(region.Tier)
}

// outgoing returns ctx with the request type of the call in its outgoing
// metadata, replacing any request type ctx already carried (from an earlier
// attempt to another region, say).
func outgoing(ctx context.Context, requestType string) context.Context {
	md, ok := metadata.FromOutgoingContext(ctx)
	if !ok && requestType == "" {
		return ctx
	}
	if ok {
		if _, set := md[RequestTypeHeader]; set {
			md = md.Copy()
			delete(md, RequestTypeHeader)
		}
	} else {
		md = metadata.MD{}
	}
	if requestType != "" {
		md = md.Copy()
		md.Set(RequestTypeHeader, requestType)
	}
	return metadata.NewOutgoingContext(ctx, md)
}

// shallowCopy returns a new message of m's type sharing m's field values, so
// that a request can be given another model without touching the caller's
// request or copying its contents.
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

// GenerateContent calls GenerateContent on region for pool. req is not
// modified; the call carries a copy whose model is ModelName(pool, region).
func (c *Clients) GenerateContent(ctx context.Context, req *aiplatformpb.GenerateContentRequest, pool *table.Pool, region table.Region) (*aiplatformpb.GenerateContentResponse, error) {
	e, err := c.get(region.Endpoint)
	if err != nil {
		return nil, err
	}
	r := shallowCopy(req)
	r.Model = ModelName(pool, region)
	return e.prediction.GenerateContent(outgoing(ctx, RequestType(pool, region)), r)
}

// StreamGenerateContent starts StreamGenerateContent on region for pool and
// returns the stream, so that the caller can relay chunks as they come. The
// stream lives as long as ctx: the caller reads it to io.EOF or cancels ctx,
// or the call leaks. req is not modified.
func (c *Clients) StreamGenerateContent(ctx context.Context, req *aiplatformpb.GenerateContentRequest, pool *table.Pool, region table.Region) (aiplatformpb.PredictionService_StreamGenerateContentClient, error) {
	e, err := c.get(region.Endpoint)
	if err != nil {
		return nil, err
	}
	r := shallowCopy(req)
	r.Model = ModelName(pool, region)
	return e.prediction.StreamGenerateContent(outgoing(ctx, RequestType(pool, region)), r)
}

// CountTokens calls CountTokens on region for pool. For a publisher model the
// request's endpoint field holds the model resource name (the REST path
// .../publishers/*/models/*:countTokens binds to it), so both endpoint and
// model are set to ModelName(pool, region). req is not modified.
func (c *Clients) CountTokens(ctx context.Context, req *aiplatformpb.CountTokensRequest, pool *table.Pool, region table.Region) (*aiplatformpb.CountTokensResponse, error) {
	e, err := c.get(region.Endpoint)
	if err != nil {
		return nil, err
	}
	r := shallowCopy(req)
	r.Endpoint = ModelName(pool, region)
	r.Model = r.Endpoint
	return e.utility.CountTokens(outgoing(ctx, RequestType(pool, region)), r)
}
