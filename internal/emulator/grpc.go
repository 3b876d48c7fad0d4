package emulator

import (
	"context"
	"errors"

	"cloud.google.com/go/aiplatform/apiv1/aiplatformpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// predictionServer is a region's gRPC PredictionService.
type predictionServer struct {
	aiplatformpb.UnimplementedPredictionServiceServer
	r *region
}

// llmUtilityServer is a region's gRPC LlmUtilityService (CountTokens).
type llmUtilityServer struct {
	aiplatformpb.UnimplementedLlmUtilityServiceServer
	r *region
}

func registerGRPC(s *grpc.Server, r *region) {
	aiplatformpb.RegisterPredictionServiceServer(s, &predictionServer{r: r})
	aiplatformpb.RegisterLlmUtilityServiceServer(s, &llmUtilityServer{r: r})
}

// headersFromMetadata reads the capacity headers; metadata keys are lower
// case and MD.Get lowers the key it looks for.
func headersFromMetadata(ctx context.Context) capacityHeaders {
	md, _ := metadata.FromIncomingContext(ctx)
	first := func(k string) string {
		if v := md.Get(k); len(v) > 0 {
			return v[0]
		}
		return ""
	}
	return capacityHeaders{requestType: first(HeaderRequestType), sharedRequestType: first(HeaderSharedRequestType)}
}

// grpcError turns a serving error into a gRPC status error.
func grpcError(err error) error {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.grpcErr()
	}
	return status.FromContextError(err).Err()
}

// GenerateContent answers one call as the scenario says.
func (s *predictionServer) GenerateContent(ctx context.Context, req *aiplatformpb.GenerateContentRequest) (*aiplatformpb.GenerateContentResponse, error) {
	c, aerr := s.r.newCall(req, headersFromMetadata(ctx))
	if aerr != nil {
		s.r.reject(aerr)
		return nil, aerr.grpcErr()
	}
	resp, err := s.r.generate(ctx, c)
	if err != nil {
		return nil, grpcError(err)
	}
	return resp, nil
}

// StreamGenerateContent answers one call in a few chunks.
func (s *predictionServer) StreamGenerateContent(req *aiplatformpb.GenerateContentRequest, stream aiplatformpb.PredictionService_StreamGenerateContentServer) error {
	ctx := stream.Context()
	c, aerr := s.r.newCall(req, headersFromMetadata(ctx))
	if aerr != nil {
		s.r.reject(aerr)
		return aerr.grpcErr()
	}
	if err := s.r.stream(ctx, c, stream.Send); err != nil {
		return grpcError(err)
	}
	return nil
}

// CountTokens estimates a prompt's tokens.
func (s *llmUtilityServer) CountTokens(_ context.Context, req *aiplatformpb.CountTokensRequest) (*aiplatformpb.CountTokensResponse, error) {
	resp, aerr := s.r.countTokens(req)
	if aerr != nil {
		return nil, aerr.grpcErr()
	}
	return resp, nil
}
