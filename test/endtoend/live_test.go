package endtoend

import (
	"errors"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/auth"
	"github.com/gorilla/websocket"
	"google.golang.org/genai"

	"github.com/regionwarden/regionwarden/internal/emulator"
	"github.com/regionwarden/regionwarden/router/table"
)

// liveScenario: a PT in europe-west1 that takes two calls a second (the
// emulator's clock standing still, two in all), down from minute 2 to 3,
// and pay-as-you-go in us-central1.
const liveScenario = `
name: live-today
project: demo-project
publisher: google
model: gemini-3.6-flash
duration: 10m
load: {requestsPerSecond: 1}
regions:
- name: europe-west1
  tier: provisioned
  provisioned: {gsus: 1, tokensPerSecond: 1000000, requestsPerSecond: 2, window: 1s}
  latency: {distribution: fixed, p50: 10ms}
  faults:
  - {from: 2m, to: 3m, outage: unavailable}
- name: us-central1
  tier: shared
  capacity: {requestsPerSecond: 100}
  latency: {distribution: fixed, p50: 10ms}
`

// livePool is the scenario's pool as the operator renders it.
func livePool(addr map[string]string) table.Pool {
	return dedicatedPool(addr, "google", model, "europe-west1", "us-central1")
}

// liveAnswer sends a turn and returns the answer's text, or the error that
// ended the session.
func liveAnswer(s *genai.Session, prompt string) (string, error) {
	turn := true
	if err := s.SendClientContent(genai.LiveClientContentInput{Turns: genai.Text(prompt), TurnComplete: &turn}); err != nil {
		return "", err
	}
	for {
		msg, err := s.Receive()
		if err != nil {
			return "", err
		}
		if msg.ServerContent != nil && msg.ServerContent.ModelTurn != nil && len(msg.ServerContent.ModelTurn.Parts) > 0 {
			return msg.ServerContent.ModelTurn.Parts[0].Text, nil
		}
	}
}

// TestLiveSessionsToday drives genai's Live client (Vertex AI, on a
// location the pool does not list) through the router in front of emulated
// regions: a session is set up on the PT, whose capacity serves its turns
// (the emulator counts them as PROVISIONED_THROUGHPUT) until its quota is
// full, when Google's servers close the session with 1011
// RESOURCE_EXHAUSTED, which the caller gets as it is; while the PT is down
// a new session is set up in the pay-as-you-go region instead, whose turns
// are ON_DEMAND.
func TestLiveSessionsToday(t *testing.T) {
	e := startScenario(t, liveScenario, livePool)
	c, err := genai.NewClient(t.Context(), &genai.ClientConfig{
		Backend: genai.BackendVertexAI, Project: project, Location: "us-east5",
		Credentials: auth.NewCredentials(&auth.CredentialsOptions{TokenProvider: staticToken{}}),
		HTTPOptions: genai.HTTPOptions{BaseURL: "ws" + strings.TrimPrefix(e.http.URL, "http") + "/", APIVersion: "v1beta1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Live.Connect(t.Context(), model, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		text, err := liveAnswer(s, "Which capacity serves me?")
		if err != nil || !strings.Contains(text, "from europe-west1") {
			t.Fatalf("turn %d: %q, %v", i, text, err)
		}
	}
	_, err = liveAnswer(s, "and now?")
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.CloseInternalServerErr || !strings.HasPrefix(ce.Text, "RESOURCE_EXHAUSTED: ") {
		t.Fatalf("a turn past the PT's quota: %v, want the region's close 1011 RESOURCE_EXHAUSTED", err)
	}
	_ = s.Close()
	if got := e.served("europe-west1")["PROVISIONED_THROUGHPUT"]; got != 2 {
		t.Errorf("the PT served %d turns, want 2", got)
	}

	e.emu.Clock().(*emulator.ManualClock).Set(2*time.Minute + time.Second) // the PT is down
	s, err = c.Live.Connect(t.Context(), model, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	text, err := liveAnswer(s, "Which capacity serves me now?")
	if err != nil || !strings.Contains(text, "from us-central1") {
		t.Fatalf("with the PT down: %q, %v", text, err)
	}
	if got := e.served("us-central1")["ON_DEMAND"]; got != 1 {
		t.Errorf("pay-as-you-go served %d turns, want 1", got)
	}
}
