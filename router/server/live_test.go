package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"google.golang.org/genai"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/regionwarden/regionwarden/internal/redisserver"
	"github.com/regionwarden/regionwarden/internal/waittest"
	"github.com/regionwarden/regionwarden/router/auth"
	"github.com/regionwarden/regionwarden/router/policy"
	"github.com/regionwarden/regionwarden/router/server"
	"github.com/regionwarden/regionwarden/router/share"
	"github.com/regionwarden/regionwarden/router/table"
	"github.com/regionwarden/regionwarden/router/upstream"
	"github.com/regionwarden/regionwarden/router/upstream/upstreamtest"
)

// liveClient is genai pointed at the router for the Live API, on a location
// the pool does not have: the router puts the region's in the setup.
func (r *router) liveClient() *genai.Client {
	r.t.Helper()
	return r.clientAt("ws"+strings.TrimPrefix(r.http.URL, "http")+"/", "us-east5", "v1beta1")
}

// liveAnswer sends one turn on s and returns the text of the answer and its
// usage, or the error (a close) that ended the session.
func liveAnswer(s *genai.Session, prompt string) (string, *genai.UsageMetadata, error) {
	turn := true
	if err := s.SendClientContent(genai.LiveClientContentInput{Turns: genai.Text(prompt), TurnComplete: &turn}); err != nil {
		return "", nil, err
	}
	for {
		msg, err := s.Receive()
		if err != nil {
			return "", nil, err
		}
		// genai gives the setupComplete first again.
		if c := msg.ServerContent; c != nil && c.ModelTurn != nil && len(c.ModelTurn.Parts) > 0 {
			return c.ModelTurn.Parts[0].Text, msg.UsageMetadata, nil
		}
	}
}

// connect opens a Live session on model through c (cfg may be nil), closed
// when the test ends if it has not been.
func connect(t *testing.T, c *genai.Client, cfg *genai.LiveConnectConfig) *genai.Session {
	t.Helper()
	s, err := c.Live.Connect(context.Background(), model, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// liveTurn is liveAnswer for a turn that must be answered.
func liveTurn(t *testing.T, s *genai.Session, prompt string) (string, *genai.UsageMetadata) {
	t.Helper()
	text, usage, err := liveAnswer(s, prompt)
	if err != nil {
		t.Fatal(err)
	}
	return text, usage
}

// TestLiveSessionsAreRouted: genai's Live client, pointed at the router,
// holds a session with the pool's PT: the setup reaches the PT with its
// model in the PT's location, turns are answered there and their tokens
// counted as the PT's. When the PT refuses new sessions (its quota full:
// Google closes the socket with 1011 RESOURCE_EXHAUSTED before
// setupComplete) the next session is set up in the shared region, the
// PT's refusal counted as capacity, not failure; and when neither can set a
// session up the caller gets the close a region would have given, code and
// status.
func TestLiveSessionsAreRouted(t *testing.T) {
	pt, shared, r := ptAndShared(t)
	c := r.liveClient()
	ctx := context.Background()

	s := connect(t, c, nil)
	text, usage := liveTurn(t, s, "hello")
	if want := "europe-west1 answers: hello"; text != want {
		t.Fatalf("answer %q, want %q", text, want)
	}
	if usage == nil || usage.PromptTokenCount != 7 || usage.TrafficType != genai.TrafficTypeProvisionedThroughput {
		t.Fatalf("usage %+v did not come through", usage)
	}
	text, _ = liveTurn(t, s, "again")
	if want := "europe-west1 answers: again"; text != want {
		t.Fatalf("second answer %q, want %q", text, want)
	}
	_ = s.Close()
	got := pt.Last()
	if got.Method != upstreamtest.MethodLive || got.Model != pt.ModelName(project, "google", model) || len(got.Messages) != 2 {
		t.Fatalf("the PT saw %s of %q with %d messages, want a Live session of %q with 2", got.Method, got.Model, len(got.Messages), pt.ModelName(project, "google", model))
	}
	if shared.Calls() != 0 {
		t.Fatalf("the shared region saw %d sessions", shared.Calls())
	}
	pool := project + "/google/" + model
	if in := counter(t, r.metrics, "regionwarden_router_tokens_total", map[string]string{
		"pool": pool, "region": "europe-west1", "direction": "input", "traffic_type": "PROVISIONED_THROUGHPUT",
	}); in != 14 {
		t.Fatalf("input tokens counted %v, want 14 (two turns of 7)", in)
	}

	pt.set(func(b *upstreamtest.Behavior) {
		b.Fault = func(int64) error {
			return status.Error(codes.ResourceExhausted, "Quota exceeded for concurrent sessions.")
		}
	})
	s = connect(t, c, nil)
	text, _ = liveTurn(t, s, "spill")
	_ = s.Close()
	if want := "us-central1 answers: spill"; text != want {
		t.Fatalf("with the PT full: answer %q, want %q", text, want)
	}
	if n := r.attempts("europe-west1", "provisioned", policy.Capacity); n != 1 {
		t.Fatalf("the PT's refusal counted %v times as capacity, want 1", n)
	}
	if n := r.attempts("europe-west1", "provisioned", policy.Failure); n != 0 {
		t.Fatalf("the PT's refusal counted %v times as a failure", n)
	}

	shared.set(func(b *upstreamtest.Behavior) {
		b.Fault = func(int64) error {
			return status.Error(codes.ResourceExhausted, "Quota exceeded for concurrent sessions.")
		}
	})
	s, err := c.Live.Connect(ctx, model, nil)
	if err == nil {
		_, err = s.Receive()
		_ = s.Close()
	}
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.CloseInternalServerErr || !strings.HasPrefix(ce.Text, "RESOURCE_EXHAUSTED: ") {
		t.Fatalf("with no region to set up in: %v, want a close 1011 RESOURCE_EXHAUSTED", err)
	}
}

// TestLiveBytesPassUnchanged: a session's messages go both ways as they
// came, fields no SDK knows and their spacing included; of the setup only
// the model's location changes, to the region's. A close the region sends
// reaches the caller with its code and text.
func TestLiveBytesPassUnchanged(t *testing.T) {
	pt, _, r := ptAndShared(t)
	pt.set(func(b *upstreamtest.Behavior) { b.ExtraJSON = `"someFutureAnswer": {"x": [1, 2]}` })
	h := http.Header{"Authorization": {"Bearer " + callerTok}}
	conn, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(r.http.URL, "http")+upstream.LivePath("v1"), h)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	defer func() { _ = conn.Close() }()
	asked := "projects/" + project + "/locations/us-east5/publishers/google/models/" + model
	setup := `{ "futureTop" : {"a":"setup"},  "setup":{"generationConfig":{"someFutureOption":true},` + "\n" +
		`  "model" :  "` + asked + `", "futureSetup": [ {"model": "not this one"} ] } }`
	if err := conn.WriteMessage(websocket.TextMessage, []byte(setup)); err != nil {
		t.Fatal(err)
	}
	if _, first, err := conn.ReadMessage(); err != nil || string(first) != `{"setupComplete":{}}` {
		t.Fatalf("first message %q (%v), want setupComplete as the region sent it", first, err)
	}
	turn := `{"clientContent": {"turns":[{"role":"user","parts":[{"text":"hi"}]}], "turnComplete":true, "futureClient": 1 }}`
	if err := conn.WriteMessage(websocket.TextMessage, []byte(turn)); err != nil {
		t.Fatal(err)
	}
	_, answer, err := conn.ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(answer, []byte(`,"someFutureAnswer": {"x": [1, 2]}}`)) {
		t.Fatalf("answer %s lost the field no SDK knows", answer)
	}
	got := pt.Last()
	want := strings.Replace(setup, asked, pt.ModelName(project, "google", model), 1)
	if string(got.Body) != want {
		t.Fatalf("the region's setup:\n%s\nwant:\n%s", got.Body, want)
	}
	if len(got.Messages) != 1 || string(got.Messages[0]) != turn {
		t.Fatalf("the region's messages %q, want [%q]", got.Messages, turn)
	}
	if a := got.Auth; len(a) != 0 && a[0] == "Bearer "+callerTok {
		t.Fatal("the caller's token reached the region")
	}
	if err := conn.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "bye")); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, _, err = conn.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.CloseNormalClosure {
		t.Fatalf("after the caller's close: %v, want the region's normal close back", err)
	}
}

// TestLiveRefusals: what is wrong with a session is said in the close
// frame, as Google's servers say it, and costs no region anything: a setup
// that names no model, a model that is no pool's, a setup that never comes.
func TestLiveRefusals(t *testing.T) {
	pt, shared, r := ptAndShared(t)
	url := "ws" + strings.TrimPrefix(r.http.URL, "http") + upstream.LivePath("v1beta1")
	for _, tc := range []struct {
		name, setup string
		code        int
		status      string
	}{
		{"no model", `{"setup":{"generationConfig":{}}}`, websocket.CloseInvalidFramePayloadData, "INVALID_ARGUMENT"},
		{"not JSON", `{"setup":`, websocket.CloseInvalidFramePayloadData, "INVALID_ARGUMENT"},
		{"short name", `{"setup":{"model":"` + model + `"}}`, websocket.CloseInvalidFramePayloadData, "INVALID_ARGUMENT"},
		{"no pool", `{"setup":{"model":"projects/` + project + `/locations/us-east5/publishers/google/models/other"}}`, websocket.ClosePolicyViolation, "NOT_FOUND"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, resp, err := websocket.DefaultDialer.Dial(url, nil)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			defer func() { _ = conn.Close() }()
			if err := conn.WriteMessage(websocket.TextMessage, []byte(tc.setup)); err != nil {
				t.Fatal(err)
			}
			_, _, err = conn.ReadMessage()
			var ce *websocket.CloseError
			if !errors.As(err, &ce) || ce.Code != tc.code || !strings.HasPrefix(ce.Text, tc.status+": ") {
				t.Fatalf("got %v, want close %d %s", err, tc.code, tc.status)
			}
		})
	}
	resp, _ := r.do(http.MethodGet, upstream.LivePath("v1beta1"), nil, nil)
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a GET that is no websocket: %d, want 400", resp.StatusCode)
	}
	if n := pt.Calls() + shared.Calls(); n != 0 {
		t.Fatalf("the regions saw %d sessions", n)
	}
}

// TestLiveWithTheCallersCredentials: under --caller-auth=forward a session
// is set up with the caller's own token, which reaches the region on the
// handshake; a caller without one is refused 401 before the handshake, and
// no region sees anything.
func TestLiveWithTheCallersCredentials(t *testing.T) {
	pt, shared, r := forwardingRouter(t)
	s := connect(t, r.liveClient(), nil)
	if text, _ := liveTurn(t, s, "mine"); text != "europe-west1 answers: mine" {
		t.Fatalf("answer %q", text)
	}
	_ = s.Close()
	if a := pt.Last().Auth; len(a) != 1 || a[0] != "Bearer "+callerTok {
		t.Fatalf("the region saw Authorization %q, want the caller's", a)
	}
	_, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(r.http.URL, "http")+upstream.LivePath("v1beta1"), nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no credentials: %v, want 401 before the handshake", err)
	}
	_ = resp.Body.Close()
	if n := pt.Calls() + shared.Calls(); n != 1 {
		t.Fatalf("the regions saw %d sessions, want the first alone", n)
	}
}

// TestLiveSessionsHoldTheBudget: each session holds its share of the budget
// of request bytes for as long as it lasts, so open sessions cannot outgrow
// the memory the budget stands for: with room for one, a second is refused
// 429 before its handshake, and admitted once the first has closed. The
// live_sessions gauge counts the one open.
func TestLiveSessionsHoldTheBudget(t *testing.T) {
	pt := startRegion(t, "europe-west1", table.TierProvisioned)
	r := startRouterWith(t, func(o *server.Options) { o.MaxBodyBytes, o.MaxBodyBytesInFlight = 32<<10, 100<<10 }, poolOf(generous(), region(pt, 0)))
	c := r.liveClient()
	first := connect(t, c, nil)
	liveTurn(t, first, "one")
	sessions := func() float64 {
		return counter(t, r.metrics, "regionwarden_router_live_sessions", map[string]string{"pool": project + "/google/" + model})
	}
	if n := sessions(); n != 1 {
		t.Fatalf("live_sessions = %v with one session open", n)
	}
	_, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(r.http.URL, "http")+upstream.LivePath("v1beta1"), nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a second session: %v, want 429 before the handshake", err)
	}
	_ = resp.Body.Close()
	_ = first.Close()
	waittest.For(t, 10*time.Second, "live_sessions back to 0", func() bool { return sessions() == 0 })
	// The first session's relay ended as its connection closed.
	waittest.For(t, 10*time.Second, "a session once the first has closed", func() bool {
		second, err := c.Live.Connect(context.Background(), model, nil)
		if err != nil {
			return false
		}
		_ = second.Close()
		return true
	})
}

// TestLiveSessionsGoAwayWhenTheRouterStops: a router that stops ends its
// sessions with 1001 (going away), which says to open a new one, rather
// than let them be cut off when its process exits; a session asked for
// after that is refused 503 before its handshake.
func TestLiveSessionsGoAwayWhenTheRouterStops(t *testing.T) {
	pt, _, r := ptAndShared(t)
	s := connect(t, r.liveClient(), nil)
	liveTurn(t, s, "before")
	r.srv.CloseLiveSessions()
	_, err := s.Receive()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.CloseGoingAway || !strings.HasPrefix(ce.Text, "UNAVAILABLE: ") {
		t.Fatalf("after the router stopped: %v, want close 1001 UNAVAILABLE", err)
	}
	_, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(r.http.URL, "http")+upstream.LivePath("v1beta1"), nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a session after the router stopped: %v, want 503", err)
	}
	_ = resp.Body.Close()
	if n := pt.Calls(); n != 1 {
		t.Fatalf("the region saw %d sessions, want 1", n)
	}
}

// TestLiveSessionEndsTeachThePolicy: a PT called dedicated that is full
// ends a session set up on it at its next turn (1011, "Exceeded the
// Provisioned Throughput"). The caller gets that close as it is, and the
// policy learns of it as of any attempt the full PT refused: the next
// session is set up in the shared region rather than on the full PT, where
// it would end at its first turn too.
func TestLiveSessionEndsTeachThePolicy(t *testing.T) {
	pt := startRegion(t, "europe-west1", table.TierProvisioned)
	shared := startRegion(t, "us-central1", table.TierShared)
	pol := generous()
	pol.Provisioned.RequestType = table.RequestTypeDedicated
	r := startRouter(t, poolOf(pol, region(pt, 0), region(shared, 0)))
	pt.set(func(b *upstreamtest.Behavior) {
		b.LiveTurnFault = func(turn int) error {
			if turn > 1 {
				return status.Error(codes.ResourceExhausted, "Too many requests. Exceeded the Provisioned Throughput.")
			}
			return nil
		}
	})
	c := r.liveClient()
	s := connect(t, c, nil)
	if text, _ := liveTurn(t, s, "one"); text != "europe-west1 answers: one" {
		t.Fatalf("first turn %q", text)
	}
	_, _, err := liveAnswer(s, "two")
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.CloseInternalServerErr || !strings.Contains(ce.Text, "Exceeded the Provisioned Throughput") {
		t.Fatalf("the turn past the PT: %v, want the region's close", err)
	}
	waittest.For(t, 10*time.Second, "the full PT learned", func() bool {
		return r.attempts("europe-west1", "provisioned", policy.ProvisionedFull) == 1
	})
	s2 := connect(t, c, nil)
	if text, _ := liveTurn(t, s2, "three"); text != "us-central1 answers: three" {
		t.Fatalf("the next session answered %q, want the shared region's", text)
	}
	if n := pt.Calls(); n != 1 {
		t.Fatalf("the full PT saw %d sessions, want 1", n)
	}
}

// FuzzLiveSetup sends the router a session's setup of any bytes. Whatever
// comes in, the router either refuses it with a close as Google's servers
// send one (1007 INVALID_ARGUMENT, 1008 NOT_FOUND) and no region sees it,
// or sets the session up in the PT with the caller's setup as it came but
// for setup.model, which names the PT's location: the same JSON, every
// other member unchanged. A setup naming its model twice is refused: the
// region's parser might take the other.
func FuzzLiveSetup(f *testing.F) {
	pt, r := onePT(f)
	name := "projects/" + project + "/locations/us-east5/publishers/google/models/" + model
	for _, seed := range []string{
		`{"setup":{"model":"` + name + `"}}`,
		`{"setup":{"generationConfig":{"responseModalities":["TEXT"]},"model":"` + name + `","tools":[{"setup":{"model":"x"}}]}}`,
		`{"setup":{"model":"` + strings.ReplaceAll(name, "/", `\/`) + `"}}`,
		`{"setup":{"model":"` + name + `","model":"projects/other/locations/us-east5/publishers/google/models/` + model + `"}}`,
		`{"setup":{"model":"` + name + `"}} {"setup":{"model":"x"}}`,
		`{"setup":{"model":7}}`,
		`{"model":"` + name + `"}`,
		`[{"setup":{"model":"` + name + `"}}]`,
		`{"setup":{"model":"` + name + `"}`,
	} {
		f.Add(seed)
	}
	url := "ws" + strings.TrimPrefix(r.http.URL, "http") + upstream.LivePath("v1")
	f.Fuzz(func(t *testing.T, setup string) {
		before := pt.Calls()
		conn, resp, err := websocket.DefaultDialer.Dial(url, nil)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		defer func() { _ = conn.Close() }()
		if err := conn.WriteMessage(websocket.TextMessage, []byte(setup)); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, first, err := conn.ReadMessage()
		if ce, ok := errors.AsType[*websocket.CloseError](err); ok {
			if ce.Code != websocket.CloseInvalidFramePayloadData && ce.Code != websocket.ClosePolicyViolation {
				t.Fatalf("refused with %d %q, want 1007 or 1008", ce.Code, ce.Text)
			}
			if n := pt.Calls() - before; n != 0 {
				t.Fatalf("a refused setup reached the region (%d sessions)", n)
			}
			return
		}
		if err != nil || string(first) != `{"setupComplete":{}}` {
			t.Fatalf("first message %q, %v", first, err)
		}
		var in, got map[string]any
		if err := json.Unmarshal([]byte(setup), &in); err != nil {
			t.Fatalf("the router set up a session from a setup that is not a JSON object: %v", err)
		}
		if err := json.Unmarshal(pt.Last().Body, &got); err != nil {
			t.Fatalf("the region got a setup that is not JSON: %q", pt.Last().Body)
		}
		in["setup"].(map[string]any)["model"] = pt.ModelName(project, "google", model)
		if !reflect.DeepEqual(in, got) {
			t.Fatalf("the region got %s for %s", pt.Last().Body, setup)
		}
	})
}

// TestLiveTurnsCountAgainstQuotas: each turn a session's region answers is
// a request the session made of it, and the policy's meters count it: with
// a PT that takes three calls a second (the policy's clock standing
// still), a session's setup and two turns fill it, and the next call goes
// to the shared region. Were the turns not counted, the PT's meter would
// hold the setup alone and take the call.
func TestLiveTurnsCountAgainstQuotas(t *testing.T) {
	pt := startRegion(t, "europe-west1", table.TierProvisioned)
	shared := startRegion(t, "us-central1", table.TierShared)
	r := startRouter(t, poolOf(generous(), region(pt, 3), region(shared, 0)))
	s := connect(t, r.liveClient(), nil)
	for _, p := range []string{"one", "two"} {
		if text, _ := liveTurn(t, s, p); text != "europe-west1 answers: "+p {
			t.Fatalf("turn %q answered %q", p, text)
		}
	}
	waittest.For(t, 10*time.Second, "the turns counted", func() bool {
		return r.attempts("europe-west1", "provisioned", policy.Success) == 3
	})
	text, err := r.generate(r.client("v1"), "after the session's turns")
	if err != nil || !strings.HasPrefix(text, "us-central1") {
		t.Fatalf("the next call: %q, %v; want the shared region's answer, the PT's second full", text, err)
	}
}

// TestResumedLiveSessionsGoWhereTheirStateIs: a session resumed with a
// handle goes to the region that issued it, which alone holds the
// session's state, even when the policy would send a new session
// elsewhere: a session set up in the shared region while the PT refused
// new ones is resumed there once the PT has room again, and a new session
// goes to the PT.
func TestResumedLiveSessionsGoWhereTheirStateIs(t *testing.T) {
	for _, tc := range []struct {
		name string
		// store: two routers share a store, and the session is resumed
		// through the other one (a reconnection reaches any router).
		store bool
	}{{"through the same router", false}, {"through another router sharing the store", true}} {
		t.Run(tc.name, func(t *testing.T) {
			pt := startRegion(t, "europe-west1", table.TierProvisioned)
			shared := startRegion(t, "us-central1", table.TierShared)
			pool := poolOf(generous(), region(pt, 0), region(shared, 0))
			first, then := startRouter(t, pool), (*router)(nil)
			var thenMeter *share.Meter
			if tc.store {
				store := redisserver.ForTest(t)
				_, firstOpts := withStore(t, store, "first")
				m, thenOpts := withStore(t, store, "then")
				first, then, thenMeter = startRouterWith(t, firstOpts, pool), startRouterWith(t, thenOpts, pool), m
			}
			for _, region := range []*fakeRegion{pt, shared} {
				region.set(func(b *upstreamtest.Behavior) { b.LiveResumption = true })
			}
			pt.set(func(b *upstreamtest.Behavior) {
				b.Fault = func(int64) error {
					return status.Error(codes.ResourceExhausted, "Quota exceeded for concurrent sessions.")
				}
			})
			s := connect(t, first.liveClient(), &genai.LiveConnectConfig{SessionResumption: &genai.SessionResumptionConfig{}})
			var handle string
			for handle == "" {
				msg, err := s.Receive()
				if err != nil {
					t.Fatal(err)
				}
				if u := msg.SessionResumptionUpdate; u != nil {
					handle = u.NewHandle
				}
			}
			_ = s.Close()
			if handle != "us-central1-handle" {
				t.Fatalf("handle %q, want the shared region's", handle)
			}
			pt.set(func(b *upstreamtest.Behavior) { b.Fault = nil })
			first.clock.Advance(time.Minute) // the PT's refusal is history
			c := first.liveClient()
			if then != nil {
				c = then.liveClient()
				handleStored(t, thenMeter, handle)
			}
			for _, tc := range []struct {
				name, handle, want string
			}{
				{"resumed", handle, "us-central1"},
				{"new", "", "europe-west1"},
			} {
				s := connect(t, c, &genai.LiveConnectConfig{SessionResumption: &genai.SessionResumptionConfig{Handle: tc.handle}})
				text, _ := liveTurn(t, s, tc.name)
				_ = s.Close()
				if want := tc.want + " answers: " + tc.name; text != want {
					t.Errorf("%s session: %q, want %q", tc.name, text, want)
				}
			}
		})
	}
}

// knownAccounts is a token reviewer that knows each token as the
// ServiceAccount chat/<token>.
type knownAccounts struct{}

func (knownAccounts) Review(_ context.Context, token string) (auth.Identity, error) {
	return auth.Identity{Namespace: "chat", Name: token}, nil
}

// TestResumptionHandlesAreTheirCallers: under --caller-auth=kubernetes the
// router resumes sessions as itself, so Google cannot tell its callers
// apart: a handle issued to one ServiceAccount's session is refused (1008
// PERMISSION_DENIED) to another that the pool admits, before any region
// sees it, and resumes the session for its own; through the router that
// relayed it, or another that shares its store. With the store gone, the
// other router cannot tell whose session the handle resumes and refuses it
// (1013 UNAVAILABLE); the one that relayed it still resumes it.
func TestResumptionHandlesAreTheirCallers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store bool // the handle comes back through another router sharing the store
	}{{"through the same router", false}, {"through another router sharing the store", true}} {
		t.Run(tc.name, func(t *testing.T) {
			pt := startRegion(t, "europe-west1", table.TierProvisioned)
			pt.set(func(b *upstreamtest.Behavior) { b.LiveResumption = true })
			authn, err := auth.New(auth.ModeKubernetes, knownAccounts{})
			if err != nil {
				t.Fatal(err)
			}
			pool := poolOf(generous(), region(pt, 0))
			pool.Callers = table.Callers{ServiceAccounts: []table.ServiceAccount{{Namespace: "chat", Name: "*"}}}
			withAuth := func(o *server.Options) { o.Auth = authn }
			first := startRouterWith(t, withAuth, pool)
			then, thenMeter := first, (*share.Meter)(nil)
			var store *redisserver.Server
			if tc.store {
				store = redisserver.ForTest(t)
				_, firstOpts := withStore(t, store, "first")
				m, thenOpts := withStore(t, store, "then")
				first = startRouterWith(t, func(o *server.Options) { withAuth(o); firstOpts(o) }, pool)
				then = startRouterWith(t, func(o *server.Options) { withAuth(o); thenOpts(o) }, pool)
				thenMeter = m
			}
			name := "projects/" + project + "/locations/us-east5/publishers/google/models/" + model
			open := func(r *router, token, handle string) (*websocket.Conn, error) {
				url := "ws" + strings.TrimPrefix(r.http.URL, "http") + upstream.LivePath("v1")
				conn, resp, err := websocket.DefaultDialer.Dial(url, http.Header{"Authorization": {"Bearer " + token}})
				if err != nil {
					return nil, err
				}
				_ = resp.Body.Close()
				setup := `{"setup":{"model":"` + name + `","sessionResumption":{"handle":"` + handle + `"}}}`
				if err := conn.WriteMessage(websocket.TextMessage, []byte(setup)); err != nil {
					return conn, err
				}
				_, _, err = conn.ReadMessage() // setupComplete, or the close
				return conn, err
			}
			conn, err := open(first, "alice", "")
			if err != nil {
				t.Fatal(err)
			}
			if _, msg, err := conn.ReadMessage(); err != nil || !strings.Contains(string(msg), `"newHandle":"europe-west1-handle"`) {
				t.Fatalf("the handle's message: %q, %v", msg, err)
			}
			_ = conn.Close()
			if thenMeter != nil {
				handleStored(t, thenMeter, "europe-west1-handle")
			}
			// refused opens a resumption of the handle through r as
			// token, which must be closed with code and status before
			// any region sees it.
			refused := func(what string, r *router, token string, code int, status string) {
				t.Helper()
				calls := pt.Calls()
				conn, err := open(r, token, "europe-west1-handle")
				if ce, ok := errors.AsType[*websocket.CloseError](err); !ok || ce.Code != code || !strings.HasPrefix(ce.Text, status+": ") {
					t.Fatalf("%s: %v, want %d %s", what, err, code, status)
				}
				_ = conn.Close()
				if pt.Calls() != calls {
					t.Fatalf("%s: the refused resumption reached the region", what)
				}
			}
			refused("another caller resuming", then, "mallory", websocket.ClosePolicyViolation, "PERMISSION_DENIED")
			conn, err = open(then, "alice", "europe-west1-handle")
			if err != nil {
				t.Fatalf("its own caller resuming: %v", err)
			}
			_ = conn.Close()
			if !tc.store {
				return
			}
			// With the store gone, a router that did not relay the
			// handle cannot tell whose it is, and resumes nothing; the
			// one that relayed it still can.
			_, thirdOpts := withStore(t, store, "third")
			third := startRouterWith(t, func(o *server.Options) { withAuth(o); thirdOpts(o) }, pool)
			store.Kill()
			refused("resuming through another router, the store gone", third, "alice", websocket.CloseTryAgainLater, "UNAVAILABLE")
			if conn, err = open(first, "alice", "europe-west1-handle"); err != nil {
				t.Fatalf("resuming through the router that relayed it, the store gone: %v", err)
			}
			_ = conn.Close()
		})
	}
}

// TestLiveHandshakesTheUpgraderRefuses: a websocket handshake the router
// cannot accept (no key, a version it does not speak) is answered in
// Google's error JSON, as the router's other refusals are, and costs no
// region anything.
func TestLiveHandshakesTheUpgraderRefuses(t *testing.T) {
	pt, _, r := ptAndShared(t)
	for _, h := range []http.Header{
		{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}, "Sec-Websocket-Version": {"13"}},
		{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}, "Sec-Websocket-Version": {"8"}, "Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="}},
	} {
		resp, body := r.do(http.MethodGet, upstream.LivePath("v1"), nil, h)
		if code, _, st := googleErr(t, body); resp.StatusCode != http.StatusBadRequest || code != http.StatusBadRequest || st != "INVALID_ARGUMENT" {
			t.Errorf("%v: %d %s, want 400 INVALID_ARGUMENT in Google's error JSON", h, resp.StatusCode, body)
		}
	}
	if n := pt.Calls(); n != 0 {
		t.Errorf("the region saw %d sessions", n)
	}
}
