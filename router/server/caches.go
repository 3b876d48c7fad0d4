package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"cloud.google.com/go/aiplatform/apiv1/aiplatformpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/regionwarden/regionwarden/router/auth"
	"github.com/regionwarden/regionwarden/router/table"
	"github.com/regionwarden/regionwarden/router/upstream"
)

// Context caches are managed where they live. A cached content is a
// resource of one location (projects/P/locations/L/cachedContents/ID):
// created there, served there, listed, updated and deleted there. An
// application that points its SDK at the router creates, reads, lists,
// updates and deletes them through it too (genai's client.Caches over
// REST, the aiplatform clients' GenAiCacheService over gRPC), so the
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
	// Each name is one segment, neither empty nor a dot segment: the path
	// goes on to Google as it is, where "." or ".." would name another
	// resource.
	for _, v := range append([]string{seg[1], seg[3], seg[5]}, seg[7:]...) {
		if v == "" || v == "." || v == ".." {
			return cachesRoute{}, false
		}
	}
	cr := cachesRoute{version: seg[1], project: seg[3], location: seg[5]}
	if len(seg) == 8 {
		cr.id = seg[7]
	}
	return cr, true
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
func (s *Server) locationPool(project, location string) (pool *poolEntry, region *table.Region) {
	st := s.state.Load()
	if st == nil {
		return nil, nil
	}
	for _, e := range st.pools {
		if e.table.Project != project || (pool != nil && e.label >= pool.label) {
			continue
		}
		if r := e.region(location); r != nil {
			pool, region = e, r
		}
	}
	return pool, region
}

// locationCalls is a kind of call the router forwards to a location as it
// came, as its refusals name it. (Each kind's method label is set where its
// calls are read: serveCaches, serveLocation, cacheCall.)
type locationCalls struct {
	// what names the calls, refused (as the subject of "are forwarded
	// ..."), and owned names what a router calling as itself would open to
	// every caller of its pools.
	what, owned string
	// instead says what a caller refused under kubernetes may do.
	instead string
}

// cachesCalls is the cachedContents calls.
var cachesCalls = &locationCalls{
	what: "cached contents", owned: "manage every cache of the project",
	instead: "manage them with your own Google identity, and the router routes the calls that name them to their location",
}

// locationEndpoint is the endpoint where the calls of kind k to project's
// location go, for a caller who presented authorization; or why not: the
// router calls Google as itself (--caller-auth=kubernetes), no pool of the
// project has a region there, or the caller is refused.
func (s *Server) locationEndpoint(ctx context.Context, k *locationCalls, project, location, authorization string) (string, *auth.Error) {
	if s.auth != nil && s.auth.Mode() == auth.ModeKubernetes {
		return "", &auth.Error{Status: http.StatusForbidden, Code: codes.PermissionDenied, Message: k.what + " are forwarded through the router only with the caller's own Google credentials (--caller-auth=forward): " +
			"this router calls Google as itself, which would let every caller of its pools " + k.owned + "; " + k.instead}
	}
	pool, region := s.locationPool(project, location)
	if pool == nil {
		return "", &auth.Error{Status: http.StatusNotFound, Code: codes.NotFound, Message: fmt.Sprintf(
			"no routing pool of project %q has a region in location %q: the router forwards %s to the endpoint its pools name for the location",
			project, location, k.what)}
	}
	if s.auth != nil {
		if _, refused := s.authenticate(ctx, authorization, pool); refused != nil {
			return "", refused
		}
	}
	return region.Endpoint, nil
}

// serveCaches forwards one cachedContents call to its location.
func (x *exchange) serveCaches(cr cachesRoute) {
	r := x.r
	x.method = methodCaches
	switch {
	case !x.servedVersion(cr.version):
		return
	case !cr.allows(r.Method):
		x.fail(http.StatusNotFound, codes.NotFound, fmt.Sprintf("The requested URL %s was not found on this server for %s.", r.URL.Path, r.Method), 0)
		return
	}
	x.forward(cachesCalls, cr.project, cr.location, cr.path())
}

// forward sends the call of kind k, as it came, to the endpoint of
// project's location at path, outside routing (no policy, no retry, no
// other location), within the request timeout, and relays the answer
// whatever its status, each piece as it arrives (a stream's events are
// not held back).
func (x *exchange) forward(k *locationCalls, project, location, path string) {
	r := x.r
	authorization := r.Header.Get("Authorization")
	endpoint, refused := x.s.locationEndpoint(r.Context(), k, project, location, authorization)
	if refused != nil {
		x.fail(refused.Status, refused.Code, refused.Message, 0)
		return
	}
	x.target.Region.Name = location // for the request's log line
	if r.ContentLength != 0 && !x.readBody() {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), x.s.timeout)
	defer cancel()
	resp, err := x.s.up.Forward(ctx, endpoint, authorization, &upstream.Passthrough{
		Method: r.Method, Path: path, RawQuery: r.URL.RawQuery, Header: r.Header, Body: x.req.Body,
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
	bp := relayBuffers.Get().(*[]byte)
	defer relayBuffers.Put(bp)
	for {
		n, err := resp.Body.Read(*bp)
		if n > 0 && x.write((*bp)[:n], true) != nil {
			x.abort = true
			return
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				x.abort = true // the answer broke off: so must the caller's
			}
			return
		}
	}
}

// cacheService is Vertex AI's GenAiCacheService on the router's gRPC
// surface, for the aiplatform clients: each call goes to the location its
// resource names, as the REST calls do (serveCaches).
type cacheService struct {
	aiplatformpb.UnimplementedGenAiCacheServiceServer
	s *Server
}

// Each call names its location in one field, which the routing header
// names too, as the aiplatform clients send it.

func (c *cacheService) CreateCachedContent(ctx context.Context, req *aiplatformpb.CreateCachedContentRequest) (*aiplatformpb.CachedContent, error) {
	return cacheCall(c.s, ctx, req, req.GetParent(), "parent", aiplatformpb.GenAiCacheServiceClient.CreateCachedContent)
}

func (c *cacheService) GetCachedContent(ctx context.Context, req *aiplatformpb.GetCachedContentRequest) (*aiplatformpb.CachedContent, error) {
	return cacheCall(c.s, ctx, req, req.GetName(), "name", aiplatformpb.GenAiCacheServiceClient.GetCachedContent)
}

func (c *cacheService) UpdateCachedContent(ctx context.Context, req *aiplatformpb.UpdateCachedContentRequest) (*aiplatformpb.CachedContent, error) {
	return cacheCall(c.s, ctx, req, req.GetCachedContent().GetName(), "cached_content.name", aiplatformpb.GenAiCacheServiceClient.UpdateCachedContent)
}

func (c *cacheService) DeleteCachedContent(ctx context.Context, req *aiplatformpb.DeleteCachedContentRequest) (*emptypb.Empty, error) {
	return cacheCall(c.s, ctx, req, req.GetName(), "name", aiplatformpb.GenAiCacheServiceClient.DeleteCachedContent)
}

func (c *cacheService) ListCachedContents(ctx context.Context, req *aiplatformpb.ListCachedContentsRequest) (*aiplatformpb.ListCachedContentsResponse, error) {
	return cacheCall(c.s, ctx, req, req.GetParent(), "parent", aiplatformpb.GenAiCacheServiceClient.ListCachedContents)
}

// cacheCall makes one GenAiCacheService call whose request req names
// resource (projects/P/locations/L, or a cached content of it) in its field
// param: at the endpoint of P's location L, with the caller's metadata but
// for what stays with the router (forwarded), within the request timeout,
// its request's bytes held in the router's budget until it ends. The
// region's answer or status comes back as it gave it.
func cacheCall[Q proto.Message, R any](s *Server, ctx context.Context, req Q, resource, param string,
	call func(aiplatformpb.GenAiCacheServiceClient, context.Context, Q, ...grpc.CallOption) (R, error),
) (_ R, err error) {
	start := time.Now()
	defer func() { s.metrics.Request("", methodCaches, upstream.HTTPStatus(status.Code(err)), time.Since(start)) }()
	var zero R
	project, location, ok := cacheLocation(resource)
	if !ok {
		return zero, status.Errorf(codes.InvalidArgument, "%s %q is not projects/{project}/locations/{location} or a cached content of it", param, resource)
	}
	md, _ := metadata.FromIncomingContext(ctx)
	authorization := first(md, "authorization")
	endpoint, refused := s.locationEndpoint(ctx, cachesCalls, project, location, authorization)
	if refused != nil {
		return zero, status.Error(refused.Code, refused.Message)
	}
	held, err := s.holdMessage(req)
	if err != nil {
		return zero, err
	}
	defer s.bodies.give(held)
	ctx, cancel := context.WithTimeout(metadata.NewOutgoingContext(ctx, forwarded(md)), s.timeout)
	defer cancel()
	svc, cctx, done, err := s.up.Caches(ctx, endpoint, authorization, param+"="+url.QueryEscape(resource))
	if err != nil {
		return zero, status.Error(upstream.Code(err), err.Error())
	}
	defer done()
	return call(svc, cctx, req)
}

// cacheLocation reads the project and location of
// projects/{p}/locations/{l} and of projects/{p}/locations/{l}/cachedContents/{id}.
func cacheLocation(resource string) (project, location string, ok bool) {
	p := strings.Split(resource, "/")
	if (len(p) != 4 && len(p) != 6) || p[0] != "projects" || p[1] == "" || p[2] != "locations" || p[3] == "" {
		return "", "", false
	}
	if len(p) == 6 && (p[4] != "cachedContents" || p[5] == "") {
		return "", "", false
	}
	return p[1], p[3], true
}
