package emulator

import (
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/regionwarden/regionwarden/router/table"
)

// Defaults for the fields a scenario may leave out.
const (
	DefaultPublisher      = "google"
	DefaultTimeScale      = 1.0
	DefaultCapacityWindow = time.Second
	DefaultSessionMin     = 50
	DefaultSessionMax     = 100
	DefaultDeadline       = 30 * time.Second
	DefaultInputTokens    = 400
	DefaultOutputTokens   = 100
	DefaultLatencyP50     = 300 * time.Millisecond
	DefaultBurstLength    = 1
	DefaultFaultCode      = 503
)

// PTMode is what a provisioned region does with calls beyond its PT that
// carry no request-type header.
type PTMode string

const (
	// ModeSpillover serves the excess as ON_DEMAND traffic out of the region's
	// pay-as-you-go quota, as Vertex does by default.
	ModeSpillover PTMode = "spillover"
	// ModeDedicated answers the excess with 429 "Exceeded the Provisioned
	// Throughput".
	ModeDedicated PTMode = "dedicated"
)

// Outage is a kind of full outage.
type Outage string

const (
	// OutageRefused drops every connection: clients see transport failures.
	OutageRefused Outage = "refused"
	// OutageUnavailable answers every call with UNAVAILABLE (HTTP 503).
	OutageUnavailable Outage = "unavailable"
)

// Distribution names a latency distribution.
type Distribution string

const (
	// Lognormal is fitted to the p50 and p99: mu = ln(p50),
	// sigma = (ln(p99) - ln(p50)) / 2.3263.
	Lognormal Distribution = "lognormal"
	// Fixed is always the p50.
	Fixed Distribution = "fixed"
)

// Duration is a time.Duration written as a Go duration string ("30m",
// "1.5s"), as the routing table writes its durations.
type Duration = table.Duration

// D returns a Duration.
func D(d time.Duration) Duration { return Duration{Duration: d} }

// Scenario is an emulated incident: the regions of one model, their capacity,
// latency and faults over scenario time, and the load a replay sends.
// A Scenario that ParseScenario returns is defaulted and valid.
type Scenario struct {
	// Name identifies the scenario in reports.
	Name string `json:"name"`
	// Description says what the scenario models.
	Description string `json:"description,omitempty"`
	// Project is the GCP project the calls name.
	Project string `json:"project"`
	// Publisher is the model's publisher; default google.
	Publisher string `json:"publisher,omitempty"`
	// Model is the model ID, e.g. gemini-3.6-flash, or a partner model's,
	// e.g. claude-sonnet-4-5@20250929 of publisher anthropic (served on
	// rawPredict and streamRawPredict, as Anthropic's Messages API).
	Model string `json:"model"`
	// Duration is how long the incident lasts in scenario time.
	Duration Duration `json:"duration"`
	// TimeScale is the suggested replay speed: scenario seconds per real
	// second. Default 1.
	TimeScale float64 `json:"timeScale,omitempty"`
	// CapacityWindow is the sliding window, in scenario time, over which
	// pay-as-you-go capacity is enforced. Default 1s. A PT has a window of
	// its own (Provisioned.Window).
	CapacityWindow Duration `json:"capacityWindow,omitempty"`
	// Load is what a replay sends.
	Load Load `json:"load"`
	// Regions are the emulated regions, at least one, names unique.
	Regions []Region `json:"regions"`
}

// Load is the traffic a replay drives through the regions.
type Load struct {
	// RequestsPerSecond is the base arrival rate in scenario time.
	RequestsPerSecond float64 `json:"requestsPerSecond"`
	// SessionCalls is how many calls one client session makes, drawn
	// uniformly from [min, max]. Default 50..100.
	SessionCalls IntRange `json:"sessionCalls,omitempty"`
	// Deadline is each call's deadline in scenario time. Default 30s.
	Deadline Duration `json:"deadline,omitempty"`
	// InputTokens is the prompt size of a typical call. Default 400.
	InputTokens int `json:"inputTokens,omitempty"`
	// OutputTokens is what a region generates per call, unless the call's
	// maxOutputTokens is lower. Default 100.
	OutputTokens int `json:"outputTokens,omitempty"`
	// Phases multiply the base rate over windows of scenario time.
	Phases []Phase `json:"phases,omitempty"`
	// Priorities are the shares of calls sent with each priority (the
	// router's X-Regionwarden-Priority); the rest are default calls. Omitted:
	// every call is a default call.
	Priorities PriorityMix `json:"priorities,omitempty"`
	// StreamShare is the share of calls, in [0, 1], made as streams
	// (streamGenerateContent: server-sent events over REST, a server stream
	// over gRPC); the rest are unary generateContent calls. Omitted: none.
	StreamShare float64 `json:"streamShare,omitempty"`
}

// PriorityMix is the share of calls of each priority other than default,
// each in [0, 1], together at most 1.
type PriorityMix struct {
	Critical  float64 `json:"critical,omitempty"`
	Sheddable float64 `json:"sheddable,omitempty"`
}

// IsZero reports whether every call is a default call.
func (m PriorityMix) IsZero() bool { return m.Critical == 0 && m.Sheddable == 0 }

// Of is the priority of a call drawn with u, uniform in [0, 1): critical
// below Critical, sheddable in the next Sheddable, default above.
func (m PriorityMix) Of(u float64) table.Priority {
	switch {
	case u < m.Critical:
		return table.PriorityCritical
	case u < m.Critical+m.Sheddable:
		return table.PrioritySheddable
	}
	return table.PriorityDefault
}

// IntRange is an inclusive range of integers.
type IntRange struct {
	Min int `json:"min"`
	Max int `json:"max"`
}

// Phase multiplies the load from From (inclusive) to To (exclusive).
type Phase struct {
	From       Duration `json:"from"`
	To         Duration `json:"to"`
	Multiplier float64  `json:"multiplier"`
}

// Region is one emulated Vertex AI region.
type Region struct {
	// Name is the location, e.g. europe-west1.
	Name string `json:"name"`
	// Tier is provisioned or shared.
	Tier table.Tier `json:"tier"`
	// Capacity is the region's pay-as-you-go quota. A shared region must
	// declare one; on a provisioned region it serves shared calls and
	// spillover, and an empty Capacity means no pay-as-you-go quota there.
	Capacity Capacity `json:"capacity,omitempty"`
	// Provisioned is the PT bought in this region; required exactly when the
	// tier is provisioned.
	Provisioned *Provisioned `json:"provisioned,omitempty"`
	// Priority and Flex are the quotas of Priority PayGo and Flex PayGo at
	// this location, each its own; absent: the tier is not offered here, and
	// a call that asks for it is refused (Google offers them for some models
	// at the global endpoint). One that is given needs requestsPerSecond or
	// tokensPerSecond.
	Priority *Capacity `json:"priority,omitempty"`
	Flex     *Capacity `json:"flex,omitempty"`
	// Latency is the distribution of a successful call's latency.
	Latency Latency `json:"latency,omitempty"`
	// Faults is the region's timeline of faults.
	Faults []Fault `json:"faults,omitempty"`
}

// Capacity is a rate limit; each zero field does not limit.
type Capacity struct {
	RequestsPerSecond float64 `json:"requestsPerSecond,omitempty"`
	TokensPerSecond   float64 `json:"tokensPerSecond,omitempty"`
}

// IsZero reports whether the capacity declares no limit at all.
func (c Capacity) IsZero() bool { return c.RequestsPerSecond == 0 && c.TokensPerSecond == 0 }

// Provisioned is a Provisioned Throughput order.
type Provisioned struct {
	// GSUs is the number of generative AI scale units bought.
	GSUs int64 `json:"gsus"`
	// TokensPerSecond is the PT amount in tokens/s (dedicated_token_limit).
	TokensPerSecond float64 `json:"tokensPerSecond"`
	// RequestsPerSecond optionally also caps PT calls, over the PT's window.
	RequestsPerSecond float64 `json:"requestsPerSecond,omitempty"`
	// Mode is spillover (default) or dedicated.
	Mode PTMode `json:"mode,omitempty"`
	// Window is the sliding window, in scenario time, over which the PT's
	// capacity is enforced: capacity x window in any window of that length,
	// as Google enforces a PT over a window that depends on its size.
	// Default: the window of its GSUs (Window).
	Window Duration `json:"window,omitempty"`
}

// Capacity is the PT as the rate limit it enforces.
func (p *Provisioned) Capacity() Capacity {
	return Capacity{RequestsPerSecond: p.RequestsPerSecond, TokensPerSecond: p.TokensPerSecond}
}

// EnforcedWindow is the window over which the PT's capacity is enforced: the
// scenario's, else the shortest Google gives an order of its size
// (table.DefaultProvisionedWindow). The shortest is the harshest Google
// documents for the size: a router that keeps within it keeps within any
// window of the size's range. Google says its periods follow its own clock,
// not the requests; the emulator's window slides in tenths of itself on
// scenario time, so each window aligned to that clock is one of the spans it
// checks, and it refuses whatever an aligned window would, and more.
func (p *Provisioned) EnforcedWindow() time.Duration {
	if p.Window.Duration > 0 {
		return p.Window.Duration
	}
	return table.DefaultProvisionedWindow(p.GSUs)
}

// Latency is a latency distribution in scenario time.
type Latency struct {
	// Distribution is lognormal (default) or fixed.
	Distribution Distribution `json:"distribution,omitempty"`
	// P50 is the median. Default 300ms.
	P50 Duration `json:"p50,omitempty"`
	// P99 is the 99th percentile; zero means the latency is fixed at P50.
	P99 Duration `json:"p99,omitempty"`
}

// Fault is one window of trouble in a region's timeline, from From
// (inclusive) to To (exclusive) in scenario time.
type Fault struct {
	From Duration `json:"from"`
	To   Duration `json:"to"`
	// ErrorRate is the long-run fraction of admitted calls that fail.
	ErrorRate float64 `json:"errorRate,omitempty"`
	// Code is the HTTP code of the failures: 429, 500, 503 (default) or
	// 504, or 404: the model not served at the location (withdrawn from it,
	// or not there for the project), as Google answers it. A call refused
	// with 429 takes none of the capacity that admitted it.
	Code int `json:"code,omitempty"`
	// BurstLength makes failures arrive in runs of this many calls at the
	// same average rate. Default 1 (independent failures).
	BurstLength int `json:"burstLength,omitempty"`
	// AddedLatency is added to every call in the window.
	AddedLatency Duration `json:"addedLatency,omitempty"`
	// AddedLatencyEnd, when set, ramps the added latency linearly from
	// AddedLatency at From to AddedLatencyEnd at To: a region backing up.
	AddedLatencyEnd Duration `json:"addedLatencyEnd,omitempty"`
	// Outage, when set, fails everything in the window: refused or
	// unavailable.
	Outage Outage `json:"outage,omitempty"`
	// BreaksStreams makes the streams this fault fails break off after
	// their first chunk, as a generation the region cannot finish does: the
	// caller has part of the answer and then the error (the last server-sent
	// event over REST, the stream's status over gRPC), so the call cannot be
	// retried elsewhere. Unary calls fail as before, and so do streams
	// without it: before their first chunk. Needs an errorRate of a code
	// other than 429 (Google refuses a call over quota before the model
	// runs).
	BreaksStreams bool `json:"breaksStreams,omitempty"`
}

// LoadScenario reads, defaults and validates a scenario file.
func LoadScenario(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s, err := ParseScenario(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// ParseScenario reads a scenario from YAML (or JSON), refusing unknown
// fields, then defaults and validates it. The error names the field at
// fault, e.g. `regions[1].faults[0].errorRate: must be in [0, 1], got 1.5`.
func ParseScenario(data []byte) (*Scenario, error) {
	var s Scenario
	if err := yaml.UnmarshalStrict(data, &s); err != nil {
		if paths := unknownFields(data); len(paths) > 0 {
			return nil, fmt.Errorf("scenario: unknown field %s", strings.Join(paths, ", "))
		}
		return nil, fmt.Errorf("scenario: %s", cleanYAMLError(err))
	}
	s.Default()
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("scenario %q: %w", s.Name, err)
	}
	return &s, nil
}

// cleanYAMLError strips the decoder's layers of prefixes so that the message
// starts with what is wrong, e.g. `unknown field "regions[0].tierr"`.
func cleanYAMLError(err error) string {
	msg := err.Error()
	for _, p := range []string{"error unmarshaling JSON: ", "while decoding JSON: ", "json: "} {
		msg = strings.ReplaceAll(msg, p, "")
	}
	return msg
}

// unknownFields lists the paths of the fields in a scenario document that
// Scenario does not have, e.g. `regions[0].capacty`, so the error points at
// the line to fix. It returns nil when the document does not parse.
func unknownFields(data []byte) []string {
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil
	}
	var out []string
	walkUnknown(doc, reflect.TypeFor[Scenario](), "", &out)
	return out
}

func walkUnknown(v any, t reflect.Type, path string, out *[]string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch v := v.(type) {
	case map[string]any:
		if t.Kind() != reflect.Struct || t == reflect.TypeFor[Duration]() {
			return
		}
		fields := map[string]reflect.Type{}
		for i := range t.NumField() {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
			if name != "" && name != "-" {
				fields[name] = t.Field(i).Type
			}
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			ft, ok := fields[k]
			if !ok {
				*out = append(*out, strconv.Quote(p))
				continue
			}
			walkUnknown(v[k], ft, p, out)
		}
	case []any:
		if t.Kind() != reflect.Slice {
			return
		}
		for i, e := range v {
			walkUnknown(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i), out)
		}
	}
}

// Default fills every zero field with its default.
func (s *Scenario) Default() {
	if s.Publisher == "" {
		s.Publisher = DefaultPublisher
	}
	if s.TimeScale == 0 {
		s.TimeScale = DefaultTimeScale
	}
	if s.CapacityWindow.Duration == 0 {
		s.CapacityWindow.Duration = DefaultCapacityWindow
	}
	l := &s.Load
	if l.SessionCalls == (IntRange{}) {
		l.SessionCalls = IntRange{Min: DefaultSessionMin, Max: DefaultSessionMax}
	}
	if l.Deadline.Duration == 0 {
		l.Deadline.Duration = DefaultDeadline
	}
	if l.InputTokens == 0 {
		l.InputTokens = DefaultInputTokens
	}
	if l.OutputTokens == 0 {
		l.OutputTokens = DefaultOutputTokens
	}
	for i := range s.Regions {
		r := &s.Regions[i]
		if r.Provisioned != nil && r.Provisioned.Mode == "" {
			r.Provisioned.Mode = ModeSpillover
		}
		if r.Latency.Distribution == "" {
			r.Latency.Distribution = Lognormal
		}
		if r.Latency.P50.Duration == 0 {
			r.Latency.P50.Duration = DefaultLatencyP50
		}
		for j := range r.Faults {
			f := &r.Faults[j]
			if f.BurstLength == 0 {
				f.BurstLength = DefaultBurstLength
			}
			if f.Code == 0 && f.ErrorRate > 0 {
				f.Code = DefaultFaultCode
			}
		}
	}
}

var (
	namePattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)
	// modelPattern is namePattern with a partner model's version after an
	// @ (claude-sonnet-4-5@20250929), as the RegionPool API allows.
	modelPattern    = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.@]*[a-z0-9])?$`)
	locationPattern = regexp.MustCompile(`^[a-z]+(-[a-z]+)*[0-9]+$|^global$|^eu$|^us$`)
)

// Validate checks a defaulted scenario. The error names the field at fault.
func (s *Scenario) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if s.Name == "" {
		bad("name", "required")
	}
	if !namePattern.MatchString(s.Project) {
		bad("project", "must be a GCP project ID, got %q", s.Project)
	}
	if !namePattern.MatchString(s.Publisher) {
		bad("publisher", "must be a publisher name such as google, got %q", s.Publisher)
	}
	if !modelPattern.MatchString(s.Model) {
		bad("model", "must be a model ID such as gemini-3.6-flash, got %q", s.Model)
	}
	if s.Duration.Duration <= 0 {
		bad("duration", "must be positive, got %s", s.Duration)
	}
	if s.TimeScale <= 0 || math.IsInf(s.TimeScale, 0) || math.IsNaN(s.TimeScale) {
		bad("timeScale", "must be positive, got %v", s.TimeScale)
	}
	if s.CapacityWindow.Duration < 10*time.Millisecond {
		bad("capacityWindow", "must be at least 10ms, got %s", s.CapacityWindow)
	}
	s.Load.validate(bad)
	if len(s.Regions) == 0 {
		bad("regions", "at least one region is required")
	}
	seen := map[string]int{}
	for i, r := range s.Regions {
		f := fmt.Sprintf("regions[%d]", i)
		if j, dup := seen[r.Name]; dup {
			bad(f+".name", "duplicate region %q (also regions[%d])", r.Name, j)
		}
		seen[r.Name] = i
		r.validate(f, s.CapacityWindow.Duration, bad)
	}
	return errors.Join(errs...)
}

func (l *Load) validate(bad func(field, format string, args ...any)) {
	if l.RequestsPerSecond <= 0 {
		bad("load.requestsPerSecond", "must be positive, got %v", l.RequestsPerSecond)
	}
	if l.SessionCalls.Min < 1 || l.SessionCalls.Max < l.SessionCalls.Min {
		bad("load.sessionCalls", "need 1 <= min <= max, got %d..%d", l.SessionCalls.Min, l.SessionCalls.Max)
	}
	if l.Deadline.Duration <= 0 {
		bad("load.deadline", "must be positive, got %s", l.Deadline)
	}
	if l.InputTokens < 0 {
		bad("load.inputTokens", "must not be negative, got %d", l.InputTokens)
	}
	if l.OutputTokens < 0 {
		bad("load.outputTokens", "must not be negative, got %d", l.OutputTokens)
	}
	pm := l.Priorities
	for name, v := range map[string]float64{"critical": pm.Critical, "sheddable": pm.Sheddable} {
		if !isShare(v) {
			bad("load.priorities."+name, "must be a share in [0, 1], got %v", v)
		}
	}
	if !isShare(l.StreamShare) {
		bad("load.streamShare", "must be a share in [0, 1], got %v", l.StreamShare)
	}
	if pm.Critical+pm.Sheddable > 1 {
		bad("load.priorities", "critical and sheddable shares add up to %v, more than 1", pm.Critical+pm.Sheddable)
	}
	for i, p := range l.Phases {
		f := fmt.Sprintf("load.phases[%d]", i)
		if p.From.Duration < 0 || p.To.Duration <= p.From.Duration {
			bad(f, "need 0 <= from < to, got from %s to %s", p.From, p.To)
		}
		if p.Multiplier < 0 {
			bad(f+".multiplier", "must not be negative, got %v", p.Multiplier)
		}
	}
}

func (r *Region) validate(f string, window time.Duration, bad func(field, format string, args ...any)) {
	if !locationPattern.MatchString(r.Name) {
		bad(f+".name", "must be a Vertex AI location such as europe-west1, got %q", r.Name)
	}
	validCapacity(f+".capacity", r.Capacity, window, bad)
	for name, c := range map[string]*Capacity{"priority": r.Priority, "flex": r.Flex} {
		if c == nil {
			continue
		}
		validCapacity(f+"."+name, *c, window, bad)
		if c.IsZero() {
			bad(f+"."+name, "needs requestsPerSecond or tokensPerSecond")
		}
	}
	switch r.Tier {
	case table.TierShared:
		if r.Provisioned != nil {
			bad(f+".provisioned", "only a provisioned region holds Provisioned Throughput")
		}
		if r.Capacity.IsZero() {
			bad(f+".capacity", "a shared region needs requestsPerSecond or tokensPerSecond")
		}
	case table.TierProvisioned:
		p := r.Provisioned
		if p == nil {
			bad(f+".provisioned", "required for a provisioned region")
			break
		}
		if p.GSUs <= 0 {
			bad(f+".provisioned.gsus", "must be positive, got %d", p.GSUs)
		}
		if p.TokensPerSecond <= 0 {
			bad(f+".provisioned.tokensPerSecond", "must be positive, got %v", p.TokensPerSecond)
		}
		if p.Window.Duration < 0 || (p.Window.Duration > 0 && p.Window.Duration < 10*time.Millisecond) {
			bad(f+".provisioned.window", "must be at least 10ms, got %s", p.Window)
		}
		validCapacity(f+".provisioned", p.Capacity(), p.EnforcedWindow(), bad)
		if p.Mode != ModeSpillover && p.Mode != ModeDedicated {
			bad(f+".provisioned.mode", "must be spillover or dedicated, got %q", p.Mode)
		}
	default:
		bad(f+".tier", "must be provisioned or shared, got %q", r.Tier)
	}
	switch r.Latency.Distribution {
	case Lognormal, Fixed:
	default:
		bad(f+".latency.distribution", "must be lognormal or fixed, got %q", r.Latency.Distribution)
	}
	if r.Latency.P50.Duration <= 0 {
		bad(f+".latency.p50", "must be positive, got %s", r.Latency.P50)
	}
	if r.Latency.P99.Duration != 0 && r.Latency.P99.Duration < r.Latency.P50.Duration {
		bad(f+".latency.p99", "must be at least p50 (%s), got %s", r.Latency.P50, r.Latency.P99)
	}
	for j, ft := range r.Faults {
		ft.validate(fmt.Sprintf("%s.faults[%d]", f, j), bad)
	}
}

// validCapacity refuses negative rates and rates too small to admit one call
// per capacity window.
func validCapacity(f string, c Capacity, window time.Duration, bad func(field, format string, args ...any)) {
	if c.RequestsPerSecond < 0 {
		bad(f+".requestsPerSecond", "must not be negative, got %v", c.RequestsPerSecond)
	} else if c.RequestsPerSecond > 0 && c.RequestsPerSecond*window.Seconds() < 1 {
		bad(f+".requestsPerSecond", "%v per second admits no call in a %s capacity window", c.RequestsPerSecond, window)
	}
	if c.TokensPerSecond < 0 {
		bad(f+".tokensPerSecond", "must not be negative, got %v", c.TokensPerSecond)
	}
}

func (ft *Fault) validate(f string, bad func(field, format string, args ...any)) {
	if ft.From.Duration < 0 || ft.To.Duration <= ft.From.Duration {
		bad(f, "need 0 <= from < to, got from %s to %s", ft.From, ft.To)
	}
	if !isShare(ft.ErrorRate) {
		bad(f+".errorRate", "must be in [0, 1], got %v", ft.ErrorRate)
	}
	if ft.ErrorRate > 0 {
		if _, ok := faultCodes[ft.Code]; !ok {
			bad(f+".code", "must be 404, 429, 500, 503 or 504, got %d", ft.Code)
		}
	} else if ft.Code != 0 {
		bad(f+".code", "set without an errorRate")
	}
	if ft.BreaksStreams && (ft.ErrorRate == 0 || ft.Code == 429) {
		bad(f+".breaksStreams", "needs an errorRate of a code other than 429: a call over quota is refused before the model runs")
	}
	if ft.BurstLength < 1 {
		bad(f+".burstLength", "must be at least 1, got %d", ft.BurstLength)
	}
	if ft.AddedLatency.Duration < 0 || ft.AddedLatencyEnd.Duration < 0 {
		bad(f+".addedLatency", "must not be negative")
	}
	switch ft.Outage {
	case "", OutageRefused, OutageUnavailable:
	default:
		bad(f+".outage", "must be refused or unavailable, got %q", ft.Outage)
	}
	if ft.Outage != "" && ft.ErrorRate > 0 {
		bad(f+".outage", "an outage fails every call; leave errorRate unset")
	}
	if ft.Outage == "" && ft.ErrorRate == 0 && ft.AddedLatency.Duration == 0 && ft.AddedLatencyEnd.Duration == 0 {
		bad(f, "does nothing: set errorRate, addedLatency or outage")
	}
}

// RateAt is the load's arrival rate at scenario time t: the base rate times
// every phase active at t.
func (l *Load) RateAt(t time.Duration) float64 {
	r := l.RequestsPerSecond
	for _, p := range l.Phases {
		if t >= p.From.Duration && t < p.To.Duration {
			r *= p.Multiplier
		}
	}
	return r
}

// TokensPerCall is what one typical call consumes: input plus output tokens.
func (l *Load) TokensPerCall() int { return l.InputTokens + l.OutputTokens }

// Region returns the region with the given name, or nil.
func (s *Scenario) Region(name string) *Region {
	for i := range s.Regions {
		if s.Regions[i].Name == name {
			return &s.Regions[i]
		}
	}
	return nil
}

// ModelName is the model's resource name in a region:
// projects/{p}/locations/{region}/publishers/{pub}/models/{m}.
func (s *Scenario) ModelName(region string) string {
	return "projects/" + s.Project + "/locations/" + region + "/publishers/" + s.Publisher + "/models/" + s.Model
}

// RequestsPerSecond is the region's capacity in calls per second of typical
// size (Load.TokensPerCall): PT plus pay-as-you-go quota, each the lower of
// its request and token limits. Zero means the region has no limit.
func (s *Scenario) RequestsPerSecond(r *Region) float64 { return s.callsPerSecond(r, false) }

// WholeRequestsPerSecond is RequestsPerSecond as the region's quotas count
// it: each capacity grants the whole calls of typical size that fit its
// window (CapacityWindow for pay-as-you-go, EnforcedWindow for the PT), so a
// quota of 1.86 calls a second over one second grants one call in any
// second. Zero for a region with no limit, and for one whose capacities
// grant no whole call a window: RequestsPerSecond tells them apart.
func (s *Scenario) WholeRequestsPerSecond(r *Region) float64 { return s.callsPerSecond(r, true) }

// callsPerSecond is RequestsPerSecond, in whole calls a window if whole.
func (s *Scenario) callsPerSecond(r *Region, whole bool) float64 {
	perCall := float64(s.Load.TokensPerCall())
	calls := func(c Capacity, window time.Duration) float64 {
		v := math.Inf(1)
		if c.RequestsPerSecond > 0 {
			v = c.RequestsPerSecond
		}
		if c.TokensPerSecond > 0 && perCall > 0 {
			v = math.Min(v, c.TokensPerSecond/perCall)
		}
		if w := window.Seconds(); whole && w > 0 && !math.IsInf(v, 1) {
			// The epsilon keeps a capacity that is a whole number of
			// calls a window (10 a second over a second) from losing
			// one to rounding.
			v = math.Floor(v*w+1e-9) / w
		}
		return v
	}
	total := 0.0
	if !r.Capacity.IsZero() {
		total += calls(r.Capacity, s.CapacityWindow.Duration)
	}
	if p := r.Provisioned; p != nil {
		total += calls(p.Capacity(), p.EnforcedWindow())
	}
	if math.IsInf(total, 0) {
		return 0
	}
	return total
}

// isShare reports whether v is a share: in [0, 1], and not NaN (which fails
// both comparisons).
func isShare(v float64) bool { return v >= 0 && v <= 1 }
