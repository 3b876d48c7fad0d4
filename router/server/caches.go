package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/regionwarden/regionwarden/router/auth"
	"github.com/regionwarden/regionwarden/router/table"
	"github.com/regionwarden/regionwarden/router/upstream"
)

// Context caches are managed where they live. A cached content is a
// resource of one location (projects/P/locations/L/cachedContents/ID):
// created there, served there, listed, updated and deleted there. An
// application that points its SDK at the router creates, reads, lists,
// updates and deletes them through it too (genai's client.Caches), so the
// router forwards those calls, their bytes unchanged, to location L's
// endpoint as its tables name it (any pool of project P with a region L),
// outside routing: no policy, no retry, no other location, the answer
// whatever its status relayed as it came.
//
// Only with the caller's own credentials (--caller-auth=forward), which
// Google checks against the caller's IAM as it would without the router.
// Under --caller-auth=kubernetes the router calls Google as itself, and
// forwarding would let anyone its pools admit read, change or delete every
// cache of the project (a cache's ID is all that names it): such calls are
// refused, naming why. Nothing then stops an application from managing its
// caches with its own Google identity, and its calls that name them are
// routed to their location (cache.go).

// methodCaches is the method label of the cachedContents calls.
const methodCaches = "cachedContents"

// cachesRoute is what a cachedContents path names.
type cachesRoute struct {
	version, project, location string
	id                         string // "" for the collection
}

// parseCachesRoute reads /{version}/projects/{p}/locations/{l}/cachedContents
// and .../cachedContents/{id}; false when the path is neither.
func parseCachesRoute(path string) (cachesRoute, bool) {
	seg := strings.Split(path, "/")
	if (len(seg) != 7 && len(seg) != 8) || seg[0] != "" || seg[2] != "projects" || seg[4] != "locations" || seg[6] != "cachedContents" {
		return cachesRoute{}, false
	}
	cr := cachesRoute{version: seg[1], project: seg[3], location: seg[5]}
	if len(seg) == 8 {
		if cr.id = seg[7]; cr.id == "" {
			return cachesRoute{}, false
		}
	}
	return cr, cr.version != "" && cr.project != "" && cr.location != ""
}

// path is the route's path, as the location's endpoint is called.
func (cr cachesRoute) path() string {
	p := "/" + cr.version + "/projects/" + cr.project + "/locations/" + cr.location + "/cachedContents"
	if cr.id != "" {
		p += "/" + cr.id
	}
	return p
}

// allows reports whether the route serves method: create and list on the
// collection, get, update and delete on a cached content.
func (cr cachesRoute) allows(method string) bool {
	if cr.id == "" {
		return method == http.MethodPost || method == http.MethodGet
	}
	return method == http.MethodGet || method == http.MethodPatch || method == http.MethodDelete
}

// locationPool is the pool of project whose region location names the
// endpoint cachedContents calls go to: the first by label of those that
// have one; nil when none has.
func (s *Server) locationPool(project, location string) (*poolEntry, *table.Region) {
	st := s.state.Load()
	if st == nil {
		return nil, nil
	}
	var found []*poolEntry
	for _, e := range st.pools {
		if e.table.Project == project && e.hasRegion(location) {
			found = append(found, e)
		}
	}
	if len(found) == 0 {
		return nil, nil
	}
	sort.Slice(found, func(i, j int) bool { return found[i].label < found[j].label })
	for i := range found[0].table.Regions {
		if r := &found[0].table.Regions[i]; r.Name == location {
			return found[0], r
		}
	}
	return nil, nil
}

// serveCaches forwards one cachedContents call to its location.
func (x *exchange) serveCaches(cr cachesRoute) {
	r := x.r
	x.method = methodCaches
	switch {
	case cr.version != "v1" && cr.version != "v1beta1":
		x.fail(http.StatusNotFound, codes.NotFound, fmt.Sprintf("API version %q is not served; use v1 or v1beta1", cr.version), 0)
		return
	case !cr.allows(r.Method):
		x.fail(http.StatusNotFound, codes.NotFound, fmt.Sprintf("The requested URL %s was not found on this server for %s.", r.URL.Path, r.Method), 0)
		return
	case x.s.auth != nil && x.s.auth.Mode() == auth.ModeKubernetes:
		x.fail(http.StatusForbidden, codes.PermissionDenied,
			"cached contents are managed through the router only with the caller's own Google credentials (--caller-auth=forward): "+
				"this router calls Google as itself, which would let every caller of its pools manage every cache of the project; "+
				"manage them with your own Google identity, and the router routes the calls that name them to their location", 0)
		return
	}
	pool, region := x.s.locationPool(cr.project, cr.location)
	if pool == nil {
		x.fail(http.StatusNotFound, codes.NotFound, fmt.Sprintf(
			"no routing pool of project %q has a region in location %q: the router manages a location's cached contents at the endpoint its pools name for it",
			cr.project, cr.location), 0)
		return
	}
	x.target.Region.Name = region.Name // for the request's log line
	authorization := r.Header.Get("Authorization")
	if x.s.auth != nil {
		if _, err := x.s.auth.Authenticate(r.Context(), authorization, &pool.table); err != nil {
			var refused *auth.Error
			if !errors.As(err, &refused) {
				refused = &auth.Error{Status: http.StatusInternalServerError, Code: codes.Internal, Message: err.Error()}
			}
			x.fail(refused.Status, refused.Code, refused.Message, 0)
			return
		}
	}
	if r.ContentLength != 0 && !x.readBody() {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), x.s.timeout)
	defer cancel()
	resp, err := x.s.up.Forward(ctx, region.Endpoint, authorization, &upstream.Passthrough{
		Method: r.Method, Path: cr.path(), RawQuery: r.URL.RawQuery, Header: r.Header, Body: x.req.Body,
	})
	if err != nil {
		code := upstream.Code(err)
		x.fail(upstream.HTTPStatus(code), code, status.Convert(err).Message(), 0)
		return
	}
	defer func() { _ = resp.Body.Close() }()
	upstream.AnswerHeader(x.w.Header(), resp.Header)
	x.status = resp.StatusCode
	x.extendWrite()
	x.w.WriteHeader(resp.StatusCode)
	if _, err := io.Copy(x.w, resp.Body); err != nil {
		x.abort = true
	}
}
