package server_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/aiplatform/apiv1/aiplatformpb"
	"google.golang.org/genai"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/regionwarden/regionwarden/router/auth"
	"github.com/regionwarden/regionwarden/router/server"
	"github.com/regionwarden/regionwarden/router/table"
	"github.com/regionwarden/regionwarden/router/upstream"
)

// TestCachesAreManagedWhereTheyLive: through the genai SDK pointed at the
// router, with the caller's own credentials, a cached content is created,
// read, listed, updated and deleted in the location the client names, at
// the endpoint the pool names for it: the caller's bytes and token go on
// unchanged and Google's answers come back as they are, a missing cache's
// 404 included; a call that names the cache is served there; the pool's
// other region sees none of it. A location where the pool has no region is
// refused naming it.
func TestCachesAreManagedWhereTheyLive(t *testing.T) {
	pt, shared, r := forwardingRouter(t)
	ctx := context.Background()

	for _, version := range []string{"", "v1"} {
		c := r.client(version)
		cache, err := c.Caches.Create(ctx, model, &genai.CreateCachedContentConfig{
			Contents: genai.Text("A long book."), TTL: time.Hour, DisplayName: "book " + version,
		})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(cache.Name, "projects/"+project+"/locations/europe-west1/cachedContents/") || cache.DisplayName != "book "+version {
			t.Fatalf("version %q: created %+v, want a cache of europe-west1 named as asked", version, cache)
		}
		created := pt.Last()
		if !bytes.Contains(created.Body, []byte("A long book.")) || !bytes.Contains(created.Body, []byte(`"ttl":"3600s"`)) {
			t.Errorf("version %q: the region got %s, want the caller's body", version, created.Body)
		}
		if got := created.Auth; len(got) != 1 || got[0] != "Bearer "+callerTok {
			t.Errorf("version %q: the region got Authorization %q, want the caller's own token", version, got)
		}

		got, err := c.Caches.Get(ctx, cache.Name, nil)
		if err != nil || got.Name != cache.Name {
			t.Errorf("version %q: get %+v, %v", version, got, err)
		}
		if _, err := c.Caches.Update(ctx, cache.Name, &genai.UpdateCachedContentConfig{TTL: 2 * time.Hour}); err != nil {
			t.Errorf("version %q: update: %v", version, err)
		}
		if last := pt.Last(); last.Header.Get("X-Http-Method") != http.MethodPatch || !bytes.Contains(last.Body, []byte(`"ttl":"7200s"`)) {
			t.Errorf("version %q: the region got %s %s, want the update", version, last.Header.Get("X-Http-Method"), last.Body)
		}
		var names []string
		for cc, err := range c.Caches.All(ctx) {
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, cc.Name)
		}
		if len(names) != 1 || names[0] != cache.Name {
			t.Errorf("version %q: listed %q, want only %s", version, names, cache.Name)
		}

		resp, err := c.Models.GenerateContent(ctx, model, genai.Text("From the cache."), &genai.GenerateContentConfig{CachedContent: cache.Name})
		if err != nil || resp.Text() != "europe-west1 answers: From the cache." {
			t.Errorf("version %q: a call that names the cache: %v, want the cache's region's answer", version, err)
		}

		if _, err := c.Caches.Delete(ctx, cache.Name, nil); err != nil {
			t.Errorf("version %q: delete: %v", version, err)
		}
		_, err = c.Caches.Get(ctx, cache.Name, nil)
		var apiErr genai.APIError
		if !errors.As(err, &apiErr) || apiErr.Code != http.StatusNotFound || !strings.Contains(apiErr.Message, "CachedContent not found") {
			t.Errorf("version %q: a deleted cache: %v, want the region's 404", version, err)
		}
	}
	if n := shared.Calls(); n != 0 {
		t.Errorf("the other region got %d calls, want none", n)
	}

	far, err := genai.NewClient(ctx, &genai.ClientConfig{
		Backend: genai.BackendVertexAI, Project: project, Location: "asia-northeast1",
		Credentials: r.client("").ClientConfig().Credentials,
		HTTPOptions: genai.HTTPOptions{BaseURL: r.http.URL},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = far.Caches.Create(ctx, model, &genai.CreateCachedContentConfig{Contents: genai.Text("Elsewhere.")})
	var apiErr genai.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != http.StatusNotFound || !strings.Contains(apiErr.Message, `"asia-northeast1"`) {
		t.Errorf("a location where the pool has no region: %v, want 404 naming it", err)
	}
}

// TestCachesNeedTheCallersCredentials: a router that calls Google as
// itself (--caller-auth=kubernetes) manages no cached content, and says
// why; a router of the callers' own credentials refuses a call without
// one, before anything reaches the region; over REST and gRPC alike.
func TestCachesNeedTheCallersCredentials(t *testing.T) {
	for _, tc := range []struct {
		mode   auth.Mode
		status int
		code   codes.Code
		says   string
	}{
		{auth.ModeKubernetes, http.StatusForbidden, codes.PermissionDenied, "--caller-auth=forward"},
		{auth.ModeForward, http.StatusUnauthorized, codes.Unauthenticated, "credential"},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			pt := startRegion(t, "europe-west1", table.TierProvisioned)
			authn, err := auth.New(tc.mode, refuseAll{})
			if err != nil {
				t.Fatal(err)
			}
			r := startRouterWith(t, func(o *server.Options) { o.Auth = authn }, poolOf(generous(), region(pt, 0)))
			path := "/v1/projects/" + project + "/locations/europe-west1/cachedContents"
			resp, body := r.post(path, `{"model":"projects/`+project+`/locations/europe-west1/publishers/google/models/`+model+`"}`, nil)
			if _, msg, _ := googleErr(t, body); resp.StatusCode != tc.status || !strings.Contains(msg, tc.says) {
				t.Errorf("status %d %s, want %d saying %q", resp.StatusCode, body, tc.status, tc.says)
			}
			_, err = r.serveGRPC().caches.GetCachedContent(context.Background(), &aiplatformpb.GetCachedContentRequest{
				Name: "projects/" + project + "/locations/europe-west1/cachedContents/1",
			})
			if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("over gRPC: %v, want %v saying %q", err, tc.code, tc.says)
			}
			if n := pt.Calls(); n != 0 {
				t.Errorf("the region got %d calls, want none", n)
			}
			if tc.mode == auth.ModeForward {
				if n := counter(t, r.metrics, "regionwarden_router_caller_refusals_total", map[string]string{"reason": "unauthenticated"}); n != 2 {
					t.Errorf("caller_refusals_total{reason=unauthenticated} = %v, want 2: the REST call and the gRPC one", n)
				}
			}
		})
	}
}

// refuseAll is a token reviewer that knows no one.
type refuseAll struct{}

func (refuseAll) Review(context.Context, string) (auth.Identity, error) {
	return auth.Identity{}, errors.New("no one is known here")
}

// TestCachesOverGRPC: the aiplatform client's GenAiCacheService through the
// router's gRPC surface creates, reads, updates, lists and deletes a
// cached content in the location its request names, at the endpoint the
// pool names for it, with the caller's token and the request's routing
// header; the region's NOT_FOUND comes back as it gave it, and a location
// where the pool has no region is refused naming it.
func TestCachesOverGRPC(t *testing.T) {
	pt, shared, r := forwardingRouter(t)
	g := r.serveGRPC()
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+callerTok)
	parent := "projects/" + project + "/locations/europe-west1"

	cache, err := g.caches.CreateCachedContent(ctx, &aiplatformpb.CreateCachedContentRequest{
		Parent: parent,
		CachedContent: &aiplatformpb.CachedContent{
			DisplayName: "book", Model: parent + "/publishers/google/models/" + model,
			Expiration: &aiplatformpb.CachedContent_Ttl{Ttl: durationpb.New(time.Hour)},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(cache.GetName(), parent+"/cachedContents/") || cache.GetDisplayName() != "book" {
		t.Fatalf("created %v, want a cache of europe-west1 named as asked", cache)
	}
	created := pt.Last()
	if got := created.Auth; len(got) != 1 || got[0] != "Bearer "+callerTok {
		t.Errorf("the region got Authorization %q, want the caller's own token", got)
	}
	if got := created.Params; len(got) != 1 || got[0] != "parent="+url.QueryEscape(parent) {
		t.Errorf("the region got x-goog-request-params %q, want the request's parent", got)
	}

	if got, err := g.caches.GetCachedContent(ctx, &aiplatformpb.GetCachedContentRequest{Name: cache.GetName()}); err != nil || got.GetDisplayName() != "book" {
		t.Errorf("get: %v, %v", got, err)
	}
	updated, err := g.caches.UpdateCachedContent(ctx, &aiplatformpb.UpdateCachedContentRequest{
		CachedContent: &aiplatformpb.CachedContent{Name: cache.GetName(), DisplayName: "book, second edition"},
		UpdateMask:    &fieldmaskpb.FieldMask{Paths: []string{"display_name"}},
	})
	if err != nil || updated.GetDisplayName() != "book, second edition" {
		t.Errorf("update: %v, %v", updated, err)
	}
	var names []string
	for cc, err := range g.caches.ListCachedContents(ctx, &aiplatformpb.ListCachedContentsRequest{Parent: parent}).All() {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, cc.GetName())
	}
	if len(names) != 1 || names[0] != cache.GetName() {
		t.Errorf("listed %q, want only %s", names, cache.GetName())
	}
	if err := g.caches.DeleteCachedContent(ctx, &aiplatformpb.DeleteCachedContentRequest{Name: cache.GetName()}); err != nil {
		t.Errorf("delete: %v", err)
	}
	if _, err := g.caches.GetCachedContent(ctx, &aiplatformpb.GetCachedContentRequest{Name: cache.GetName()}); status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), "CachedContent not found") {
		t.Errorf("a deleted cache: %v, want the region's NOT_FOUND", err)
	}
	if n := shared.Calls(); n != 0 {
		t.Errorf("the other region got %d calls, want none", n)
	}

	_, err = g.caches.GetCachedContent(ctx, &aiplatformpb.GetCachedContentRequest{Name: "projects/" + project + "/locations/asia-northeast1/cachedContents/1"})
	if status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), `"asia-northeast1"`) {
		t.Errorf("a location where the pool has no region: %v, want NOT_FOUND naming it", err)
	}
	_, err = g.caches.GetCachedContent(ctx, &aiplatformpb.GetCachedContentRequest{Name: "cachedContents/1"})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("a name that is not a cached content's: %v, want INVALID_ARGUMENT", err)
	}
}

// forwardingRouter is a router of the callers' own credentials
// (--caller-auth=forward) in front of a pool of a shared region and a
// provisioned one.
func forwardingRouter(t *testing.T) (pt, shared *fakeRegion, r *router) {
	t.Helper()
	pt = startRegion(t, "europe-west1", table.TierProvisioned)
	shared = startRegion(t, "us-central1", table.TierShared)
	authn, err := auth.New(auth.ModeForward, nil)
	if err != nil {
		t.Fatal(err)
	}
	r = startRouterWith(t, func(o *server.Options) {
		o.Auth = authn
		clients := upstream.New(upstream.Options{Insecure: true, Authorizer: auth.Forward{}})
		t.Cleanup(func() { _ = clients.Close() })
		o.Upstream = clients
	}, poolOf(generous(), region(shared, 0), region(pt, 0)))
	return pt, shared, r
}

// TestCachesPathsNameOneResource: a cachedContents path with a dot segment,
// which Google would resolve to another resource than a cache, or with an
// empty one, goes nowhere: the router answers 404 and the region sees
// nothing.
func TestCachesPathsNameOneResource(t *testing.T) {
	pt, shared, r := forwardingRouter(t)
	base := "/v1/projects/" + project + "/locations/europe-west1"
	for _, path := range []string{
		base + "/cachedContents/..",
		base + "/cachedContents/.",
		base + "/cachedContents/",
		"/v1/projects/" + project + "/locations/../cachedContents",
		"/v1/projects/./locations/europe-west1/cachedContents",
	} {
		resp, body := r.do(http.MethodGet, path, nil, http.Header{"Authorization": {"Bearer " + callerTok}})
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d %s, want 404", path, resp.StatusCode, body)
		}
	}
	if n := pt.Calls() + shared.Calls(); n != 0 {
		t.Errorf("the regions got %d calls, want none", n)
	}
}
