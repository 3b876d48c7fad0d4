package server_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"cloud.google.com/go/aiplatform/apiv1/aiplatformpb"
	"google.golang.org/genai"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/regionwarden/regionwarden/router/table"
)

// TestEmbeddingsAreRouted: genai's EmbedContent through the router, for a
// text embedding model (predict) and a Gemini embedding model
// (embedContent), on both API versions, and the aiplatform client's Predict
// and EmbedContent over gRPC, are routed by the pool of their model: the
// provisioned region, which takes first attempts, answers with the
// caller's bytes under its own model name, and its embedding comes back
// whole.
func TestEmbeddingsAreRouted(t *testing.T) {
	pt := startRegion(t, "europe-west1", table.TierProvisioned)
	shared := startRegion(t, "us-central1", table.TierShared)
	const textModel, geminiModel = "text-embedding-005", "gemini-embedding-2"
	var pools []table.Pool
	for _, m := range []string{textModel, geminiModel} {
		p := poolOf(generous(), region(pt, 0), region(shared, 0))
		p.Model = m
		pools = append(pools, p)
	}
	r := startRouter(t, pools...)
	ctx := context.Background()
	wantLen := len(pt.Name) // the fake region's embeddings are as long as its name

	for _, version := range []string{"", "v1"} {
		for _, tc := range []struct{ model, method string }{{textModel, ":predict"}, {geminiModel, ":embedContent"}} {
			resp, err := r.client(version).Models.EmbedContent(ctx, tc.model, genai.Text("embed me"), nil)
			if err != nil {
				t.Fatalf("version %q, %s: %v", version, tc.model, err)
			}
			if len(resp.Embeddings) != 1 || len(resp.Embeddings[0].Values) != wantLen {
				t.Errorf("version %q, %s: %+v, want the provisioned region's embedding", version, tc.model, resp.Embeddings)
			}
			last := pt.Last()
			if !strings.HasSuffix(last.Path, "/locations/europe-west1/publishers/google/models/"+tc.model+tc.method) || !bytes.Contains(last.Body, []byte("embed me")) {
				t.Errorf("version %q, %s: the region got %s %s, want its own model's %s with the caller's body", version, tc.model, last.Path, last.Body, tc.method)
			}
		}
	}

	g := r.serveGRPC()
	callerOf := func(m string) string {
		return "projects/" + project + "/locations/us-east4/publishers/google/models/" + m
	}
	instance, err := structpb.NewValue(map[string]any{"content": "embed me"})
	if err != nil {
		t.Fatal(err)
	}
	pred, err := g.prediction.Predict(ctx, &aiplatformpb.PredictRequest{Endpoint: callerOf(textModel), Instances: []*structpb.Value{instance}})
	if err != nil || pred.GetDeployedModelId() != "europe-west1" || len(pred.GetPredictions()) != 1 {
		t.Errorf("gRPC Predict: %v, %v; want the provisioned region's prediction", pred, err)
	}
	if got := pt.Last().Endpoint; got != pt.ModelName(project, "google", textModel) {
		t.Errorf("gRPC Predict reached the region for %q, want its own model name", got)
	}
	model := callerOf(geminiModel)
	emb, err := g.prediction.EmbedContent(ctx, &aiplatformpb.EmbedContentRequest{
		Model:   &model,
		Content: &aiplatformpb.Content{Parts: []*aiplatformpb.Part{{Data: &aiplatformpb.Part_Text{Text: "embed me"}}}},
	})
	if err != nil || len(emb.GetEmbedding().GetValues()) != wantLen {
		t.Errorf("gRPC EmbedContent: %v, %v; want the provisioned region's embedding", emb, err)
	}
	if got := pt.Last().Model; got != pt.ModelName(project, "google", geminiModel) {
		t.Errorf("gRPC EmbedContent reached the region for %q, want its own model name", got)
	}
	if n := shared.Calls(); n != 0 {
		t.Errorf("the shared region got %d calls, want none: the provisioned region takes first attempts", n)
	}
}
