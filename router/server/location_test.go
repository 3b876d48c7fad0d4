package server_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/genai"

	"github.com/regionwarden/regionwarden/router/auth"
	"github.com/regionwarden/regionwarden/router/server"
	"github.com/regionwarden/regionwarden/router/table"
	"github.com/regionwarden/regionwarden/router/upstream/upstreamtest"
)

// TestLocationCallsAreForwarded: calls of Vertex AI that the router does
// not route reach the location they name through it, as the genai SDK
// pointed at the router makes them with the caller's own credentials: a
// batch prediction job is created and read, and a model method the router does not route (Veo's predictLongRunning) gets
// the region's own answer; each at the endpoint the pool names for the
// location, the caller's body and token unchanged, the region's answers as
// they came, counted under the method label passthrough.
func TestLocationCallsAreForwarded(t *testing.T) {
	pt, shared, r := forwardingRouter(t)
	ctx := context.Background()
	c := r.client("v1")

	job, err := c.Batches.Create(ctx, model, &genai.BatchJobSource{Format: "jsonl", GCSURI: []string{"gs://in/requests.jsonl"}},
		&genai.CreateBatchJobConfig{DisplayName: "nightly", Dest: &genai.BatchJobDestination{Format: "jsonl", GCSURI: "gs://out/"}})
	if err != nil {
		t.Fatal(err)
	}
	if job.Name != "projects/"+project+"/locations/europe-west1/batchPredictionJobs/1" || job.State != genai.JobStatePending || job.DisplayName != "nightly" {
		t.Errorf("created %+v", job)
	}
	created := pt.Last()
	if created.Method != upstreamtest.MethodLocation || !bytes.Contains(created.Body, []byte("gs://in/requests.jsonl")) {
		t.Errorf("the region got %s %s, want the caller's job", created.Method, created.Body)
	}
	if got := created.Auth; len(got) != 1 || got[0] != "Bearer "+callerTok {
		t.Errorf("the region got Authorization %q, want the caller's own token", got)
	}
	got, err := c.Batches.Get(ctx, job.Name, nil)
	if err != nil || got.Name != job.Name {
		t.Errorf("get %+v, %v", got, err)
	}
	if _, err := c.Batches.Get(ctx, "projects/"+project+"/locations/europe-west1/batchPredictionJobs/9", nil); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("a missing job: %v, want the region's 404", err)
	}
	resp, body := r.post("/v1/projects/"+project+"/locations/europe-west1/publishers/google/models/veo-3.0-generate-001:predictLongRunning",
		`{"instances":[{"prompt":"a lighthouse"}]}`, http.Header{"Authorization": {"Bearer " + callerTok}})
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), `method \"predictLongRunning\" is not served`) {
		t.Errorf("predictLongRunning: %d %s, want the region's own 404", resp.StatusCode, body)
	}
	if n := shared.Calls(); n != 0 {
		t.Errorf("the pool's other region got %d calls, want none", n)
	}
	r.requestsCounted("passthrough answered 200 (create and get)", map[string]string{"method": "passthrough", "code": "200"}, 2)
	r.requestsCounted("passthrough answered 404 (the missing job, predictLongRunning)", map[string]string{"method": "passthrough", "code": "404"}, 2)

	resp, body = r.do(http.MethodGet, "/v1/projects/"+project+"/locations/asia-south1/batchPredictionJobs/1", nil, http.Header{"Authorization": {"Bearer " + callerTok}})
	if _, msg, _ := googleErr(t, body); resp.StatusCode != http.StatusNotFound || !strings.Contains(msg, `location "asia-south1"`) {
		t.Errorf("a location of no pool: %d %s, want 404 naming it", resp.StatusCode, body)
	}
}

// TestLocationCallsNeedTheCallersCredentials: a router that calls Google as
// itself refuses the calls it does not route, naming why, and a path that
// would name another resource than it says (a dot segment) or a method
// Vertex AI's REST surface does not use goes nowhere.
func TestLocationCallsNeedTheCallersCredentials(t *testing.T) {
	pt := startRegion(t, "europe-west1", table.TierProvisioned)
	authn, err := auth.New(auth.ModeKubernetes, refuseAll{})
	if err != nil {
		t.Fatal(err)
	}
	r := startRouterWith(t, func(o *server.Options) { o.Auth = authn }, poolOf(generous(), region(pt, 0)))
	resp, body := r.post("/v1/projects/"+project+"/locations/europe-west1/batchPredictionJobs", `{}`, nil)
	if _, msg, _ := googleErr(t, body); resp.StatusCode != http.StatusForbidden || !strings.Contains(msg, "--caller-auth=forward") {
		t.Errorf("under kubernetes: %d %s, want 403 naming --caller-auth=forward", resp.StatusCode, body)
	}

	_, _, fr := forwardingRouter(t)
	base := "/v1/projects/" + project + "/locations/europe-west1"
	for _, tc := range []struct{ method, path string }{
		{http.MethodGet, base + "/batchPredictionJobs/.."},
		{http.MethodGet, base + "/batchPredictionJobs/"},
		{http.MethodGet, base + "/./batchPredictionJobs"},
		{http.MethodPut, base + "/batchPredictionJobs/1"},
	} {
		resp, body := fr.do(tc.method, tc.path, nil, http.Header{"Authorization": {"Bearer " + callerTok}})
		if resp.StatusCode != http.StatusNotFound || bytes.Contains(body, []byte("does not exist")) {
			t.Errorf("%s %s: %d %s, want the router's 404", tc.method, tc.path, resp.StatusCode, body)
		}
	}
	if n := pt.Calls(); n != 0 {
		t.Errorf("the region got %d calls, want none", n)
	}
}

// TestPublisherModelsAreRead: genai's Models.Get on Vertex AI reads
// /{version}/publishers/google/models/M, which names no project and no
// location; the router forwards it, with the caller's own token, to the
// first region of the model's pool (its PT, as the router orders them), and
// the region's answer comes back.
// Under kubernetes it is refused as the other calls it does not route are.
func TestPublisherModelsAreRead(t *testing.T) {
	pt, shared, r := forwardingRouter(t)
	for _, version := range []string{"v1", "v1beta1"} {
		m, err := r.client(version).Models.Get(context.Background(), model, nil)
		if err != nil {
			t.Fatalf("%s: %v", version, err)
		}
		if m.Name != "publishers/google/models/"+model || m.Version != "001" {
			t.Errorf("%s: got %+v", version, m)
		}
		got := pt.Last() // the pool's first region, as the router orders them
		if got.Path != "/"+version+"/publishers/google/models/"+model || len(got.Auth) != 1 || got.Auth[0] != "Bearer "+callerTok {
			t.Errorf("%s: the region got %s with Authorization %q", version, got.Path, got.Auth)
		}
	}
	if n := shared.Calls(); n != 0 {
		t.Errorf("the pool's other region got %d calls", n)
	}
	resp, body := r.do(http.MethodGet, "/v1/publishers/google/models/..", nil, http.Header{"Authorization": {"Bearer " + callerTok}})
	if resp.StatusCode != http.StatusNotFound || pt.Calls() != 2 {
		t.Errorf("a dot segment: %d %s, %d calls; want the router's 404 and no call", resp.StatusCode, body, pt.Calls())
	}

	authn, err := auth.New(auth.ModeKubernetes, refuseAll{})
	if err != nil {
		t.Fatal(err)
	}
	rk := startRouterWith(t, func(o *server.Options) { o.Auth = authn }, poolOf(generous(), region(pt, 0)))
	resp, body = rk.do(http.MethodGet, "/v1/publishers/google/models/"+model, nil, nil)
	if _, msg, _ := googleErr(t, body); resp.StatusCode != http.StatusForbidden || !strings.Contains(msg, "--caller-auth=forward") {
		t.Errorf("under kubernetes: %d %s, want 403 saying why", resp.StatusCode, body)
	}
}
