package server

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"

	"google.golang.org/grpc/codes"

	"github.com/regionwarden/regionwarden/router/policy"
	"github.com/regionwarden/regionwarden/router/table"
	"github.com/regionwarden/regionwarden/router/upstream"
)

// A cached content (Vertex AI context caching) lives in the location it was
// created in, projects/P/locations/L/cachedContents/ID, and only L serves
// the calls that name it: sent to another region, Google refuses them. A
// call whose body names one is held to L (policy.Call.Pin), whatever the
// pool's routing would choose; a pool with no region L answers it with an
// error that says so, rather than send it where it cannot succeed.

// cachedContentKey is what every body that names a cached content holds
// ("cachedContent", or "cached_content"): a body without it is not read for
// one. A body with it is stepped over as bytes (upstream.CachedContent),
// nothing of it copied: a hostile caller's megabytes that mention it cost a
// scan, not memory beyond the body budget.
var cachedContentKey = []byte("cached")

// cachedContent is the cached content the exchange's body names, or "":
// at the top level of a Vertex body (upstream.CachedContent), under
// extra_body.google of a chat completion (upstream.ChatCachedContent), where
// Vertex AI's OpenAI-compatible API reads it.
func (x *exchange) cachedContent() string {
	body := x.req.Body
	switch {
	case x.method == methodRaw || x.method == methodStreamRaw:
		// A partner model's body is its publisher's API, which names no
		// Vertex cached content.
		return ""
	case !bytes.Contains(body, cachedContentKey):
		return ""
	case x.method == methodChat:
		return upstream.ChatCachedContent(body)
	}
	return upstream.CachedContent(body)
}

// cachedContentLocation is the location in a cached content's name, or ""
// when the name is not one.
func cachedContentLocation(name string) string {
	p := strings.Split(name, "/")
	if len(p) != 6 || p[0] != "projects" || p[1] == "" || p[2] != "locations" || p[3] == "" || p[4] != "cachedContents" || p[5] == "" {
		return ""
	}
	return p[3]
}

// cacheError is the answer to a call whose cached content lives where its
// pool has no region.
type cacheError struct {
	name, location, pool string
}

func (e *cacheError) Error() string {
	return fmt.Sprintf("cachedContent %q lives in location %q, and pool %s has no region there: a cached content is served only in the location it was created in",
		e.name, e.location, e.pool)
}

// pinTo holds the call to the location of the cached content name, when
// name is one: it checks that the pool has a region there and, for a call
// admitted already (a REST call's first attempt is picked before its body
// is read), moves that attempt there (policy.Call.Pin); a call admitted
// later is pinned by admit. It returns a *cacheError, or the policy's
// refusal of the moved attempt.
func (c *call) pinTo(name string, admitted bool) error {
	loc := cachedContentLocation(name)
	if loc == "" {
		return nil
	}
	if !c.pool.hasRegion(loc) {
		return &cacheError{name: name, location: loc, pool: c.pool.label}
	}
	c.pinned = loc
	if !admitted {
		return nil
	}
	a, err := c.pc.Pin(c.att, loc)
	if err == nil {
		c.use(a)
		return nil
	}
	// The first attempt is withdrawn and the pinned one not picked yet:
	// wait for the region's room, as any first attempt does.
	c.settled = true
	return c.next()
}

// hasRegion reports whether the pool has a region named name.
func (e *poolEntry) hasRegion(name string) bool { return e.region(name) != nil }

// region is the pool's region named name, or nil.
func (e *poolEntry) region(name string) *table.Region {
	for i := range e.table.Regions {
		if r := &e.table.Regions[i]; r.Name == name {
			return r
		}
	}
	return nil
}

// refusePin answers a REST call pinTo refused: its first attempt, not sent,
// is given back and counts for nothing.
func (x *exchange) refusePin(err error) {
	if ce, ok := err.(*cacheError); ok {
		x.att.Finish(policy.Report{Outcome: policy.Cancelled}) //nolint:misspell // the policy package's name
		x.settled = true
		x.fail(http.StatusBadRequest, codes.InvalidArgument, ce.Error(), 0)
		return
	}
	code, msg, retryAfter := x.refusal(err)
	x.fail(upstream.HTTPStatus(code), code, msg, retryAfter)
}
