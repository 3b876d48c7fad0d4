package emulator_test

import (
	"context"
	"testing"
	"time"

	aiplatform "cloud.google.com/go/aiplatform/apiv1"
	"cloud.google.com/go/aiplatform/apiv1/aiplatformpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/regionwarden/regionwarden/internal/emulator"
)

// scenarioHead is the project, model, length and load of the tests'
// scenarios, which each give their regions.
const scenarioHead = `
name: unit
project: demo-project
model: gemini-2.5-flash-lite
duration: 10m
load: {requestsPerSecond: 10}`

// baseScenario has a provisioned region and a shared one; tests append
// faults or change capacity through the YAML they pass. Its PT is enforced
// over one second, as its pay-as-you-go quota is, so that tests count both
// in the same second; TestPTWindowOfItsSize drops that.
const baseScenario = scenarioHead + `
regions:
- name: europe-west1
  tier: provisioned
  provisioned: {gsus: 2, tokensPerSecond: 100000, requestsPerSecond: 5, mode: spillover, window: 1s}
  capacity: {requestsPerSecond: 3}
  latency: {distribution: fixed, p50: 100ms}
- name: europe-west4
  tier: shared
  capacity: {requestsPerSecond: 4}
  latency: {distribution: fixed, p50: 200ms}
`

func mustParse(t testing.TB, yaml string) *emulator.Scenario {
	t.Helper()
	sc, err := emulator.ParseScenario([]byte(yaml))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return sc
}

// startBase starts baseScenario with seed 1.
func startBase(t testing.TB) (*emulator.Scenario, *emulator.Emulator, *emulator.ManualClock) {
	t.Helper()
	sc := mustParse(t, baseScenario)
	e, clock := start(t, sc, 1)
	return sc, e, clock
}

// start runs an emulator for the scenario on free loopback ports with a
// hand-driven clock.
func start(t testing.TB, sc *emulator.Scenario, seed uint64) (*emulator.Emulator, *emulator.ManualClock) {
	t.Helper()
	clock := emulator.NewManualClock()
	e, err := emulator.New(sc, emulator.Options{Seed: seed, Clock: clock})
	if err != nil {
		t.Fatalf("new: %v", err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e, clock
}

// startBaseAtOneMinute runs baseScenario with seed 1, its clock one minute in.
func startBaseAtOneMinute(t *testing.T) (*emulator.Emulator, *emulator.ManualClock) {
	t.Helper()
	_, e, clock := startBase(t)
	clock.Set(time.Minute)
	return e, clock
}

func regionAddr(t testing.TB, e *emulator.Emulator, name string) emulator.RegionAddr {
	t.Helper()
	for _, r := range e.Regions() {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no region %s", name)
	return emulator.RegionAddr{}
}

func dialOptions(addr string) []option.ClientOption {
	return []option.ClientOption{
		option.WithEndpoint(addr),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
	}
}

// client dials a region with the real aiplatform client.
func client(t testing.TB, e *emulator.Emulator, region string) *aiplatform.PredictionClient {
	t.Helper()
	c, err := aiplatform.NewPredictionClient(context.Background(), dialOptions(regionAddr(t, e, region).GRPC)...)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func request(sc *emulator.Scenario, region, text string) *aiplatformpb.GenerateContentRequest {
	return &aiplatformpb.GenerateContentRequest{
		Model: sc.ModelName(region),
		Contents: []*aiplatformpb.Content{{
			Role:  "user",
			Parts: []*aiplatformpb.Part{{Data: &aiplatformpb.Part_Text{Text: text}}},
		}},
	}
}

// generate makes one call with the request-type header set unless empty.
func generate(t *testing.T, c *aiplatform.PredictionClient, sc *emulator.Scenario, region, requestType string) (*aiplatformpb.GenerateContentResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if requestType != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "x-vertex-ai-llm-request-type", requestType)
	}
	return c.GenerateContent(ctx, request(sc, region, "How many regions hold capacity?"))
}

// callsServed sends n calls to region and counts those served and those
// throttled (429); any other answer fails t.
func callsServed(t *testing.T, c *aiplatform.PredictionClient, sc *emulator.Scenario, region, requestType string, n int) (served, throttled int) {
	t.Helper()
	for range n {
		_, err := generate(t, c, sc, region, requestType)
		switch status.Code(err) {
		case codes.OK:
			served++
		case codes.ResourceExhausted:
			throttled++
		default:
			t.Fatalf("unexpected error: %v", err)
		}
	}
	return served, throttled
}
