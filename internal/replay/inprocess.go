package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	aiplatform "cloud.google.com/go/aiplatform/apiv1"
	"cloud.google.com/go/aiplatform/apiv1/aiplatformpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/regionwarden/regionwarden/router/policy"
	"github.com/regionwarden/regionwarden/router/table"
	"github.com/regionwarden/regionwarden/router/upstream"
)

// Policy names, as tables and charts show them.
const (
	NameBlocklist    = "count blocklist"
	NameAllowlist    = "blocklist + PT allowlist"
	NameRegionwarden = "regionwarden (in process)"
	// NamePerSecond is regionwarden with every PT metered over one second.
	NamePerSecond = "regionwarden, PT metered per second (in process)"
	NameRouter    = "regionwarden router (end to end)"
	NamePortkey   = "Portkey gateway"
)

// Blocklist is the count blocklist the outage came from, in process.
func Blocklist() Policy {
	return InProcess(NameBlocklist, func(env *Env) (Selector, error) {
		return newBlocklist(env.Pool, env.Now, false)
	})
}

// Allowlist is the count blocklist with the six-line fix (a provisioned
// region is never removed), in process.
func Allowlist() Policy {
	return InProcess(NameAllowlist, func(env *Env) (Selector, error) {
		return newBlocklist(env.Pool, env.Now, true)
	})
}

// Regionwarden is the adaptive policy (policy.New), in process. It logs its
// demotions and restorations to env.Logf, and how its calls ended.
func Regionwarden() Policy {
	return InProcess(NameRegionwarden, func(env *Env) (Selector, error) {
		s, err := newAdaptive(env.Pool, env)
		if err != nil || env.Logf == nil {
			return s, err
		}
		return tallySelector{Selector: s, name: NameRegionwarden, t: newTally(env)}, nil
	})
}

// PerSecond is the adaptive policy with every PT metered over one second
// (policy.provisioned.window 1s) instead of the window of its size: the
// column that shows what the window is worth.
func PerSecond() Policy {
	return InProcess(NamePerSecond, func(env *Env) (Selector, error) {
		tp := env.Pool
		tp.Policy.Provisioned.Window = table.Duration{Duration: time.Second}
		return newAdaptive(tp, env)
	})
}

// newAdaptive is the adaptive policy for pool tp on the replay's clock.
func newAdaptive(tp table.Pool, env *Env) (Selector, error) {
	p, err := policy.New(tp, policy.Options{Now: env.Now, Seed: env.Seed, Logger: env.logger()})
	if err != nil {
		return nil, err
	}
	return adaptive{p, env.Clock.Sleep}, nil
}

// Selector is a region-selection policy that the replay drives in process:
// the adaptive policy (through a small adapter) or a baseline.
type Selector interface {
	// Start begins a call of priority pr that must end by deadline, on the
	// policy's clock.
	Start(deadline time.Time, pr table.Priority) Selection
}

// Selection picks the regions of one call's attempts, one at a time.
type Selection interface {
	// Pick returns the next attempt, or the policy's refusal of one.
	Pick() (Attempt, error)
	// Attempts is how many attempts the call picked.
	Attempts() int
}

// Attempt is one attempt a policy picked.
type Attempt struct {
	// Region is the region to call; Tier and PayGo the capacity to ask for
	// (policy.Attempt).
	Region string
	Tier   table.Tier
	PayGo  table.PayGoTier
	// Done reports how the attempt went; it must be called exactly once.
	Done func(policy.Report)
	// Heard, when set, tells the policy that the region is answering: a
	// stream's chunk arrived (policy.Attempt.Heard, as the router calls it).
	Heard func()
}

// adaptive is the adaptive policy as a Selector, its calls waiting for
// headroom as the router's do (policy.Call.PickWaiting), on the replay's
// clock.
type adaptive struct {
	p     *policy.Pool
	sleep func(context.Context, time.Duration) error
}

func (a adaptive) Start(deadline time.Time, pr table.Priority) Selection {
	c := &adaptiveCall{sleep: a.sleep}
	c.c = a.p.Start(policy.Request{Deadline: deadline, Priority: policyPriority(pr)})
	return c
}

// policyPriority is pr as the policy orders calls; default for any other.
func policyPriority(pr table.Priority) policy.Priority {
	switch pr {
	case table.PriorityCritical:
		return policy.PriorityCritical
	case table.PrioritySheddable:
		return policy.PrioritySheddable
	}
	return policy.PriorityDefault
}

// adaptiveCall is one call under the adaptive policy.
type adaptiveCall struct {
	c     policy.Call
	sleep func(context.Context, time.Duration) error
}

// Pick picks the next attempt, waiting for headroom as the router does. The
// wait is bounded (policy.MaxHeadroomWait and the call's deadline), so it
// needs no context of its own.
func (c *adaptiveCall) Pick() (Attempt, error) {
	a, err := c.c.PickWaiting(context.Background(), c.sleep)
	if err != nil {
		return Attempt{}, err
	}
	return Attempt{Region: a.Region, Tier: a.Tier, PayGo: a.PayGo, Done: func(r policy.Report) { a.Finish(r) }, Heard: a.Heard}, nil
}

func (c *adaptiveCall) Attempts() int { return c.c.Attempts() }

// InProcess is a policy driven in this process: one aiplatform
// PredictionClient per region over insecure gRPC, the policy made by
// newRouter on the scenario clock with the replay's seed.
func InProcess(name string, newRouter func(env *Env) (Selector, error)) Policy {
	return Policy{Name: name, Start: func(ctx context.Context, env *Env) (Caller, error) {
		r, err := newRouter(env)
		if err != nil {
			return nil, err
		}
		c := &routerCaller{env: env, r: r, clients: map[string]*aiplatform.PredictionClient{}, reqs: map[string]*aiplatformpb.GenerateContentRequest{}}
		for _, addr := range env.Regions {
			conn, err := dialReady(ctx, addr.GRPC, env.Clock.Real)
			if err != nil {
				_ = c.Close()
				return nil, fmt.Errorf("region %s at %s: %w", addr.Name, addr.GRPC, err)
			}
			pc, err := aiplatform.NewPredictionClient(ctx, option.WithGRPCConn(conn))
			if err != nil {
				_ = conn.Close()
				_ = c.Close()
				return nil, fmt.Errorf("region %s at %s: %w", addr.Name, addr.GRPC, err)
			}
			c.clients[addr.Name] = pc
			c.reqs[addr.Name] = &aiplatformpb.GenerateContentRequest{
				Model: env.Scenario.ModelName(addr.Name),
				Contents: []*aiplatformpb.Content{{
					Role:  "user",
					Parts: []*aiplatformpb.Part{{Data: &aiplatformpb.Part_Text{Text: env.Prompt}}},
				}},
			}
		}
		return c, nil
	}}
}

// dialReady opens an insecure gRPC connection and waits until it is ready,
// so that the replay's first calls do not wait for connections and then
// arrive in a burst. The aiplatform client closes it. It connects again
// after a refusal as the router does, on the scenario's clock (toReal turns
// a scenario duration into real time): at the router's real-time pace, a
// replay at scale 10 would find a region back up to ten scenario seconds
// after it stopped refusing connections, its probes failing in this
// process meanwhile, where the router finds it within one.
func dialReady(ctx context.Context, addr string, toReal func(time.Duration) time.Duration) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), upstream.ReconnectOn(toReal))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn.Connect()
	for st := conn.GetState(); st != connectivity.Ready; st = conn.GetState() {
		if !conn.WaitForStateChange(ctx, st) {
			_ = conn.Close()
			return nil, fmt.Errorf("connection not ready: %w", ctx.Err())
		}
	}
	return conn, nil
}

// routerCaller drives a Selector: pick, call the region, report.
type routerCaller struct {
	env     *Env
	r       Selector
	clients map[string]*aiplatform.PredictionClient
	reqs    map[string]*aiplatformpb.GenerateContentRequest
}

// Call makes attempts as the policy picks them until one succeeds or the
// policy refuses another, within one deadline. A stream is retried only
// while none of its chunks has arrived, as the router does: from its first
// chunk the caller has part of the answer.
func (c *routerCaller) Call(caller context.Context, lc LoadCall) CallResult {
	ctx, cancel := context.WithTimeout(caller, c.env.Clock.Real(lc.Deadline))
	defer cancel()
	call := c.r.Start(c.env.Now().Add(lc.Deadline), lc.Priority)
	last := Other
	for {
		a, err := call.Pick()
		if err != nil {
			return CallResult{Err: pickError(err, last, call.Attempts())}
		}
		actx := ctx
		rt, srt := c.env.Pool.Policy.Provisioned.Headers(a.Tier, a.PayGo)
		if rt != "" {
			actx = metadata.AppendToOutgoingContext(actx, upstream.RequestTypeHeader, rt)
		}
		if srt != "" {
			actx = metadata.AppendToOutgoingContext(actx, upstream.SharedRequestTypeHeader, srt)
		}
		var usage *aiplatformpb.GenerateContentResponse_UsageMetadata
		var started bool
		if lc.Stream {
			usage, started, err = c.stream(actx, a)
		} else {
			var resp *aiplatformpb.GenerateContentResponse
			resp, err = c.clients[a.Region].GenerateContent(actx, c.reqs[a.Region])
			usage = resp.GetUsageMetadata()
		}
		// What the policy learns, as the router tells it: read on the caller's
		// own context, so the call's deadline (standing for the router's
		// request timeout) running out is the region being slow. The
		// replay's calls carry no credentials.
		rep := upstream.Report(caller, err, false, c.env.Pool.Key())
		rep.Tokens = int64(usage.GetTotalTokenCount())
		a.Done(rep)
		switch rep.Outcome {
		case policy.Success:
			return served(usage.GetTrafficType().String())
		case policy.Capacity, policy.ProvisionedFull:
			last = Throttled
		case policy.Failure:
			last = Failed
			if rep.Timeout {
				last = Timeout
			}
		default:
			return CallResult{Err: Other}
		}
		if ctx.Err() != nil {
			return CallResult{Err: Timeout}
		}
		if started {
			return CallResult{Err: last}
		}
	}
}

// stream makes attempt a as a streamGenerateContent call and reads it to
// its end. It returns the usage the chunks reported (the traffic type from
// any, the tokens from the last that counts them), whether any chunk
// arrived, and the error the stream ended with.
func (c *routerCaller) stream(ctx context.Context, a Attempt) (*aiplatformpb.GenerateContentResponse_UsageMetadata, bool, error) {
	st, err := c.clients[a.Region].StreamGenerateContent(ctx, c.reqs[a.Region])
	if err != nil {
		return nil, false, err
	}
	usage := &aiplatformpb.GenerateContentResponse_UsageMetadata{}
	started := false
	for {
		m, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return usage, started, nil
		}
		if err != nil {
			return usage, started, err
		}
		started = true
		if a.Heard != nil {
			a.Heard()
		}
		u := m.GetUsageMetadata()
		if t := u.GetTrafficType(); t != aiplatformpb.GenerateContentResponse_UsageMetadata_TRAFFIC_TYPE_UNSPECIFIED {
			usage.TrafficType = t
		}
		if n := u.GetTotalTokenCount(); n > 0 {
			usage.TotalTokenCount = n
		}
	}
}

// Close closes the region clients, and the selector if it holds resources
// of its own (io.Closer).
func (c *routerCaller) Close() error {
	var errs []error
	if cl, ok := c.r.(io.Closer); ok {
		errs = append(errs, cl.Close())
	}
	for _, pc := range c.clients {
		errs = append(errs, pc.Close())
	}
	return errors.Join(errs...)
}

// pickError is what the caller of a call sees when the policy refuses an
// attempt, as the router answers it (router/server's call.refusal answers
// only a refusal before any attempt): the blocklist baseline's "no regions",
// which that client raises whatever it tried before; else, once an attempt
// was made, that attempt's failure, whatever the policy refused the retry
// for (retries or budget spent, the deadline, or no room left: a retry
// refused for want of room is not a call shed, the caller is told what the
// region said); else the policy's refusal of the call itself.
func pickError(err error, last ErrorKind, attempts int) ErrorKind {
	switch {
	case errors.Is(err, ErrNoRegions):
		return NoRegions
	case attempts > 0:
		return last
	case errors.Is(err, policy.ErrOverCapacity), errors.Is(err, policy.ErrShed):
		return Shed
	case errors.Is(err, policy.ErrDeadlineExceeded):
		return Timeout
	default:
		return Other
	}
}
