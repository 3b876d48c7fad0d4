package emulator_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	aiplatform "cloud.google.com/go/aiplatform/apiv1"
	"cloud.google.com/go/aiplatform/apiv1/aiplatformpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestGRPCStreamGenerateContent(t *testing.T) {
	sc, e, clock := startBase(t)
	clock.Set(time.Minute)
	c := client(t, e, "europe-west1")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := request(sc, "europe-west1", "Stream me an answer.")
	req.GenerationConfig = &aiplatformpb.GenerationConfig{MaxOutputTokens: new(int32(40))}
	stream, err := c.StreamGenerateContent(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	var chunks []*aiplatformpb.GenerateContentResponse
	var text strings.Builder
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("recv: %v", err)
		}
		chunks = append(chunks, m)
		text.WriteString(m.GetCandidates()[0].GetContent().GetParts()[0].GetText())
	}
	if len(chunks) < 2 || text.Len() == 0 {
		t.Fatalf("%d chunks with text %q, want several", len(chunks), text.String())
	}
	for i, m := range chunks {
		if m.GetUsageMetadata().GetTrafficType() != pt {
			t.Errorf("chunk %d: traffic type %v, want PROVISIONED_THROUGHPUT", i, m.GetUsageMetadata().GetTrafficType())
		}
	}
	if got := chunks[len(chunks)-1].GetUsageMetadata().GetCandidatesTokenCount(); got != 40 {
		t.Errorf("last chunk reports %d output tokens, want 40 (maxOutputTokens)", got)
	}
}

func TestGRPCCountTokens(t *testing.T) {
	sc, e, _ := startBase(t)
	c, err := aiplatform.NewLlmUtilityClient(context.Background(), dialOptions(regionAddr(t, e, "europe-west4").GRPC)...)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	text := strings.Repeat("abcd", 25)
	resp, err := c.CountTokens(t.Context(), &aiplatformpb.CountTokensRequest{
		Model:    sc.ModelName("europe-west4"),
		Contents: []*aiplatformpb.Content{{Role: "user", Parts: []*aiplatformpb.Part{{Data: &aiplatformpb.Part_Text{Text: text}}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetTotalTokens() != 25 || resp.GetTotalBillableCharacters() != 100 {
		t.Errorf("count %v for 100 characters, want 25 tokens", resp)
	}
}

func TestGRPCRefusesWrongModel(t *testing.T) {
	sc, e, _ := startBase(t)
	c := client(t, e, "europe-west1")
	tests := []struct {
		model string
		want  codes.Code
	}{
		{model: "projects/demo-project/locations/europe-west1/publishers/google/models/gemini-0", want: codes.NotFound},
		{model: "projects/demo-project/locations/europe-west4/publishers/google/models/gemini-2.5-flash-lite", want: codes.InvalidArgument},
		{model: "projects/other/locations/europe-west1/publishers/google/models/gemini-2.5-flash-lite", want: codes.PermissionDenied},
		{model: "gemini-2.5-flash-lite", want: codes.InvalidArgument},
	}
	for _, tt := range tests {
		req := request(sc, "europe-west1", "hello")
		req.Model = tt.model
		if _, err := c.GenerateContent(t.Context(), req); status.Code(err) != tt.want {
			t.Errorf("model %q: %v, want %v", tt.model, err, tt.want)
		}
	}
	if got := e.Stats().Regions[0].Requests; got != 0 {
		t.Errorf("malformed calls counted as %d arrivals, want 0", got)
	}
}
