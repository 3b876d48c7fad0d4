package emulator_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"cloud.google.com/go/auth"
	"google.golang.org/genai"
)

// staticToken is a token provider for tests: the emulator does not check it.
type staticToken struct{}

func (staticToken) Token(context.Context) (*auth.Token, error) {
	return &auth.Token{Value: "test-token", Type: "Bearer", Expiry: time.Now().Add(time.Hour)}, nil
}

// TestGenaiSDKOverREST calls a region's REST surface with the official genai
// SDK, as a gateway in front of Vertex would.
func TestGenaiSDKOverREST(t *testing.T) {
	e, clock := startBaseAtOneMinute(t)
	for _, version := range []string{"v1", ""} { // "" is the SDK's default, v1beta1
		c, err := genai.NewClient(t.Context(), &genai.ClientConfig{
			Backend:     genai.BackendVertexAI,
			Project:     "demo-project",
			Location:    "europe-west1",
			Credentials: auth.NewCredentials(&auth.CredentialsOptions{TokenProvider: staticToken{}}),
			HTTPOptions: genai.HTTPOptions{
				BaseURL:    "http://" + regionAddr(t, e, "europe-west1").REST,
				APIVersion: version,
				Headers:    http.Header{"X-Vertex-AI-LLM-Request-Type": []string{"dedicated"}},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Models.GenerateContent(t.Context(), "gemini-2.5-flash-lite", genai.Text("Which regions hold capacity?"), nil)
		if err != nil {
			t.Fatalf("api version %q: %v", version, err)
		}
		if resp.Text() == "" || resp.UsageMetadata.TrafficType != genai.TrafficTypeProvisionedThroughput {
			t.Errorf("api version %q: text %q, usage %+v", version, resp.Text(), resp.UsageMetadata)
		}

		var chunks int
		for _, err := range c.Models.GenerateContentStream(t.Context(), "gemini-2.5-flash-lite", genai.Text("Stream it."), nil) {
			if err != nil {
				t.Fatalf("api version %q: stream: %v", version, err)
			}
			chunks++
		}
		if chunks < 2 {
			t.Errorf("api version %q: %d chunks, want several", version, chunks)
		}
	}

	// Over the PT with dedicated: the SDK reports Google's error.
	clock.Advance(2 * time.Second)
	c, err := genai.NewClient(t.Context(), &genai.ClientConfig{
		Backend: genai.BackendVertexAI, Project: "demo-project", Location: "europe-west1",
		Credentials: auth.NewCredentials(&auth.CredentialsOptions{TokenProvider: staticToken{}}),
		HTTPOptions: genai.HTTPOptions{
			BaseURL: "http://" + regionAddr(t, e, "europe-west1").REST,
			Headers: http.Header{"X-Vertex-AI-LLM-Request-Type": []string{"dedicated"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	var apiErr genai.APIError
	for range 6 {
		_, err = c.Models.GenerateContent(t.Context(), "gemini-2.5-flash-lite", genai.Text("again"), nil)
	}
	if !errors.As(err, &apiErr) || apiErr.Code != 429 || apiErr.Status != "RESOURCE_EXHAUSTED" {
		t.Errorf("sixth call over a PT of five: %v, want a 429 RESOURCE_EXHAUSTED APIError", err)
	}
}
