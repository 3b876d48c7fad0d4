// Package endtoend drives the router with the official SDKs applications
// use, the genai SDK on Vertex AI's own surface and the OpenAI SDK on its
// OpenAI-compatible one, in front of emulated Vertex AI locations, and checks
// what Vertex AI does today: a PT on global, pay-as-you-go tiers chosen by a
// call's priority, and the two kinds of 429.
package endtoend

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/auth"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/genai"

	"github.com/regionwarden/regionwarden/internal/clocktest"
	"github.com/regionwarden/regionwarden/internal/emulator"
	"github.com/regionwarden/regionwarden/router/metrics"
	"github.com/regionwarden/regionwarden/router/policy"
	"github.com/regionwarden/regionwarden/router/server"
	"github.com/regionwarden/regionwarden/router/table"
	"github.com/regionwarden/regionwarden/router/upstream"
)

const (
	project = "demo-project"
	model   = "gemini-3.6-flash"
)

// scenario: the PT is on global (2 calls a second, enforced over one
// second: the tests count calls, not windows), where standard
// pay-as-you-go (1 call a second), Priority PayGo and Flex PayGo (5 each)
// are offered; europe-west4 offers standard pay-as-you-go alone (1 call a
// second). The emulator's clock stands still, so every call of a test
// lands in the same second of every quota.
const scenario = `
name: vertex-today
project: demo-project
model: gemini-3.6-flash
duration: 10m
load: {requestsPerSecond: 1}
regions:
- name: global
  tier: provisioned
  provisioned: {gsus: 1, tokensPerSecond: 1000000, requestsPerSecond: 2, window: 1s}
  capacity: {requestsPerSecond: 1}
  priority: {requestsPerSecond: 5}
  flex: {requestsPerSecond: 5}
  latency: {distribution: fixed, p50: 10ms}
- name: europe-west4
  tier: shared
  capacity: {requestsPerSecond: 1}
  latency: {distribution: fixed, p50: 10ms}
`

// env is the emulated locations and a router in front of them.
type env struct {
	t       *testing.T
	emu     *emulator.Emulator
	srv     *server.Server
	http    *httptest.Server
	metrics *metrics.Metrics
}

// start starts the emulated locations and a router whose table is the pool
// pool makes of their addresses.
func start(t *testing.T, pool func(addr map[string]string) table.Pool) *env {
	t.Helper()
	return startScenario(t, scenario, pool)
}

// startScenario is start with the emulated locations of scenario yml.
func startScenario(t *testing.T, yml string, pool func(addr map[string]string) table.Pool) *env {
	t.Helper()
	sc, err := emulator.ParseScenario([]byte(yml))
	if err != nil {
		t.Fatal(err)
	}
	mc := emulator.NewManualClock()
	mc.Set(time.Minute)
	emu, err := emulator.New(sc, emulator.Options{Seed: 1, Clock: mc})
	if err != nil {
		t.Fatal(err)
	}
	if err := emu.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = emu.Close() })
	addr := map[string]string{}
	for _, r := range emu.Regions() {
		addr[r.Name] = r.GRPC // the REST surface too, as on Google's endpoints
	}

	up := upstream.New(upstream.Options{Insecure: true})
	t.Cleanup(func() { _ = up.Close() })
	c := clocktest.At(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)) // the policy's clock, standing still
	m := metrics.New()
	srv, err := server.New(server.Options{
		Upstream: up, Metrics: m, Logger: slog.New(slog.DiscardHandler), Now: c.Now, Seed: 1,
		RequestTimeout: 20 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Apply(&table.Table{Version: table.Version, Pools: []table.Pool{pool(addr)}}); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return &env{t: t, emu: emu, srv: srv, http: hs, metrics: m}
}

// globalPT is the pool of the scenario as the operator renders it: the PT
// on global, which lists its three pay-as-you-go tiers, and europe-west4.
// Each region is judged on few answers, so that a handful of 429s
// throttles.
func globalPT(addr map[string]string) table.Pool {
	p := dedicatedPool(addr, "google", model, "global", "europe-west4")
	p.Policy.Ejection.MinRequests = 3
	p.Policy.Retry = table.Retry{MaxAttempts: 3, BudgetPercent: new(100), MinRetriesPerSecond: new(100)}
	p.Regions[0].PayGoTiers = []table.PayGoTier{table.PayGoStandard, table.PayGoPriority, table.PayGoFlex}
	return p
}

// dedicatedPool is a pool of a scenario as the operator renders it, one PT
// of one GSU in region pt and a shared region, at the emulator's addresses
// addr, under the default policy but for the PT called dedicated, so that
// a full PT says so.
func dedicatedPool(addr map[string]string, publisher, model, pt, shared string) table.Pool {
	pol := table.DefaultPolicy()
	pol.Provisioned.RequestType = table.RequestTypeDedicated
	return table.Pool{
		Project: project, Publisher: publisher, Model: model, Policy: pol,
		Regions: []table.Region{
			{Name: pt, Endpoint: addr[pt], Tier: table.TierProvisioned, Capacity: table.Capacity{GSUs: 1}},
			{Name: shared, Endpoint: addr[shared], Tier: table.TierShared, Ejectable: true},
		},
	}
}

// staticToken is the caller's credential.
type staticToken struct{}

func (staticToken) Token(context.Context) (*auth.Token, error) {
	return &auth.Token{Value: "caller", Type: "Bearer", Expiry: time.Now().Add(time.Hour)}, nil
}

// genai is the genai SDK on Vertex AI's global location, pointed at the
// router, sending priority as X-Regionwarden-Priority ("" for none).
func (e *env) genai(priority string) *genai.Client {
	e.t.Helper()
	h := http.Header{}
	if priority != "" {
		h.Set(server.HeaderPriority, priority)
	}
	c, err := genai.NewClient(e.t.Context(), &genai.ClientConfig{
		Backend: genai.BackendVertexAI, Project: project, Location: "global",
		Credentials: auth.NewCredentials(&auth.CredentialsOptions{TokenProvider: staticToken{}}),
		HTTPOptions: genai.HTTPOptions{BaseURL: e.http.URL, APIVersion: "v1", Headers: h},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// openai is the OpenAI SDK on the global location's OpenAI-compatible
// endpoint, through the router.
func (e *env) openai(priority string) openai.Client {
	opts := []option.RequestOption{
		option.WithBaseURL(e.http.URL + "/v1/projects/" + project + "/locations/global/endpoints/openapi/"),
		option.WithAPIKey("caller"), option.WithMaxRetries(0),
	}
	if priority != "" {
		opts = append(opts, option.WithHeader(server.HeaderPriority, priority))
	}
	return openai.NewClient(opts...)
}

// generate makes one call through the genai SDK and returns the traffic
// type that served it.
func generate(t *testing.T, c *genai.Client) (genai.TrafficType, error) {
	t.Helper()
	resp, err := c.Models.GenerateContent(t.Context(), model, genai.Text("Which capacity serves me?"), nil)
	if err != nil {
		return "", err
	}
	if !strings.Contains(resp.Text(), "Emulated answer") {
		t.Errorf("text %q", resp.Text())
	}
	return resp.UsageMetadata.TrafficType, nil
}

// chat makes one chat completion through the OpenAI SDK, streamed or not,
// and returns the traffic type its usage reports.
func chat(t *testing.T, c openai.Client, stream bool) (string, error) {
	t.Helper()
	params := openai.ChatCompletionNewParams{
		Model:    emulator.ModelPrefix + model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Which capacity serves me?")},
	}
	var usage openai.CompletionUsage
	if stream {
		s := c.Chat.Completions.NewStreaming(t.Context(), params)
		var text strings.Builder
		for s.Next() {
			ch := s.Current()
			for _, choice := range ch.Choices {
				text.WriteString(choice.Delta.Content)
			}
			if ch.Usage.TotalTokens > 0 {
				usage = ch.Usage
			}
		}
		if err := s.Err(); err != nil {
			return "", err
		}
		if !strings.Contains(text.String(), "Emulated answer") {
			t.Errorf("streamed text %q", text.String())
		}
	} else {
		resp, err := c.Chat.Completions.New(t.Context(), params)
		if err != nil {
			return "", err
		}
		usage = resp.Usage
	}
	var extra struct {
		Google struct {
			TrafficType string `json:"traffic_type"`
		} `json:"google"`
	}
	if f, ok := usage.JSON.ExtraFields["extra_properties"]; ok {
		_ = json.Unmarshal([]byte(f.Raw()), &extra)
	}
	return extra.Google.TrafficType, nil
}

// attempts is the router's count of attempts to region with outcome o.
func (e *env) attempts(region, tier string, o policy.Outcome) float64 {
	c, _ := e.metrics.AttemptSeries(metrics.PoolLabel(project, "google", model), region, tier, o)
	return testutil.ToFloat64(c)
}

// region is the router's live state of a region.
func (e *env) region(name string) policy.RegionSnapshot {
	for _, p := range e.srv.Snapshots() {
		if r, ok := p.Region(name); ok {
			return r
		}
	}
	e.t.Fatalf("no region %s", name)
	return policy.RegionSnapshot{}
}

// served is what the emulated region reports it served, by traffic type.
func (e *env) served(name string) map[string]int64 {
	for _, r := range e.emu.Stats().Regions {
		if r.Name == name {
			return r.ByTrafficType
		}
	}
	return nil
}

// TestGlobalPTServesGlobalCalls: the PT on global serves the calls the
// router sends to the global endpoint; a call to a regional endpoint never
// draws on it, whatever it asks: a pool that declares the PT on a region
// instead (bought on global, declared on europe-west4) gets Google's
// PT-full 429 there while global's PT has room, and the router spills the
// call, to global's pay-as-you-go and europe-west4's.
func TestGlobalPTServesGlobalCalls(t *testing.T) {
	e := start(t, globalPT)
	for _, c := range []func() (string, error){
		func() (string, error) { tt, err := generate(t, e.genai("")); return string(tt), err },
		func() (string, error) { return chat(t, e.openai(""), false) },
	} {
		got, err := c()
		if err != nil {
			t.Fatal(err)
		}
		if got != "PROVISIONED_THROUGHPUT" {
			t.Errorf("traffic type %q, want PROVISIONED_THROUGHPUT", got)
		}
	}
	if s := e.served("global"); s["PROVISIONED_THROUGHPUT"] != 2 {
		t.Errorf("global served %v, want 2 calls from its PT", s)
	}
	if s := e.served("europe-west4"); len(s) != 0 {
		t.Errorf("europe-west4 served %v, want nothing while the PT has room", s)
	}

	misdeclared := func(addr map[string]string) table.Pool {
		p := globalPT(addr)
		p.Regions[0].Tier, p.Regions[0].Capacity = table.TierShared, table.Capacity{}
		p.Regions[1].Tier, p.Regions[1].Ejectable = table.TierProvisioned, false
		return p
	}
	e = start(t, misdeclared)
	got, err := generate(t, e.genai(""))
	if err != nil {
		t.Fatal(err)
	}
	if got != genai.TrafficTypeOnDemand {
		t.Errorf("traffic type %q, want ON_DEMAND: a regional call never uses global's PT", got)
	}
	if n := e.attempts("europe-west4", "provisioned", policy.ProvisionedFull); n != 1 {
		t.Errorf("%v PT-full 429s from europe-west4, want 1: it holds no PT", n)
	}
	if s := e.served("global"); s["PROVISIONED_THROUGHPUT"] != 0 {
		t.Errorf("global served %v from its PT, want none: only global's own calls use it", s)
	}
}

// TestCriticalSpillsIntoPriorityPayGo: with the PT full, a critical call
// spills into Priority PayGo on global and says ON_DEMAND_PRIORITY; a
// sheddable one goes to Flex PayGo (ON_DEMAND_FLEX); a default one to
// standard pay-as-you-go (ON_DEMAND). A PT-full 429 spills at once and does
// not throttle global.
func TestCriticalSpillsIntoPriorityPayGo(t *testing.T) {
	for _, sdk := range []string{"genai", "openai", "openai-stream"} {
		t.Run(sdk, func(t *testing.T) {
			e := start(t, globalPT)
			call := func(priority string) (string, error) {
				switch sdk {
				case "genai":
					tt, err := generate(t, e.genai(priority))
					return string(tt), err
				default:
					return chat(t, e.openai(priority), sdk == "openai-stream")
				}
			}
			for range 2 { // fill the PT
				if got, err := call(""); err != nil || got != "PROVISIONED_THROUGHPUT" {
					t.Fatalf("filling the PT: %q, %v", got, err)
				}
			}
			for _, tc := range []struct{ priority, want string }{
				{"critical", "ON_DEMAND_PRIORITY"},
				{"critical", "ON_DEMAND_PRIORITY"},
				{"sheddable", "ON_DEMAND_FLEX"},
				{"", "ON_DEMAND"},
			} {
				got, err := call(tc.priority)
				if err != nil {
					t.Fatalf("%s: %v", tc.priority, err)
				}
				if got != tc.want {
					t.Errorf("priority %q served as %q, want %q", tc.priority, got, tc.want)
				}
			}
			if n := e.attempts("global", "provisioned", policy.ProvisionedFull); n != 1 {
				t.Errorf("%v PT-full 429s, want 1: once Google says the PT is full, calls spill without asking it", n)
			}
			g := e.region("global")
			if !g.ProvisionedFull || g.ThrottleProbability != 0 || g.Demotion != nil {
				t.Errorf("global after a PT-full 429: full %v, throttle %v, demoted %v; want full, not throttled, not demoted",
					g.ProvisionedFull, g.ThrottleProbability, g.Demotion != nil)
			}
			if s := e.served("global"); s["ON_DEMAND_PRIORITY"] != 2 || s["ON_DEMAND_FLEX"] != 1 {
				t.Errorf("global served %v", s)
			}
		})
	}
}

// TestPayGo429Throttles: when standard pay-as-you-go answers "Resource
// exhausted", the router counts it as the region throttling (capacity, not
// provisioned_full) and its throttle turns calls away from that capacity,
// while Priority PayGo on the same location goes on serving critical calls.
func TestPayGo429Throttles(t *testing.T) {
	e := start(t, globalPT)
	c := e.genai("")
	for range 2 {
		if _, err := generate(t, c); err != nil {
			t.Fatal(err)
		}
	}
	var refused int
	for range 12 {
		_, err := generate(t, c)
		var apiErr genai.APIError
		switch {
		case err == nil:
		case errors.As(err, &apiErr) && apiErr.Code == http.StatusTooManyRequests:
			refused++
		default:
			t.Fatal(err)
		}
	}
	if refused == 0 {
		t.Fatal("no call was refused once standard pay-as-you-go was exhausted")
	}
	capacity := e.attempts("global", "shared", policy.Capacity) + e.attempts("europe-west4", "shared", policy.Capacity)
	if capacity < 3 {
		t.Errorf("%v pay-as-you-go 429s counted as capacity, want at least 3", capacity)
	}
	if n := e.attempts("global", "provisioned", policy.ProvisionedFull); n != 1 {
		t.Errorf("%v PT-full 429s, want 1", n)
	}
	throttled := false
	for _, name := range []string{"global", "europe-west4"} {
		if r := e.region(name); r.Throttle["standard"] > 0 {
			throttled = true
		}
	}
	if !throttled {
		t.Errorf("no standard pay-as-you-go is throttled after its 429s: %+v %+v", e.region("global"), e.region("europe-west4"))
	}
	if r := e.region("global"); r.Throttle["priority"] != 0 || r.Throttle["provisioned"] != 0 {
		t.Errorf("global's other capacities throttled: %v", r.Throttle)
	}
	if got, err := generate(t, e.genai("critical")); err != nil || got != genai.TrafficTypeOnDemandPriority {
		t.Errorf("critical call while standard throttles: %q, %v; want ON_DEMAND_PRIORITY", got, err)
	}
}

// TestOpenAIErrorsPassThrough: a 429 the router passes on reaches the
// OpenAI SDK as an API error with its status.
func TestOpenAIErrorsPassThrough(t *testing.T) {
	e := start(t, globalPT)
	c := e.openai("")
	var err error
	for range 20 {
		if _, err = chat(t, c, false); err != nil {
			break
		}
	}
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("err = %v, want a 429 API error", err)
	}
	resp := apiErr.Response
	if resp != nil && resp.Body != nil {
		_, _ = io.Copy(io.Discard, resp.Body)
	}
}
