package server

import (
	"fmt"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/propagation"
	"google.golang.org/grpc/codes"

	"github.com/regionwarden/regionwarden/router/table"
	"github.com/regionwarden/regionwarden/router/upstream"
)

// The OpenAI-compatible Chat Completions API of Vertex AI ("Call Gemini by
// using the OpenAI library"), which applications call with the OpenAI SDKs:
//
//	POST /{v1,v1beta1}/projects/{p}/locations/{l}/endpoints/openapi/chat/completions
//
// with the model in the body as "google/{model}". The router routes it by
// the same pools as the publisher model surface, found by the project in
// the path and the publisher and model in the body, and forwards the
// caller's bytes to the region's own endpoint, streams (server-sent events)
// included, as it does every REST call. Since the pool is named in the body,
// the body is read (within the router's budget of body bytes, its read
// deadline and its size limit) before the pool is found, the caller
// authorized and the call admitted; the body's model is read without
// decoding the rest (upstream.BodyModel). A chat completion that names a
// cached content where the API reads Google's own fields
// (extra_body.google.cached_content) goes to the cache's location alone, as
// a Vertex call that names one does (cache.go).

// chatRoute is what the path of a chat completion names.
type chatRoute struct {
	version, project, location string
}

// parseChatRoute reads a chat completions path; false when it is not one.
func parseChatRoute(path string) (chatRoute, bool) {
	seg := strings.Split(path, "/")
	if len(seg) != 10 || seg[0] != "" || seg[2] != "projects" || seg[4] != "locations" ||
		seg[6] != "endpoints" || seg[7] != "openapi" || seg[8] != "chat" || seg[9] != "completions" {
		return chatRoute{}, false
	}
	cr := chatRoute{version: seg[1], project: seg[3], location: seg[5]}
	return cr, cr.version != "" && cr.project != "" && cr.location != ""
}

// serveChat serves one chat completion: the priority read and the body read
// first, then the pool found by the path's project and the body's model, the
// caller authorized, the call admitted, and attempts made until one answers.
func (x *exchange) serveChat(cr chatRoute) {
	r := x.r
	x.method = methodChat
	if !x.servedVersion(cr.version) {
		return
	}
	prio, perr := parsePriority(r.Header.Get(HeaderPriority))
	x.prio = prio
	x.req = upstream.Request{Version: cr.version, Method: upstream.MethodChatCompletions, RawQuery: r.URL.RawQuery, Header: r.Header}
	if !x.readBody() {
		return
	}
	name, err := upstream.BodyModel(x.req.Body)
	publisher, model, slash := strings.Cut(name, "/")
	traced := x.startSpan(r.Context(), propagation.HeaderCarrier(r.Header), methodChat, model)
	timeout, callers, terr := x.s.callTimeout(r.Header)
	switch {
	case perr != nil:
		x.fail(http.StatusBadRequest, codes.InvalidArgument, perr.Error(), 0)
		return
	case terr != nil:
		x.fail(http.StatusBadRequest, codes.InvalidArgument, terr.Error(), 0)
		return
	case err != nil:
		x.fail(http.StatusBadRequest, codes.InvalidArgument, err.Error(), 0)
		return
	case !slash || publisher == "" || model == "":
		x.fail(http.StatusBadRequest, codes.InvalidArgument, fmt.Sprintf(`"model" %q is not {publisher}/{model}, e.g. google/gemini-3.6-flash`, name), 0)
		return
	}
	key := table.Key{Project: cr.project, Publisher: publisher, Model: model}
	if x.pool = x.s.lookup(key); x.pool == nil {
		x.fail(http.StatusNotFound, codes.NotFound, fmt.Sprintf(
			"no routing pool for project %q, publisher %q, model %q (location %q is not used to find a pool)",
			key.Project, key.Publisher, key.Model, cr.location), 0)
		return
	}
	x.run(traced, timeout, callers, true)
}
