package table

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Defaults, in one place: Policy.Default applies them to a table, and the
// operator renders a RegionPool's omitted fields as omitted, so they apply to
// RegionPools too. The CRD's +kubebuilder:default markers state the same
// numbers, so that kubectl shows them; a test reads the API server's defaults
// back and compares them with these.
const (
	DefaultPublisher            = "google"
	DefaultFailureRateThreshold = 0.5
	DefaultMinRequests          = 20
	DefaultEjectionInterval     = 10 * time.Second
	DefaultBaseEjectionTime     = 30 * time.Second
	DefaultMaxEjectionTime      = 5 * time.Minute
	DefaultMaxEjectedPercent    = 50
	DefaultMaxAttempts          = 2
	DefaultBudgetPercent        = 10
	DefaultMinRetriesPerSecond  = 1
	DefaultRequestType          = RequestTypeSpillover
	DefaultMaxInFlight          = 1024
	DefaultRegionInitialLimit   = 64
	DefaultRegionMaxLimit       = 512
	DefaultCapacityShare        = 100
	// MaxRegions is the most regions one pool may hold.
	MaxRegions = 32
)

// locationPattern is what a Vertex AI location looks like: a region such as
// europe-west1, or one of the words global, eu, us.
var locationPattern = regexp.MustCompile(`^[a-z]+(-[a-z]+)*[0-9]+$|^global$|^eu$|^us$`)

// ValidLocation reports whether name looks like a Vertex AI location.
func ValidLocation(name string) bool { return locationPattern.MatchString(name) }

// DefaultEndpoint is Google's aiplatform host for a location.
func DefaultEndpoint(location string) string {
	switch location {
	case "global":
		return "aiplatform.googleapis.com:443"
	case "eu", "us":
		return "aiplatform." + location + ".rep.googleapis.com:443"
	default:
		return location + "-aiplatform.googleapis.com:443"
	}
}

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a Go duration string such as "10s" or "5m".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"10s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// UnmarshalJSON reads a region. A region that omits "ejectable" is
// ejectable, as a RegionPool's shared regions are; fill then clears it for a
// provisioned region, which is never ejected.
func (r *Region) UnmarshalJSON(b []byte) error {
	type plain Region // Region's fields, without this method
	p := plain{Ejectable: true}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields() // a decoder's settings do not reach an Unmarshaler
	if err := dec.Decode(&p); err != nil {
		return err
	}
	*r = Region(p)
	return nil
}

// Parse reads a table, fills in defaults and validates it. The error names
// the field at fault, e.g. `pools[0].regions[2].name: duplicate region "eu"`.
// A table that Parse returns is complete and valid, and every endpoint in it
// is one endpoints allows (Google's API hosts alone when none is given).
func Parse(data []byte, endpoints ...Endpoints) (*Table, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var t Table
	if err := dec.Decode(&t); err != nil {
		return nil, fmt.Errorf("routing table: %w", err)
	}
	// Only white space may follow the document. (Decoder.More alone lets a
	// stray closing bracket or brace through.)
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("routing table: trailing data after the JSON document")
	}
	if t.Version != Version {
		return nil, fmt.Errorf("routing table: version: unsupported version %d (this build reads %d)", t.Version, Version)
	}
	allowed := Endpoints{}
	for _, e := range endpoints {
		allowed.allowed = append(allowed.allowed, e.allowed...)
		allowed.any = allowed.any || e.any
	}
	if err := t.fillAndValidate(allowed); err != nil {
		return nil, fmt.Errorf("routing table: %w", err)
	}
	return &t, nil
}

// fillAndValidate fills defaults, validates, checks every endpoint against
// endpoints and only then sorts the regions, so that an error's path
// (pools[0].regions[2]) is the index in the caller's document, not in the
// sorted result.
func (t *Table) fillAndValidate(endpoints Endpoints) error {
	for i := range t.Pools {
		t.Pools[i].fill()
	}
	if err := t.Validate(); err != nil {
		return err
	}
	for i := range t.Pools {
		for j, r := range t.Pools[i].Regions {
			if err := endpoints.Check(r.Endpoint); err != nil {
				return fmt.Errorf("pools[%d].regions[%d].endpoint: %w", i, j, err)
			}
		}
	}
	for i := range t.Pools {
		SortRegions(t.Pools[i].Regions)
	}
	return nil
}

// Default fills every unset field with its default (see Policy) and sorts the regions.
func (t *Table) Default() {
	for i := range t.Pools {
		t.Pools[i].Default()
	}
}

// Default fills every unset field of the pool with its default and sorts the regions.
func (p *Pool) Default() {
	p.fill()
	SortRegions(p.Regions)
}

// fill fills every unset field of the pool with its default, keeping the
// regions in their order.
func (p *Pool) fill() {
	if p.Publisher == "" {
		p.Publisher = DefaultPublisher
	}
	for i := range p.Regions {
		r := &p.Regions[i]
		if r.Endpoint == "" {
			r.Endpoint = DefaultEndpoint(r.Name)
		}
		if r.Tier == "" {
			r.Tier = TierShared
		}
		if r.Source == "" {
			if r.Tier == TierProvisioned {
				r.Source = SourceDeclared
			} else {
				r.Source = SourceSpec
			}
		}
		if r.Tier == TierProvisioned {
			r.Ejectable = false
		}
		if len(r.PayGoTiers) == 0 {
			r.PayGoTiers = DefaultRegionPayGoTiers(r.Tier)
		} else {
			r.PayGoTiers = sortedTiers(r.PayGoTiers)
		}
	}
	p.Policy.Default()
	p.Callers.fill()
}

// SortRegions orders regions provisioned first, then by name.
func SortRegions(rs []Region) {
	sort.SliceStable(rs, func(i, j int) bool {
		pi, pj := rs[i].Tier == TierProvisioned, rs[j].Tier == TierProvisioned
		if pi != pj {
			return pi
		}
		return rs[i].Name < rs[j].Name
	})
}

// Default fills every unset field with its default: nil, or zero where zero
// is out of the field's range.
func (p *Policy) Default() {
	e := &p.Ejection
	if e.FailureRateThreshold == 0 {
		e.FailureRateThreshold = DefaultFailureRateThreshold
	}
	if e.MinRequests == 0 {
		e.MinRequests = DefaultMinRequests
	}
	if e.Interval.Duration == 0 {
		e.Interval.Duration = DefaultEjectionInterval
	}
	if e.BaseEjectionTime.Duration == 0 {
		e.BaseEjectionTime.Duration = DefaultBaseEjectionTime
	}
	if e.MaxEjectionTime.Duration == 0 {
		e.MaxEjectionTime.Duration = DefaultMaxEjectionTime
	}
	defaultPtr(&e.MaxEjectedPercent, DefaultMaxEjectedPercent)
	r := &p.Retry
	if r.MaxAttempts == 0 {
		r.MaxAttempts = DefaultMaxAttempts
	}
	defaultPtr(&r.BudgetPercent, DefaultBudgetPercent)
	defaultPtr(&r.MinRetriesPerSecond, DefaultMinRetriesPerSecond)
	if p.Provisioned.RequestType == "" {
		p.Provisioned.RequestType = DefaultRequestType
	}
	c := &p.Concurrency
	if c.MaxInFlight == 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.RegionInitialLimit == 0 {
		c.RegionInitialLimit = DefaultRegionInitialLimit
	}
	if c.RegionMaxLimit == 0 {
		c.RegionMaxLimit = DefaultRegionMaxLimit
	}
	if p.CapacityShare == 0 {
		p.CapacityShare = DefaultCapacityShare
	}
	p.PayGo.fill()
}

// defaultPtr points *f at a new v when *f is nil. It never writes through
// *f: a Policy copied from a parsed table shares its pointers.
func defaultPtr(f **int, v int) {
	if *f == nil {
		*f = &v
	}
}

// DefaultPolicy is the policy of a pool that sets nothing.
func DefaultPolicy() Policy {
	var p Policy
	p.Default()
	return p
}

// Validate checks a defaulted table; the error names the field at fault.
func (t *Table) Validate() error {
	if t.Version != Version {
		return fmt.Errorf("version: unsupported version %d (this build reads %d)", t.Version, Version)
	}
	if len(t.Pools) == 0 {
		return errors.New("pools: a table needs at least one pool")
	}
	seen := map[Key]int{}
	for i := range t.Pools {
		p := &t.Pools[i]
		if err := p.Validate(); err != nil {
			return fmt.Errorf("pools[%d].%w", i, err)
		}
		if j, dup := seen[p.Key()]; dup {
			return fmt.Errorf("pools[%d]: duplicate pool %s/%s/%s (also pools[%d])", i, p.Project, p.Publisher, p.Model, j)
		}
		seen[p.Key()] = i
	}
	return nil
}

// fieldError is an error whose text starts with a field path, so that callers
// can prefix their own path with a dot.
func fieldError(path, format string, args ...any) error {
	return fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...))
}

// Validate checks a defaulted pool; the error starts with the field at fault.
func (p *Pool) Validate() error {
	switch {
	case p.Project == "":
		return fieldError("project", "must be set")
	case p.Publisher == "":
		return fieldError("publisher", "must be set")
	case p.Model == "":
		return fieldError("model", "must be set")
	case len(p.Regions) == 0:
		return fieldError("regions", "a pool needs at least one region")
	case len(p.Regions) > MaxRegions:
		return fieldError("regions", "%d regions, at most %d", len(p.Regions), MaxRegions)
	}
	names := map[string]bool{}
	for i, r := range p.Regions {
		path := fmt.Sprintf("regions[%d]", i)
		if !ValidLocation(r.Name) {
			return fieldError(path+".name", "%q is not a Vertex AI location (e.g. europe-west1, global, eu, us)", r.Name)
		}
		if names[r.Name] {
			return fieldError(path+".name", "duplicate region %q", r.Name)
		}
		names[r.Name] = true
		if err := validEndpoint(r.Endpoint); err != nil {
			return fieldError(path+".endpoint", "%v", err)
		}
		switch r.Tier {
		case TierProvisioned:
			if r.Ejectable {
				return fieldError(path+".ejectable", "a provisioned region is never ejectable")
			}
		case TierShared:
		default:
			return fieldError(path+".tier", "unknown tier %q (provisioned or shared)", r.Tier)
		}
		switch r.Source {
		case SourceSpec, SourceDeclared, SourceDiscovered:
		default:
			return fieldError(path+".source", "unknown source %q (spec, declared or discovered)", r.Source)
		}
		if err := validTiers(r.PayGoTiers); err != nil {
			return fieldError(path+".payGoTiers", "%v", err)
		}
		c := r.Capacity
		if c.GSUs < 0 || c.GSUs > 100000 {
			return fieldError(path+".capacity.gsus", "%d is out of range [0, 100000]", c.GSUs)
		}
		if c.TokensPerSecond < 0 || c.TokensPerSecond > 1e12 || c.TokensPerSecond != c.TokensPerSecond {
			return fieldError(path+".capacity.tokensPerSecond", "%v is out of range [0, 1e12]", c.TokensPerSecond)
		}
		if c.RequestsPerSecond < 0 || c.RequestsPerSecond > 1e9 || c.RequestsPerSecond != c.RequestsPerSecond {
			return fieldError(path+".capacity.requestsPerSecond", "%v is out of range [0, 1e9]", c.RequestsPerSecond)
		}
	}
	if err := p.Policy.Validate(); err != nil {
		return fmt.Errorf("policy.%w", err)
	}
	if err := p.Callers.Validate(); err != nil {
		return fmt.Errorf("callers.%w", err)
	}
	return nil
}

func validEndpoint(ep string) error {
	i := strings.LastIndexByte(ep, ':')
	if i <= 0 || i == len(ep)-1 {
		return fmt.Errorf("%q is not host:port", ep)
	}
	for _, ch := range ep[i+1:] {
		if ch < '0' || ch > '9' {
			return fmt.Errorf("%q has a port that is not a number", ep)
		}
	}
	if strings.ContainsAny(ep, " /\t\n") {
		return fmt.Errorf("%q is not host:port", ep)
	}
	return nil
}

// Validate checks a defaulted policy; the error starts with the field at fault.
func (p *Policy) Validate() error {
	e := p.Ejection
	switch {
	case !(e.FailureRateThreshold > 0 && e.FailureRateThreshold <= 1):
		return fieldError("ejection.failureRateThreshold", "%v is out of range (0, 1]", e.FailureRateThreshold)
	case e.MinRequests < 1 || e.MinRequests > 1000000:
		return fieldError("ejection.minRequests", "%d is out of range [1, 1000000]", e.MinRequests)
	case e.Interval.Duration < time.Second || e.Interval.Duration > time.Hour:
		return fieldError("ejection.interval", "%v is out of range [1s, 1h]", e.Interval.Duration)
	case e.BaseEjectionTime.Duration < time.Second || e.BaseEjectionTime.Duration > time.Hour:
		return fieldError("ejection.baseEjectionTime", "%v is out of range [1s, 1h]", e.BaseEjectionTime.Duration)
	case e.MaxEjectionTime.Duration < e.BaseEjectionTime.Duration || e.MaxEjectionTime.Duration > 24*time.Hour:
		return fieldError("ejection.maxEjectionTime", "%v is out of range [baseEjectionTime, 24h]", e.MaxEjectionTime.Duration)
	case e.MaxEjectedPercent == nil:
		return fieldError("ejection.maxEjectedPercent", "not set (Default sets it)")
	case *e.MaxEjectedPercent < 0 || *e.MaxEjectedPercent >= 100:
		return fieldError("ejection.maxEjectedPercent", "%d is out of range [0, 100)", *e.MaxEjectedPercent)
	}
	r := p.Retry
	switch {
	case r.MaxAttempts < 1 || r.MaxAttempts > 5:
		return fieldError("retry.maxAttempts", "%d is out of range [1, 5]", r.MaxAttempts)
	case r.BudgetPercent == nil:
		return fieldError("retry.budgetPercent", "not set (Default sets it)")
	case *r.BudgetPercent < 0 || *r.BudgetPercent > 100:
		return fieldError("retry.budgetPercent", "%d is out of range [0, 100]", *r.BudgetPercent)
	case r.MinRetriesPerSecond == nil:
		return fieldError("retry.minRetriesPerSecond", "not set (Default sets it)")
	case *r.MinRetriesPerSecond < 0 || *r.MinRetriesPerSecond > 10000:
		return fieldError("retry.minRetriesPerSecond", "%d is out of range [0, 10000]", *r.MinRetriesPerSecond)
	}
	switch p.Provisioned.RequestType {
	case RequestTypeSpillover, RequestTypeDedicated:
	default:
		return fieldError("provisioned.requestType", "unknown request type %q (spillover or dedicated)", p.Provisioned.RequestType)
	}
	if w := p.Provisioned.Window.Duration; w != 0 && (w < time.Second || w > MaxProvisionedWindow) {
		return fieldError("provisioned.window", "%v is out of range [1s, %v] (omit it for the size-based default)", w, MaxProvisionedWindow)
	}
	c := p.Concurrency
	switch {
	case c.MaxInFlight < 1 || c.MaxInFlight > 1000000:
		return fieldError("concurrency.maxInFlight", "%d is out of range [1, 1000000]", c.MaxInFlight)
	case c.RegionMaxLimit < 1 || c.RegionMaxLimit > 1000000:
		return fieldError("concurrency.regionMaxLimit", "%d is out of range [1, 1000000]", c.RegionMaxLimit)
	case c.RegionInitialLimit < 1 || c.RegionInitialLimit > c.RegionMaxLimit:
		return fieldError("concurrency.regionInitialLimit", "%d is out of range [1, regionMaxLimit]", c.RegionInitialLimit)
	}
	if p.CapacityShare < 1 || p.CapacityShare > 100 {
		return fieldError("capacityShare", "%d is out of range [1, 100] (percent)", p.CapacityShare)
	}
	return p.PayGo.validate()
}

// Render writes the table deterministically: defaults filled, regions sorted,
// pools sorted by key, indented JSON with a trailing newline. The same table
// always gives the same bytes. It validates first and renders nothing invalid.
// It renders any endpoint: where credentials may go is for the router to
// decide when it parses the table (and for the RegionPool CRD to check).
func Render(t *Table) ([]byte, error) {
	c := t.clone()
	c.Version = Version
	if err := c.fillAndValidate(anyEndpoint); err != nil {
		return nil, fmt.Errorf("routing table: %w", err)
	}
	sort.SliceStable(c.Pools, func(i, j int) bool {
		a, b := c.Pools[i].Key(), c.Pools[j].Key()
		if a.Project != b.Project {
			return a.Project < b.Project
		}
		if a.Publisher != b.Publisher {
			return a.Publisher < b.Publisher
		}
		return a.Model < b.Model
	})
	out, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// Hash is the hex SHA-256 of rendered bytes, shortened to 16 characters.
func Hash(rendered []byte) string {
	sum := sha256.Sum256(rendered)
	return hex.EncodeToString(sum[:])[:16]
}

// Hash is the Hash of t as Render writes it, so that a table the router
// parsed has the same hash as the operator's rendering of it in its
// ConfigMap's annotation. A table Render refuses (one without pools) is hashed
// from its plain JSON.
func (t *Table) Hash() string {
	b, err := Render(t)
	if err != nil {
		b, _ = json.Marshal(t)
	}
	return Hash(b)
}

func (t *Table) clone() *Table {
	c := &Table{Version: t.Version, Pools: make([]Pool, len(t.Pools))}
	for i, p := range t.Pools {
		p.Regions = append([]Region(nil), p.Regions...)
		p.Callers.ServiceAccounts = append([]ServiceAccount(nil), p.Callers.ServiceAccounts...)
		c.Pools[i] = p
	}
	return c
}

// Lookup returns the pool for key, or nil.
func (t *Table) Lookup(k Key) *Pool {
	for i := range t.Pools {
		if t.Pools[i].Key() == k {
			return &t.Pools[i]
		}
	}
	return nil
}
