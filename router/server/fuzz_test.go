package server_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzHandler sends the router requests of any method, path, header and
// body. Whatever comes in, the router must answer (never panic), with a
// valid status; any answer but 200 must be Google's error JSON whose code is
// the status; the headers that stay with the router never reach the region.
func FuzzHandler(f *testing.F) {
	pt, r := onePT(f)
	h := r.srv.Handler()
	base := "/v1/projects/" + project + "/locations/us-east4/publishers/google/models/" + model
	valid := `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`
	for _, seed := range []struct{ method, path, hname, hvalue, body string }{
		{"POST", base + ":generateContent", "X-Regionwarden-Priority", "critical", valid},
		{"POST", base + ":streamGenerateContent?alt=sse", "X-Vertex-AI-LLM-Request-Type", "dedicated", valid},
		{"POST", base + ":streamGenerateContent", "Content-Type", "application/json", valid},
		{"POST", strings.Replace(base, "/v1/", "/v1beta1/", 1) + ":countTokens", "Authorization", "Bearer x", valid},
		{"POST", base + ":generateContent", "X-Regionwarden-Priority", "urgent", valid},
		{"POST", base + ":predict", "", "", valid},
		{"POST", base + ":generateContent", "", "", `{"contents": [`},
		{"POST", base + ":generateContent", "", "", ""},
		{"GET", base + ":generateContent", "", "", ""},
		{"POST", "/v1/projects//locations/x/publishers/google/models/m:generateContent", "", "", valid},
		{"POST", "/v2/projects/p/locations/l/publishers/google/models/m:generateContent", "", "", valid},
		{"POST", base + ":generateContent/extra", "", "", valid},
		{"GET", "/metrics", "", "", ""},
		{"GET", "/readyz", "", "", ""},
		{"DELETE", "/", "", "", ""},
	} {
		f.Add(seed.method, seed.path, seed.hname, seed.hvalue, []byte(seed.body))
	}
	f.Fuzz(func(t *testing.T, method, path, hname, hvalue string, body []byte) {
		req := httptest.NewRequest(http.MethodGet, "/", strings.NewReader(string(body)))
		req.Method = method
		if path == "" || path[0] != '/' {
			path = "/" + path
		}
		var err error
		if req.URL, err = req.URL.Parse(path); err != nil || req.URL.Path == "" {
			t.Skip()
		}
		req.RequestURI = path
		req.ContentLength = int64(len(body))
		if hname != "" && !strings.ContainsAny(hname, "\r\n:") {
			req.Header.Set(hname, hvalue)
		}
		before := pt.calls.Load()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)

		code := rec.Code
		if code < 200 || code > 599 {
			t.Fatalf("status %d", code)
		}
		ops := req.URL.Path == "/metrics" || req.URL.Path == "/readyz" || req.URL.Path == "/healthz" || req.URL.Path == "/debug/pools"
		if code != http.StatusOK && !ops {
			var e struct {
				Error struct {
					Code    int    `json:"code"`
					Status  string `json:"status"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error.Code != code || e.Error.Status == "" {
				t.Fatalf("status %d with a body that is not Google's error JSON for it: %q", code, rec.Body.String())
			}
		}
		if pt.calls.Load() != before {
			got := pt.Last().Header
			for _, k := range []string{"X-Regionwarden-Priority", "Authorization"} {
				if v := got.Values(k); len(v) > 0 {
					t.Fatalf("%s reached the region: %q", k, v)
				}
			}
			if v := got.Values("X-Vertex-Ai-Llm-Request-Type"); len(v) > 0 {
				t.Fatalf("a provisioned region with spillover was sent a request type: %q", v)
			}
		}
	})
}
