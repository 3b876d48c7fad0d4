package emulator

import (
	"fmt"
	"io"
	"net/http"
	"sync"

	"cloud.google.com/go/aiplatform/apiv1/aiplatformpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Context caches, as a location keeps them: a cached content is made in one
// location (POST .../locations/L/cachedContents, its model one of L's),
// named projects/P/locations/L/cachedContents/N, and only L serves the
// calls that name it: a generate call that names a cache L does not hold is
// refused NOT_FOUND, as one sent to another location is by Google. Caches
// are read, listed, updated (their display name and expiry) and deleted
// over REST; they do not expire here and take no capacity.

// caches is one region's cached contents.
type caches struct {
	mu     sync.Mutex
	byName map[string]*aiplatformpb.CachedContent
	order  []string // names, oldest first
}

// get is a copy of the cache named name, or the error Google answers for
// one the location does not hold.
func (c *caches) get(name string) (*aiplatformpb.CachedContent, *apiError) {
	return c.change(name, func(*aiplatformpb.CachedContent) bool { return true })
}

// change applies fn to the cache named name, deleting it when fn says not
// to keep it, and returns a copy of it as fn left it; or the error Google
// answers for a cache the location does not hold.
func (c *caches) change(name string, fn func(*aiplatformpb.CachedContent) (keep bool)) (*aiplatformpb.CachedContent, *apiError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cc, ok := c.byName[name]
	if !ok {
		return nil, &apiError{code: codes.NotFound, msg: fmt.Sprintf("CachedContent not found (or has expired): %s", name)}
	}
	if !fn(cc) {
		delete(c.byName, name)
	}
	return proto.Clone(cc).(*aiplatformpb.CachedContent), nil
}

// checkCache refuses a generate call that names a cache r does not hold.
func (r *region) checkCache(name string) *apiError {
	if name == "" {
		return nil
	}
	_, err := r.caches.get(name)
	return err
}

// serveCaches serves the cachedContents collection (POST: create, GET:
// list) and one cached content (GET, PATCH, DELETE) of region r.
func serveCaches(r *region, w http.ResponseWriter, req *http.Request) {
	if v := req.PathValue("version"); v != "v1" && v != "v1beta1" {
		writeError(w, &apiError{code: codes.NotFound, msg: fmt.Sprintf("API version %q is not served", v)})
		return
	}
	project, id := req.PathValue("project"), req.PathValue("id")
	switch {
	case req.PathValue("location") != r.cfg.Name:
		writeError(w, &apiError{code: codes.InvalidArgument, msg: fmt.Sprintf("Location %q does not match the endpoint's location %q.", req.PathValue("location"), r.cfg.Name)})
		return
	case project != r.sc.Project:
		writeError(w, &apiError{code: codes.PermissionDenied, msg: fmt.Sprintf("Permission denied on project %q (or it may not exist).", project)})
		return
	}
	name := "projects/" + project + "/locations/" + r.cfg.Name + "/cachedContents/" + id
	var in aiplatformpb.CachedContent
	if req.Method == http.MethodPost || req.Method == http.MethodPatch {
		body, err := io.ReadAll(io.LimitReader(req.Body, maxBodyBytes))
		if err == nil {
			err = unmarshalJSON.Unmarshal(body, &in)
		}
		if err != nil {
			writeError(w, &apiError{code: codes.InvalidArgument, msg: "Invalid JSON payload received. " + err.Error()})
			return
		}
	}
	c := &r.caches
	switch {
	case id == "" && req.Method == http.MethodPost:
		if err := r.checkModel(in.GetModel()); err != nil {
			writeError(w, err)
			return
		}
		c.mu.Lock()
		if c.byName == nil {
			c.byName = map[string]*aiplatformpb.CachedContent{}
		}
		in.Name = fmt.Sprintf("%s%d", name, len(c.order)+1)
		in.CreateTime = timestamppb.Now()
		in.UpdateTime = in.CreateTime
		c.byName[in.Name] = proto.Clone(&in).(*aiplatformpb.CachedContent)
		c.order = append(c.order, in.Name)
		c.mu.Unlock()
		writeMessage(w, &in)
	case id == "" && req.Method == http.MethodGet:
		out := &aiplatformpb.ListCachedContentsResponse{}
		c.mu.Lock()
		for _, n := range c.order {
			if cc, ok := c.byName[n]; ok {
				out.CachedContents = append(out.CachedContents, proto.Clone(cc).(*aiplatformpb.CachedContent))
			}
		}
		c.mu.Unlock()
		writeMessage(w, out)
	case id == "":
		writeError(w, &apiError{code: codes.NotFound, msg: "The requested URL was not found on this server."})
	case req.Method == http.MethodGet:
		cc, err := c.get(name)
		if err != nil {
			writeError(w, err)
			return
		}
		writeMessage(w, cc)
	case req.Method == http.MethodPatch:
		cc, err := c.change(name, func(cc *aiplatformpb.CachedContent) bool {
			if in.DisplayName != "" {
				cc.DisplayName = in.DisplayName
			}
			if in.Expiration != nil {
				cc.Expiration = in.Expiration
			}
			cc.UpdateTime = timestamppb.Now()
			return true
		})
		if err != nil {
			writeError(w, err)
			return
		}
		writeMessage(w, cc)
	case req.Method == http.MethodDelete:
		if _, err := c.change(name, func(*aiplatformpb.CachedContent) bool { return false }); err != nil {
			writeError(w, err)
			return
		}
		writeMessage(w, &emptypb.Empty{})
	default:
		writeError(w, &apiError{code: codes.NotFound, msg: "The requested URL was not found on this server."})
	}
}
