package server

import (
	"fmt"
	"net/http"
	"strings"

	"google.golang.org/grpc/codes"
)

// The rest of a location. An application that points its SDK at the router
// makes other calls of Vertex AI beside the ones the router routes: batch
// prediction jobs (genai's client.Batches), the long-running operations of
// those and of Veo's predictLongRunning, a tuned model's endpoint, tuning
// jobs. Each names the one location whose
// resource it is (projects/P/locations/L/...), which alone serves it. So
// the router forwards them, as it came (method, path, query, body), to
// location L's endpoint as its tables name it (any pool of project P with
// a region L), outside routing, as it forwards the cached contents
// (caches.go): "point the SDK at the router and change nothing" holds for
// the whole API, not only for the calls the router routes. And, as for
// those, only with the caller's own credentials (--caller-auth=forward),
// which Google checks against the caller's IAM as it would without the
// router: a router calling Google as itself would let every caller of its
// pools act on every resource of the project in its name, so it refuses
// them, naming why.

// methodPassthrough is the method label of the calls forwarded so.
const methodPassthrough = "passthrough"

// otherCalls is the location's calls the router does not route.
var otherCalls = &locationCalls{
	what:  "calls of a location's resources that the router does not route (batch jobs, operations, endpoints)",
	owned: "act on every resource of the project in the router's name", instead: "make them with your own Google identity",
}

// locationPath reads /{version}/projects/{p}/locations/{l}/{resource...};
// false when the path is not one, or has an empty or a dot segment (the
// path goes on to Google as it is, where "." or ".." would name another
// resource).
func locationPath(path string) (version, project, location string, ok bool) {
	seg := strings.Split(path, "/")
	if len(seg) < 7 || seg[0] != "" || seg[2] != "projects" || seg[4] != "locations" || !plainSegments(seg[1:]) {
		return "", "", "", false
	}
	return seg[1], seg[3], seg[5], true
}

// plainSegments reports whether a path's segments each name one thing: none
// empty, none a dot segment (the path goes on to Google as it is, where
// "." or ".." would name another resource).
func plainSegments(seg []string) bool {
	for _, v := range seg {
		if v == "" || v == "." || v == ".." {
			return false
		}
	}
	return true
}

// serveLocation forwards a call of a location's resource that the router
// does not route to the location; false when the path names none.
func (x *exchange) serveLocation() bool {
	version, project, location, ok := locationPath(x.r.URL.Path)
	if !ok {
		return false
	}
	x.method = methodPassthrough
	switch x.r.Method {
	case http.MethodGet, http.MethodPost, http.MethodPatch, http.MethodDelete:
	default:
		x.fail(http.StatusNotFound, codes.NotFound, fmt.Sprintf("The requested URL %s was not found on this server for %s.", x.r.URL.Path, x.r.Method), 0)
		return true
	}
	if !x.servedVersion(version) {
		return true
	}
	x.forward(otherCalls, project, location, x.r.URL.Path)
	return true
}

// publisherCalls is the reads of a publisher model's own resource.
var publisherCalls = &locationCalls{
	what:  "reads of a publisher model (genai's Models.Get)",
	owned: "read Vertex AI's resources in the router's name", instead: "read it with your own Google identity",
}

// publisherModelPath reads /{version}/publishers/{publisher}/models/{model},
// the path of a publisher model's own resource, which names no project and
// no location (genai's Models.Get on Vertex AI reads it so); false when
// the path is not one.
func publisherModelPath(path string) (version, publisher, model string, ok bool) {
	seg := strings.Split(path, "/")
	if len(seg) != 6 || seg[0] != "" || seg[2] != "publishers" || seg[4] != "models" || !plainSegments(seg[1:]) ||
		strings.Contains(seg[5], ":") {
		return "", "", "", false
	}
	return seg[1], seg[3], seg[5], true
}

// servePublisherModel forwards a read of a publisher model's resource (GET
// /{version}/publishers/{publisher}/models/{model}), which every location's
// endpoint answers alike, to the first region of the pool of that model
// (of the first project by name, when several serve it), or of the first
// pool when none does, as the rest of a location is forwarded (forward):
// with the caller's own credentials only. false when the path is not one.
func (x *exchange) servePublisherModel() bool {
	version, publisher, model, ok := publisherModelPath(x.r.URL.Path)
	if !ok || x.r.Method != http.MethodGet {
		return false
	}
	x.method = methodPassthrough
	if !x.servedVersion(version) {
		return true
	}
	// The model's pools before all others, then by label.
	serves := func(e *poolEntry) bool { return e.table.Publisher == publisher && e.table.Model == model }
	before := func(a, b *poolEntry) bool {
		if serves(a) != serves(b) {
			return serves(a)
		}
		return a.label < b.label
	}
	var pick *poolEntry
	if st := x.s.state.Load(); st != nil {
		for _, e := range st.pools {
			if len(e.table.Regions) > 0 && (pick == nil || before(e, pick)) {
				pick = e
			}
		}
	}
	if pick == nil {
		x.fail(http.StatusNotFound, codes.NotFound, "the router has no routing pool, so no endpoint to read publisher models from", 0)
		return true
	}
	x.forward(publisherCalls, pick.table.Project, pick.table.Regions[0].Name, x.r.URL.Path)
	return true
}
