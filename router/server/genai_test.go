package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/genai"

	"github.com/regionwarden/regionwarden/router/table"
)

// TestGenaiSDKThroughRouter calls the router with the official genai SDK, on
// both API versions, and checks that answers arrive intact, that the region
// saw its own model name and request type, and that the caller's token never
// reached it.
func TestGenaiSDKThroughRouter(t *testing.T) {
	pt, shared, r := ptAndShared(t)
	want := "projects/" + project + "/locations/europe-west1/publishers/google/models/" + model

	for _, version := range []string{"", "v1"} { // "": the SDK's default, v1beta1
		t.Run("version="+version, func(t *testing.T) {
			c := r.client(version)
			text, err := r.generate(c, "Which regions hold capacity?")
			if err != nil {
				t.Fatal(err)
			}
			if text != "europe-west1 answers: Which regions hold capacity?" {
				t.Errorf("text %q", text)
			}

			var got strings.Builder
			var last *genai.GenerateContentResponse
			for resp, err := range c.Models.GenerateContentStream(context.Background(), model, genai.Text("Stream it."), nil) {
				if err != nil {
					t.Fatal(err)
				}
				got.WriteString(resp.Text())
				last = resp
			}
			if got.String() != "[europe-west1 chunk 0][europe-west1 chunk 1][europe-west1 chunk 2]" {
				t.Errorf("streamed %q", got.String())
			}
			if last == nil || last.UsageMetadata == nil || last.UsageMetadata.TotalTokenCount != 12 ||
				last.UsageMetadata.TrafficType != genai.TrafficTypeProvisionedThroughput {
				t.Errorf("last chunk's usage %+v", last)
			}

			ct, err := c.Models.CountTokens(context.Background(), model, genai.Text("count me"), nil)
			if err != nil {
				t.Fatal(err)
			}
			if ct.TotalTokens != 42 {
				t.Errorf("countTokens %+v", ct)
			}
		})
	}

	calls := pt.saw()
	if len(calls) != 6 {
		t.Fatalf("provisioned region saw %d calls, want 6: %+v", len(calls), calls)
	}
	for _, c := range calls {
		if c.model != want {
			t.Errorf("%s: model %q, want %q", c.method, c.model, want)
		}
		if c.requestType != "" {
			t.Errorf("%s: request type %q, want none (provisioned with spillover)", c.method, c.requestType)
		}
		for _, a := range c.auth {
			if strings.Contains(a, callerTok) {
				t.Errorf("%s: the caller's token reached the region: %q", c.method, a)
			}
		}
	}
	if n := shared.calls.Load(); n != 0 {
		t.Errorf("shared region saw %d calls while the provisioned one answered", n)
	}
	if got := counter(t, r.metrics, "regionwarden_router_traffic_type_total", map[string]string{"region": "europe-west1", "traffic_type": "PROVISIONED_THROUGHPUT"}); got != 4 {
		t.Errorf("traffic_type_total PROVISIONED_THROUGHPUT = %v, want 4 (2 unary, 2 streams)", got)
	}
}

// TestSharedRegionIsCalledShared checks the request type a shared region
// gets, and that the location in the path does not choose the region.
func TestSharedRegionIsCalledShared(t *testing.T) {
	shared := startRegion(t, "us-central1", table.TierShared)
	r := startRouter(t, poolOf(generous(), region(shared, 0)))
	text, err := r.generate(r.client("v1"), "hi")
	if err != nil {
		t.Fatal(err)
	}
	if text != "us-central1 answers: hi" {
		t.Errorf("text %q", text)
	}
	s := shared.saw()
	if len(s) != 1 || s[0].requestType != table.RequestTypeShared ||
		s[0].model != "projects/"+project+"/locations/us-central1/publishers/google/models/"+model {
		t.Errorf("region saw %+v", s)
	}
}

// TestStreamAsJSONArray reads a stream without ?alt=sse: one JSON array.
func TestStreamAsJSONArray(t *testing.T) {
	pt, r := onePT(t)
	resp, body := r.post("/v1/projects/"+project+"/locations/us-east4/publishers/google/models/"+model+":streamGenerateContent",
		`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, http.Header{"Authorization": {"Bearer " + callerTok}})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	var chunks []map[string]any
	if err := json.Unmarshal(body, &chunks); err != nil {
		t.Fatalf("not a JSON array: %v: %s", err, body)
	}
	if len(chunks) != streamChunks {
		t.Errorf("%d chunks, want %d: %s", len(chunks), streamChunks, body)
	}
	for _, c := range pt.saw() {
		if len(c.auth) > 0 {
			t.Errorf("authorization metadata reached the region: %q", c.auth)
		}
	}
}
