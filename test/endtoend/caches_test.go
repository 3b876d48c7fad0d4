package endtoend

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/auth"
	"google.golang.org/genai"
)

// TestCachedContentLivesInItsLocation: through the router, the genai SDK
// makes a cached content in europe-west4 (the emulated location keeps it),
// and a call that names it, from a client on the global location whose PT
// takes first attempts, is served: the router sends it where the cache
// lives. The same call sent straight to the global location is refused
// NOT_FOUND, as Google refuses a cache another location holds; after the
// cache is deleted through the router, the call is refused too.
func TestCachedContentLivesInItsLocation(t *testing.T) {
	e := start(t, globalPT)
	ctx := t.Context()
	at := func(base, location string) *genai.Client {
		c, err := genai.NewClient(ctx, &genai.ClientConfig{
			Backend: genai.BackendVertexAI, Project: project, Location: location,
			Credentials: auth.NewCredentials(&auth.CredentialsOptions{TokenProvider: staticToken{}}),
			HTTPOptions: genai.HTTPOptions{BaseURL: base, APIVersion: "v1"},
		})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	cache, err := at(e.http.URL, "europe-west4").Caches.Create(ctx, model, &genai.CreateCachedContentConfig{
		Contents: genai.Text("A long book."), TTL: time.Hour, DisplayName: "book",
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(cache.Name, "projects/"+project+"/locations/europe-west4/cachedContents/") {
		t.Fatalf("created %q, want a cache of europe-west4", cache.Name)
	}
	cached := &genai.GenerateContentConfig{CachedContent: cache.Name}
	if _, err := e.genai("").Models.GenerateContent(ctx, model, genai.Text("From the book."), cached); err != nil {
		t.Errorf("a call that names the cache, through the router: %v", err)
	}

	global := ""
	for _, r := range e.emu.Regions() {
		if r.Name == "global" {
			global = "http://" + r.GRPC
		}
	}
	_, err = at(global, "global").Models.GenerateContent(ctx, model, genai.Text("From the book."), cached)
	var apiErr genai.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != http.StatusNotFound {
		t.Errorf("the call sent straight to global: %v, want 404: the cache lives in europe-west4", err)
	}

	if _, err := at(e.http.URL, "europe-west4").Caches.Delete(ctx, cache.Name, nil); err != nil {
		t.Fatalf("delete: %v", err)
	}
	_, err = e.genai("").Models.GenerateContent(ctx, model, genai.Text("From the book."), cached)
	if !errors.As(err, &apiErr) || apiErr.Code != http.StatusNotFound {
		t.Errorf("a call that names the deleted cache: %v, want 404", err)
	}
}
