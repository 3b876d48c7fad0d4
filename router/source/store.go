package source

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/regionwarden/regionwarden/router/table"
)

// Reasons a table is refused. They are few and fixed, so they serve as a metric
// label.
const (
	// ReasonRead: the table could not be read (missing file, missing key).
	ReasonRead = "read"
	// ReasonVersion: the table has a version this build does not read.
	ReasonVersion = "version"
	// ReasonInvalid: the table is not valid JSON or fails validation.
	ReasonInvalid = "invalid"
	// ReasonDuplicatePool: a pool is already served by a ConfigMap whose
	// namespace/name sorts first.
	ReasonDuplicatePool = "duplicate_pool"
	// ReasonEndpoint: a region's endpoint is a host the router may not send
	// credentials to (see table.Endpoints).
	ReasonEndpoint = "endpoint"
	// ReasonNotOwned: a labeled ConfigMap whose controller is not a
	// RegionPool; the router reads only tables the operator writes.
	ReasonNotOwned = "not_owned"
)

// Observer hears what a source does, so that the server can count it (for
// example as Prometheus metrics). Its methods are called from the source's
// goroutine and must not block.
type Observer interface {
	// Loaded is called when a new table starts serving; hash is its table.Hash.
	Loaded(origin, hash string)
	// Rejected is called when a table from origin is refused; reason is one of
	// the Reason constants and err says why.
	Rejected(origin, reason string, err error)
}

// snapshot pairs a table with its hash so that readers see both from the same load.
type snapshot struct {
	table *table.Table
	hash  string
}

// Store holds the table a source serves and tells subscribers when it changes.
// Reads (Current, Hash) are one atomic load; they never wait for a writer.
// The zero value is not usable: make one with NewStore.
type Store struct {
	cur atomic.Pointer[snapshot]
	log *slog.Logger
	obs Observer

	mu     sync.Mutex // guards subs, next and serializes Publish
	subs   map[int]func(*table.Table)
	nextID int

	rmu      sync.Mutex         // guards refusals
	refusals map[string]Refusal // standing refusals by origin and reason
}

// Refusal is a table refused from an origin that has not supplied a good
// table since: what it would have changed is not served, the last good
// table is. An older router reading a table of a newer format version shows
// one here until it is upgraded.
type Refusal struct {
	// Origin is where the table came from: configmap:<namespace>/<name> or
	// file:<path>.
	Origin string `json:"origin"`
	// Reason is one of the Reason constants.
	Reason string `json:"reason"`
	// Error says why, naming the field at fault.
	Error string `json:"error"`
	// Since is when the origin was first refused for this reason.
	Since time.Time `json:"since"`
}

// NewStore returns an empty store. A nil logger logs to slog.Default(); a nil
// observer observes nothing.
func NewStore(log *slog.Logger, obs Observer) *Store {
	if log == nil {
		log = slog.Default()
	}
	return &Store{log: log, obs: obs, subs: map[int]func(*table.Table){}, refusals: map[string]Refusal{}}
}

// Current is the table being served, or nil before the first good load. The
// returned table is shared and must not be modified.
func (s *Store) Current() *table.Table {
	if sn := s.cur.Load(); sn != nil {
		return sn.table
	}
	return nil
}

// Hash is the table.Hash of the table being served, or "" before the first
// good load.
func (s *Store) Hash() string {
	if sn := s.cur.Load(); sn != nil {
		return sn.hash
	}
	return ""
}

// Subscribe calls fn with every table that starts serving after this call, in
// order, from the source's goroutine; fn must not block for long and must not
// call Subscribe or unsubscribe. Read Current for the table serving now. The returned function ends the subscription.
func (s *Store) Subscribe(fn func(*table.Table)) (unsubscribe func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.nextID
	s.nextID++
	s.subs[id] = fn
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.subs, id)
	}
}

// Publish makes t the table being served unless it is the one already served.
// It reports whether the table changed. t must be valid (as table.Parse
// returns it) and must not be modified afterwards.
func (s *Store) Publish(origin string, t *table.Table) bool {
	hash := t.Hash()
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.cur.Load(); old != nil && old.hash == hash {
		return false
	}
	s.cur.Store(&snapshot{table: t, hash: hash})
	s.log.Info("routing table loaded", "origin", origin, "hash", hash, "pools", len(t.Pools))
	if s.obs != nil {
		s.obs.Loaded(origin, hash)
	}
	for _, fn := range s.subs {
		fn(t)
	}
	return true
}

// Reject logs and reports a refused table, and keeps it among the standing
// refusals until the origin supplies a good table or goes away. The table
// being served is untouched.
func (s *Store) Reject(origin, reason string, err error) {
	s.log.Error("routing table refused, the last good table keeps serving",
		"origin", origin, "reason", reason, "error", err, "serving", s.Hash())
	s.standing(origin, reason, err)
	if s.obs != nil {
		s.obs.Rejected(origin, reason, err)
	}
}

// standing records a refusal of origin for reason, keeping the time it
// was first refused for that reason.
func (s *Store) standing(origin, reason string, err error) {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	key := origin + "\x00" + reason
	r, ok := s.refusals[key]
	if !ok {
		r = Refusal{Origin: origin, Reason: reason, Since: time.Now()}
	}
	r.Error = err.Error()
	s.refusals[key] = r
}

// accepted ends the standing refusals of origin, for the reasons given or,
// with none given, for every reason: the origin supplied a good table, or
// went away.
func (s *Store) accepted(origin string, reasons ...string) {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	for key, r := range s.refusals {
		if r.Origin == origin && (len(reasons) == 0 || slices.Contains(reasons, r.Reason)) {
			delete(s.refusals, key)
		}
	}
}

// Refusals are the standing refusals, by origin and reason.
func (s *Store) Refusals() []Refusal {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	out := make([]Refusal, 0, len(s.refusals))
	for _, r := range s.refusals {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Refusal) int {
		return cmp.Or(strings.Compare(a.Origin, b.Origin), strings.Compare(a.Reason, b.Reason))
	})
	return out
}

// parse reads one table document whose endpoints must be ones endpoints
// allows, and says why it was refused, if it was.
func parse(data []byte, endpoints table.Endpoints) (*table.Table, string, error) {
	var head struct {
		Version int `json:"version"`
	}
	// A table of another version is judged by its version alone: its other
	// fields may be ones this build does not know, as they are in a newer
	// format.
	if err := json.Unmarshal(data, &head); err == nil && head.Version != table.Version {
		return nil, ReasonVersion, fmt.Errorf("routing table: version: unsupported version %d (this build reads %d): "+
			"the last good table keeps serving until the router is upgraded or the table is written in version %d",
			head.Version, table.Version, table.Version)
	}
	t, err := table.Parse(data, endpoints)
	var offGoogle *table.EndpointError
	switch {
	case errors.As(err, &offGoogle):
		return nil, ReasonEndpoint, err
	case err != nil:
		return nil, ReasonInvalid, err
	}
	return t, "", nil
}
