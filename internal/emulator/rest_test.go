package emulator_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/aiplatform/apiv1/aiplatformpb"
	"google.golang.org/protobuf/encoding/protojson"
)

const restBody = `{"contents":[{"role":"user","parts":[{"text":"Which regions hold capacity?"}]}],"generationConfig":{"maxOutputTokens":40}}`

func post(t *testing.T, url, requestType string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(restBody))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if requestType != "" {
		req.Header.Set("X-Vertex-AI-LLM-Request-Type", requestType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

type googleError struct {
	Error struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
	} `json:"error"`
}

func TestRESTGenerateContent(t *testing.T) {
	e, _ := startBaseAtOneMinute(t)
	base := "http://" + regionAddr(t, e, "europe-west1").REST
	model := "/projects/demo-project/locations/europe-west1/publishers/google/models/gemini-2.5-flash-lite"

	for _, version := range []string{"v1", "v1beta1"} {
		resp := post(t, base+"/"+version+model+":generateContent", "dedicated")
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d: %s", version, resp.StatusCode, body)
		}
		var out aiplatformpb.GenerateContentResponse
		if err := protojson.Unmarshal(body, &out); err != nil {
			t.Fatalf("%s: body %s: %v", version, body, err)
		}
		u := out.GetUsageMetadata()
		if u.GetTrafficType() != pt || u.GetCandidatesTokenCount() != 40 || out.GetCandidates()[0].GetContent().GetParts()[0].GetText() == "" {
			t.Errorf("%s: answer %s, want a PT answer of 40 output tokens", version, body)
		}
		if !strings.Contains(string(body), `"trafficType":"PROVISIONED_THROUGHPUT"`) {
			t.Errorf("%s: body %s does not spell trafficType as Vertex does", version, body)
		}
	}
}

func TestRESTErrorsAreGoogleJSON(t *testing.T) {
	e, clock := startBaseAtOneMinute(t)
	base := "http://" + regionAddr(t, e, "europe-west1").REST
	model := "/v1/projects/demo-project/locations/europe-west1/publishers/google/models/gemini-2.5-flash-lite"
	tests := []struct {
		name        string
		path        string
		requestType string
		calls       int // the last call's answer is checked
		code        int
		status      string
	}{
		{name: "over the PT with dedicated", path: model + ":generateContent", requestType: "dedicated", calls: 6, code: 429, status: "RESOURCE_EXHAUSTED"},
		{name: "unknown model", path: strings.Replace(model, "gemini-2.5-flash-lite", "gemini-0", 1) + ":generateContent", calls: 1, code: 404, status: "NOT_FOUND"},
		{name: "another region's location", path: strings.Replace(model, "europe-west1", "europe-west4", 1) + ":generateContent", calls: 1, code: 400, status: "INVALID_ARGUMENT"},
		{name: "bad request type", path: model + ":generateContent", requestType: "premium", calls: 1, code: 400, status: "INVALID_ARGUMENT"},
		{name: "unknown method", path: model + ":predictLong", calls: 1, code: 404, status: "NOT_FOUND"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock.Advance(2 * time.Second) // a fresh capacity window
			var resp *http.Response
			for range tt.calls {
				resp = post(t, base+tt.path, tt.requestType)
			}
			var ge googleError
			if err := json.NewDecoder(resp.Body).Decode(&ge); err != nil {
				t.Fatalf("decoding the error body: %v", err)
			}
			if resp.StatusCode != tt.code || ge.Error.Code != tt.code || ge.Error.Status != tt.status || ge.Error.Message == "" {
				t.Errorf("got HTTP %d %+v, want %d %s with a message", resp.StatusCode, ge.Error, tt.code, tt.status)
			}
		})
	}
}

func TestRESTStream(t *testing.T) {
	e, clock := startBaseAtOneMinute(t)
	url := "http://" + regionAddr(t, e, "europe-west4").REST +
		"/v1beta1/projects/demo-project/locations/europe-west4/publishers/google/models/gemini-2.5-flash-lite:streamGenerateContent"

	t.Run("sse", func(t *testing.T) {
		resp := post(t, url+"?alt=sse", "")
		if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
			t.Fatalf("status %d, content type %q", resp.StatusCode, ct)
		}
		var chunks []*aiplatformpb.GenerateContentResponse
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			data, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "data: ")
			if !ok {
				continue
			}
			var m aiplatformpb.GenerateContentResponse
			if err := protojson.Unmarshal([]byte(data), &m); err != nil {
				t.Fatalf("event %q: %v", data, err)
			}
			chunks = append(chunks, &m)
		}
		checkChunks(t, chunks)
	})
	t.Run("json array", func(t *testing.T) {
		resp := post(t, url, "")
		var raw []json.RawMessage
		if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
			t.Fatalf("decoding the array: %v", err)
		}
		var chunks []*aiplatformpb.GenerateContentResponse
		for _, r := range raw {
			var m aiplatformpb.GenerateContentResponse
			if err := protojson.Unmarshal(r, &m); err != nil {
				t.Fatal(err)
			}
			chunks = append(chunks, &m)
		}
		checkChunks(t, chunks)
	})
	t.Run("over capacity", func(t *testing.T) {
		clock.Advance(2 * time.Second)
		var resp *http.Response
		for range 5 {
			resp = post(t, url+"?alt=sse", "")
		}
		var ge googleError
		if err := json.NewDecoder(resp.Body).Decode(&ge); err != nil || resp.StatusCode != 429 || ge.Error.Status != "RESOURCE_EXHAUSTED" {
			t.Errorf("fifth stream in a window of four: HTTP %d %+v (%v), want 429 RESOURCE_EXHAUSTED", resp.StatusCode, ge, err)
		}
	})
}

// checkChunks wants several chunks, each with the traffic type, and the
// output tokens and finish reason on the last.
func checkChunks(t *testing.T, chunks []*aiplatformpb.GenerateContentResponse) {
	t.Helper()
	if len(chunks) < 2 {
		t.Fatalf("%d chunks, want several", len(chunks))
	}
	for i, c := range chunks {
		if c.GetUsageMetadata().GetTrafficType() != onDemand {
			t.Errorf("chunk %d: traffic type %v, want ON_DEMAND", i, c.GetUsageMetadata().GetTrafficType())
		}
	}
	last := chunks[len(chunks)-1]
	if last.GetUsageMetadata().GetCandidatesTokenCount() != 40 || last.GetCandidates()[0].GetFinishReason() != aiplatformpb.Candidate_STOP {
		t.Errorf("last chunk %v: want 40 output tokens and STOP", last)
	}
}

// TestOneAddressServesBothSurfaces: a region's gRPC address also answers
// Vertex REST, so a routing table's one endpoint per region serves a router
// calling either surface.
func TestOneAddressServesBothSurfaces(t *testing.T) {
	sc, e, clock := startBase(t)
	clock.Set(time.Minute)
	addr := regionAddr(t, e, "europe-west1").GRPC
	resp := post(t, "http://"+addr+"/v1/projects/demo-project/locations/europe-west1/publishers/google/models/gemini-2.5-flash-lite:generateContent", "")
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"trafficType":"PROVISIONED_THROUGHPUT"`) {
		t.Fatalf("REST on the gRPC address: %d %s", resp.StatusCode, body)
	}
	if _, err := generate(t, client(t, e, "europe-west1"), sc, "europe-west1", ""); err != nil {
		t.Fatalf("gRPC on the same address: %v", err)
	}
}
