package emulator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/aiplatform/apiv1/aiplatformpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/regionwarden/regionwarden/internal/googleerror"
)

// Request types, as the x-vertex-ai-llm-request-type header spells them.
const (
	RequestTypeDedicated = "dedicated"
	RequestTypeShared    = "shared"
)

// Headers that pick the capacity of a call, as Google's "Use Provisioned
// Throughput", "Priority PayGo" and "Flex PayGo" pages name them; over gRPC
// they travel as metadata in lower case. HeaderRequestType picks PT or
// pay-as-you-go; HeaderSharedRequestType the pay-as-you-go tier.
const (
	HeaderRequestType       = "X-Vertex-AI-LLM-Request-Type"
	HeaderSharedRequestType = "X-Vertex-AI-LLM-Shared-Request-Type"
)

// Pay-as-you-go tiers, as HeaderSharedRequestType spells them; standard has
// no header.
const (
	TierStandard = "standard"
	TierPriority = "priority"
	TierFlex     = "flex"
)

// FullProvisioned is the capacity RegionStats.Full counts a PT's 429s
// under ("Exceeded the Provisioned Throughput"); the pay-as-you-go tiers'
// are counted under their names.
const FullProvisioned = "provisioned"

// Usage kinds: which capacity served a call, as Cloud Monitoring's
// request_type label spells them.
const (
	usageDedicated = "dedicated" // PT
	usageSpillover = "spillover" // beyond the PT, on pay-as-you-go
	usageShared    = "shared"    // pay-as-you-go, asked for
)

// Outcome names used in the counters, beside gRPC's canonical code names.
const (
	outcomeRefused = "CONNECTION_REFUSED"
)

// Messages the real service answers with, near enough for clients that match
// on them. Google's "Error code 429" page gives the two 429s: pay-as-you-go
// "Resource exhausted, please try again later." (as regions write it, with
// a pointer to the page) and Provisioned Throughput "Too many requests.
// Exceeded the Provisioned Throughput.".
const (
	msgResourceExhausted = "Resource exhausted. Please try again later. Please refer to https://cloud.google.com/vertex-ai/generative-ai/docs/error-code-429 for more details."
	msgExceededPT        = "Too many requests. Exceeded the Provisioned Throughput."
	msgNoPT              = "Too many requests. Exceeded the Provisioned Throughput: there is no Provisioned Throughput at this location."
	msgDeadline          = "Deadline expired before operation could complete."
	msgUnavailable       = "The service is currently unavailable."
	msgInternal          = "Internal error encountered."
	msgRefused           = "connection refused"
	// msgModelNotFound is Google's answer for a model the location does not
	// serve to the project: its project, location, publisher and model.
	msgModelNotFound = "Publisher Model `projects/%s/locations/%s/publishers/%s/models/%s` was not found or your project does not have access to it. Please ensure you are using a valid model version. For more information, see: https://cloud.google.com/vertex-ai/generative-ai/docs/learn/model-versions"
)

// apiError is a call's failure, in terms both surfaces can render.
type apiError struct {
	code    codes.Code
	msg     string
	refused bool // drop the connection instead of answering
}

func (e *apiError) Error() string { return googleerror.StatusName(e.code) + ": " + e.msg }

// grpcErr is the error a gRPC handler returns.
func (e *apiError) grpcErr() error { return status.Error(e.code, e.msg) }

// outcome is the counters' name for the failure.
func (e *apiError) outcome() string {
	if e.refused {
		return outcomeRefused
	}
	return googleerror.StatusName(e.code)
}

// second is one second of scenario time in a region's histogram.
type second struct {
	requests, served, throttled, failed, cancelled int64
	ptFull                                         int64              // of throttled: the PT's window was full (SecondStats.PTFull)
	tokens                                         map[string]float64 // by usage kind
}

// faultState is a fault window and its failure process.
type faultState struct {
	f    *Fault
	proc *burstProcess
}

// region is one emulated region's behavior, shared by its gRPC and REST
// surfaces. Every decision about a call is taken under mu, so decisions
// follow arrival order.
type region struct {
	sc    *Scenario
	cfg   *Region
	clock Clock

	mu        sync.Mutex
	pt        *quota // nil without PT
	payg      *quota
	priority  *quota // nil: Priority PayGo not offered here
	flex      *quota // nil: Flex PayGo not offered here
	faults    []faultState
	latency   *latencySampler
	seconds   []second
	byCode    map[string]int64
	byTraffic map[string]int64
	byUsage   map[string]int64
	tokens    map[string]int64 // by traffic type
	full      map[string]int64 // 429s by the capacity that was full
	seq       int64

	// listeners are dropped while a refused outage lasts; set by Start.
	listeners []*dropListener

	caches caches // the context caches made here (caches.go)
}

func newRegion(sc *Scenario, cfg *Region, clock Clock, seed uint64) *region {
	r := &region{
		sc:        sc,
		cfg:       cfg,
		clock:     clock,
		payg:      newQuota(cfg.Capacity, sc.CapacityWindow.Duration),
		latency:   newLatencySampler(cfg.Latency, streamSeed(seed, cfg.Name, "latency")),
		byCode:    map[string]int64{},
		byTraffic: map[string]int64{},
		byUsage:   map[string]int64{},
		tokens:    map[string]int64{},
		full:      map[string]int64{},
	}
	if p := cfg.Provisioned; p != nil {
		r.pt = newQuota(p.Capacity(), p.EnforcedWindow())
	}
	if c := cfg.Priority; c != nil {
		r.priority = newQuota(*c, sc.CapacityWindow.Duration)
	}
	if c := cfg.Flex; c != nil {
		r.flex = newQuota(*c, sc.CapacityWindow.Duration)
	}
	for i := range cfg.Faults {
		f := &cfg.Faults[i]
		r.faults = append(r.faults, faultState{
			f:    f,
			proc: newBurstProcess(f.ErrorRate, f.BurstLength, streamSeed(seed, cfg.Name, "fault", fmt.Sprint(i))),
		})
	}
	return r
}

// call is what a region needs to know about one generate call.
type call struct {
	requestType  string // "", dedicated or shared
	tier         string // the pay-as-you-go tier: standard, priority or flex
	inputTokens  int
	outputTokens int
}

// admission is a region's decision about one call.
type admission struct {
	err     *apiError // nil: serve it
	traffic aiplatformpb.GenerateContentResponse_UsageMetadata_TrafficType
	usage   string
	latency time.Duration // scenario time to wait before answering (or failing)
	sec     int
	id      int64
	// done says begin already counted the outcome: answer err at once.
	done bool
	// full is the capacity whose quota refused the call (a 429): the PT
	// (FullProvisioned) or a pay-as-you-go tier; empty otherwise.
	full string
	// q is the quota that admitted the call; nil: none did.
	q *quota
	// midStream says err, a fault's, breaks a stream off after its first
	// chunk (Fault.BreaksStreams) instead of failing it before.
	midStream bool
}

// refusing reports whether a refused outage is active now.
func (r *region) refusing() bool {
	t := r.clock.Elapsed()
	for _, fs := range r.faults {
		if fs.f.Outage == OutageRefused && fs.f.Active(t) {
			return true
		}
	}
	return false
}

// outage is what every call gets while an outage is active at t: the first
// active outage's error, or nil when there is none.
func (r *region) outage(t time.Duration) *apiError {
	for _, fs := range r.faults {
		if fs.f.Outage == "" || !fs.f.Active(t) {
			continue
		}
		if fs.f.Outage == OutageRefused {
			return &apiError{code: codes.Unavailable, msg: msgRefused, refused: true}
		}
		return &apiError{code: codes.Unavailable, msg: msgUnavailable}
	}
	return nil
}

// secondAt returns the histogram entry for scenario second i, growing it.
// Caller must hold r.mu.
func (r *region) secondAt(i int) *second {
	for len(r.seconds) <= i {
		r.seconds = append(r.seconds, second{})
	}
	return &r.seconds[i]
}

// begin decides what happens to one call arriving now.
func (r *region) begin(c call) admission {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.clock.Elapsed()
	a := admission{sec: int(t / time.Second)}
	r.seq++
	a.id = r.seq
	s := r.secondAt(a.sec)
	s.requests++

	tokens := c.inputTokens + c.outputTokens
	err := r.outage(t)
	if err == nil {
		err = r.admitLocked(&a, c, t, tokens)
	}
	if err != nil {
		a.err, a.done = err, true
		r.recordLocked(a, err.outcome())
		if a.full != "" {
			r.full[a.full]++
		}
		if a.full == FullProvisioned {
			s.ptFull++
		}
		return a
	}

	a.latency = r.latency.sample()
	for _, fs := range r.faults {
		if !fs.f.Active(t) {
			continue
		}
		a.latency += fs.f.AddedLatencyAt(t)
		if a.err == nil && fs.f.ErrorRate > 0 && fs.proc.fail() {
			code := faultCodes[fs.f.Code]
			a.err = &apiError{code: code, msg: r.faultMessage(code)}
			a.midStream = fs.f.BreaksStreams
			// A 429 fault is the tier's shared capacity running out (Google's
			// dynamic shared quota), whatever the caller's own rate: counted
			// under the tier when the call was pay-as-you-go alone.
			if code == codes.ResourceExhausted && (r.pt == nil || c.requestType == RequestTypeShared) {
				r.full[c.tier]++
			}
			// A 429 refuses the call before the model runs: it takes none
			// of the capacity that admitted it. Left charged, a PT answering
			// 429 to part of its calls filled its window with the calls it
			// refused and then refused the rest as full.
			if code == codes.ResourceExhausted && a.q != nil {
				a.q.give(t, tokens)
				a.q = nil
			}
		}
	}
	if a.err != nil {
		return a
	}
	s.tokens = addTokens(s.tokens, a.usage, float64(tokens))
	r.tokens[a.traffic.String()] += int64(tokens)
	return a
}

func addTokens(m map[string]float64, k string, v float64) map[string]float64 {
	if m == nil {
		m = map[string]float64{}
	}
	m[k] += v
	return m
}

func (r *region) faultMessage(c codes.Code) string {
	switch c {
	case codes.NotFound:
		return fmt.Sprintf(msgModelNotFound, r.sc.Project, r.cfg.Name, r.sc.Publisher, r.sc.Model)
	case codes.ResourceExhausted:
		return msgResourceExhausted
	case codes.DeadlineExceeded:
		return msgDeadline
	case codes.Unavailable:
		return msgUnavailable
	default:
		return msgInternal
	}
}

// admitLocked takes capacity for the call according to its request type
// and pay-as-you-go tier, and says which traffic type serves it, as Vertex
// does: "shared" is pay-as-you-go alone, in the call's tier; "dedicated" is
// the PT alone, a 429 "Exceeded the Provisioned Throughput" beyond it; no
// request type is the PT first, then (spillover) the call's tier. Each tier
// has its own quota: standard is the region's capacity, Priority and Flex
// their own. Caller must hold r.mu.
func (r *region) admitLocked(a *admission, c call, t time.Duration, tokens int) *apiError {
	onDemand := func(usage string) *apiError {
		q, traffic := r.payg, aiplatformpb.GenerateContentResponse_UsageMetadata_ON_DEMAND
		switch c.tier {
		case TierPriority:
			q, traffic = r.priority, aiplatformpb.GenerateContentResponse_UsageMetadata_ON_DEMAND_PRIORITY
		case TierFlex:
			q, traffic = r.flex, aiplatformpb.GenerateContentResponse_UsageMetadata_ON_DEMAND_FLEX
		}
		if !q.admit(t, tokens) {
			a.full = c.tier
			return &apiError{code: codes.ResourceExhausted, msg: msgResourceExhausted}
		}
		a.traffic, a.usage, a.q = traffic, usage, q
		return nil
	}
	provisioned := func() bool {
		if r.pt != nil && r.pt.admit(t, tokens) {
			a.traffic, a.usage, a.q = aiplatformpb.GenerateContentResponse_UsageMetadata_PROVISIONED_THROUGHPUT, usageDedicated, r.pt
			return true
		}
		return false
	}
	switch c.requestType {
	case RequestTypeShared:
		return onDemand(usageShared)
	case RequestTypeDedicated:
		if r.pt == nil {
			return &apiError{code: codes.ResourceExhausted, msg: msgNoPT}
		}
		if provisioned() {
			return nil
		}
		a.full = FullProvisioned
		return &apiError{code: codes.ResourceExhausted, msg: msgExceededPT}
	default:
		if r.pt == nil {
			return onDemand(usageShared)
		}
		if provisioned() {
			return nil
		}
		if r.cfg.Provisioned.Mode == ModeDedicated {
			a.full = FullProvisioned
			return &apiError{code: codes.ResourceExhausted, msg: msgExceededPT}
		}
		return onDemand(usageSpillover)
	}
}

// wait sleeps the admission's latency, or a share of it for one stream chunk.
func (r *region) wait(ctx context.Context, d time.Duration) error {
	return r.clock.Sleep(ctx, d)
}

// finish records how an admitted call ended: err is nil on success, an
// *apiError, or a context error when the caller gave up.
func (r *region) finish(a admission, err error) {
	outcome := "OK"
	var ae *apiError
	switch {
	case err == nil:
	case errors.As(err, &ae):
		outcome = ae.outcome()
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		outcome = "CANCELLED"
	default:
		outcome = "UNKNOWN"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recordLocked(a, outcome)
	if outcome == "OK" {
		r.byTraffic[a.traffic.String()]++
		r.byUsage[a.usage]++
	}
}

// recordLocked counts an outcome in the call's arrival second.
// Caller must hold r.mu.
func (r *region) recordLocked(a admission, outcome string) {
	r.byCode[outcome]++
	s := r.secondAt(a.sec)
	switch outcome {
	case "OK":
		s.served++
	case "RESOURCE_EXHAUSTED":
		s.throttled++
	case "CANCELLED":
		s.cancelled++
	default:
		s.failed++
	}
}

// reject counts a call refused before it reached the region's capacity:
// a malformed request or a wrong model.
func (r *region) reject(e *apiError) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.byCode[e.outcome()]++
}

// checkModel validates a model resource name against the scenario and this
// region: projects/{p}/locations/{l}/publishers/{pub}/models/{m}.
func (r *region) checkModel(name string) *apiError {
	parts := strings.Split(name, "/")
	if len(parts) != 8 || parts[0] != "projects" || parts[2] != "locations" || parts[4] != "publishers" || parts[6] != "models" {
		return &apiError{code: codes.InvalidArgument, msg: fmt.Sprintf("model %q is not projects/{project}/locations/{location}/publishers/{publisher}/models/{model}", name)}
	}
	project, location, publisher, model := parts[1], parts[3], parts[5], parts[7]
	switch {
	case location != r.cfg.Name:
		return &apiError{code: codes.InvalidArgument, msg: fmt.Sprintf("Location %q does not match the endpoint's location %q.", location, r.cfg.Name)}
	case project != r.sc.Project:
		return &apiError{code: codes.PermissionDenied, msg: fmt.Sprintf("Permission denied on project %q (or it may not exist).", project)}
	case publisher != r.sc.Publisher || model != r.sc.Model:
		return &apiError{code: codes.NotFound, msg: fmt.Sprintf("Publisher Model `%s` was not found or your project does not have access to it.", name)}
	}
	return nil
}

// capacityHeaders are a call's HeaderRequestType and HeaderSharedRequestType
// values.
type capacityHeaders struct{ requestType, sharedRequestType string }

// checkRequestType validates the request-type header's value.
func checkRequestType(v string) (string, *apiError) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "":
		return "", nil
	case RequestTypeDedicated:
		return RequestTypeDedicated, nil
	case RequestTypeShared:
		return RequestTypeShared, nil
	default:
		return "", &apiError{code: codes.InvalidArgument, msg: fmt.Sprintf("%s must be dedicated or shared, got %q", HeaderRequestType, v)}
	}
}

// checkTier validates the shared-request-type header's value against what
// the region offers. A tier the region does not offer is refused: Google
// offers Priority and Flex for some models at some locations only (the
// global endpoint), and a router that asks where they are not is caught
// in tests rather than served silently.
func (r *region) checkTier(v string) (string, *apiError) {
	t := strings.ToLower(strings.TrimSpace(v))
	switch t {
	case "":
		return TierStandard, nil
	case TierPriority, TierFlex:
		if (t == TierPriority && r.priority == nil) || (t == TierFlex && r.flex == nil) {
			return "", &apiError{code: codes.InvalidArgument, msg: fmt.Sprintf("%s: %s pay-as-you-go is not offered for model %s at location %s.", HeaderSharedRequestType, t, r.sc.Model, r.cfg.Name)}
		}
		return t, nil
	default:
		return "", &apiError{code: codes.InvalidArgument, msg: fmt.Sprintf("%s must be priority or flex, got %q", HeaderSharedRequestType, v)}
	}
}

// estimateTokens counts a prompt's tokens the way a rough tokenizer does:
// one token per four characters of text, at least one.
func estimateTokens(contents []*aiplatformpb.Content, system *aiplatformpb.Content) int {
	chars := 0
	count := func(c *aiplatformpb.Content) {
		for _, p := range c.GetParts() {
			chars += len(p.GetText())
		}
	}
	for _, c := range contents {
		count(c)
	}
	if system != nil {
		count(system)
	}
	return max(1, (chars+3)/4)
}

// outputTokens is what a call generates: the scenario's output size, capped
// by the call's maxOutputTokens.
func (r *region) outputTokens(cfg *aiplatformpb.GenerationConfig) int {
	n := r.sc.Load.OutputTokens
	if m := int(cfg.GetMaxOutputTokens()); m > 0 && m < n {
		n = m
	}
	return n
}

// newCall reads a generate request: the model must be this region's, the
// request type and tier valid, and there must be contents.
func (r *region) newCall(req *aiplatformpb.GenerateContentRequest, h capacityHeaders) (call, *apiError) {
	if err := r.checkModel(req.GetModel()); err != nil {
		return call{}, err
	}
	rt, err := checkRequestType(h.requestType)
	if err != nil {
		return call{}, err
	}
	tier, err := r.checkTier(h.sharedRequestType)
	if err != nil {
		return call{}, err
	}
	if len(req.GetContents()) == 0 {
		return call{}, &apiError{code: codes.InvalidArgument, msg: "Unable to submit request because it must include at least one contents field."}
	}
	if err := r.checkCache(req.GetCachedContent()); err != nil {
		return call{}, err
	}
	return call{
		requestType:  rt,
		tier:         tier,
		inputTokens:  estimateTokens(req.GetContents(), req.GetSystemInstruction()),
		outputTokens: r.outputTokens(req.GetGenerationConfig()),
	}, nil
}
