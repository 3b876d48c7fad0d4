package replay

import (
	"context"
	"errors"
	"fmt"
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
	NameRouter       = "regionwarden router (end to end)"
	NamePortkey      = "Portkey gateway"
)

// Blocklist is the count blocklist the outage came from, in process.
func Blocklist() Policy {
	return InProcess(NameBlocklist, func(tp table.Pool, o policy.Options) (policy.Router, error) {
		return policy.NewBlocklist(tp, o)
	})
}

// Allowlist is the count blocklist with the six-line fix (a provisioned
// region is never removed), in process.
func Allowlist() Policy {
	return InProcess(NameAllowlist, func(tp table.Pool, o policy.Options) (policy.Router, error) {
		return policy.NewAllowlist(tp, o)
	})
}

// Regionwarden is the adaptive policy (policy.New), in process.
func Regionwarden() Policy {
	return InProcess(NameRegionwarden, func(tp table.Pool, o policy.Options) (policy.Router, error) {
		return policy.New(tp, o)
	})
}

// InProcess is a policy from router/policy driven in this process: one
// aiplatform PredictionClient per region over insecure gRPC, the policy's
// clock the scenario clock, its seed the replay's.
func InProcess(name string, newRouter func(table.Pool, policy.Options) (policy.Router, error)) Policy {
	return Policy{Name: name, Start: func(ctx context.Context, env *Env) (Caller, error) {
		r, err := newRouter(env.Pool, policy.Options{Now: env.Now, Seed: env.Seed})
		if err != nil {
			return nil, err
		}
		c := &routerCaller{env: env, r: r, clients: map[string]*aiplatform.PredictionClient{}, reqs: map[string]*aiplatformpb.GenerateContentRequest{}}
		for _, addr := range env.Regions {
			conn, err := dialReady(ctx, addr.GRPC)
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
// arrive in a burst. The aiplatform client closes it.
func dialReady(ctx context.Context, addr string) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
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

// routerCaller drives a policy.Router: pick, call the region, report.
type routerCaller struct {
	env     *Env
	r       policy.Router
	clients map[string]*aiplatform.PredictionClient
	reqs    map[string]*aiplatformpb.GenerateContentRequest
}

// Call makes attempts as the policy picks them until one succeeds or the
// policy refuses another, within one deadline.
func (c *routerCaller) Call(caller context.Context, deadline time.Duration) CallResult {
	ctx, cancel := context.WithTimeout(caller, c.env.Clock.Real(deadline))
	defer cancel()
	call := c.r.Start(policy.Request{Deadline: c.env.Now().Add(deadline)})
	last := Other
	for {
		a, err := call.Pick()
		if err != nil {
			return CallResult{Err: pickError(err, last, call.Attempts())}
		}
		actx := ctx
		if a.RequestType != "" {
			actx = metadata.AppendToOutgoingContext(ctx, upstream.RequestTypeHeader, a.RequestType)
		}
		resp, err := c.clients[a.Region].GenerateContent(actx, c.reqs[a.Region])
		// What the policy learns, as the router tells it: read on the caller's
		// own context, so the call's deadline (standing for the router's
		// request timeout) running out is the region being slow.
		rep := upstream.Report(caller, err)
		rep.Tokens = int64(resp.GetUsageMetadata().GetTotalTokenCount())
		a.Finish(rep)
		switch rep.Outcome {
		case policy.Success:
			pt := resp.GetUsageMetadata().GetTrafficType() == aiplatformpb.GenerateContentResponse_UsageMetadata_PROVISIONED_THROUGHPUT
			return CallResult{Provisioned: pt}
		case policy.Capacity:
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
	}
}

// Close closes the region clients.
func (c *routerCaller) Close() error {
	var errs []error
	for _, pc := range c.clients {
		errs = append(errs, pc.Close())
	}
	return errors.Join(errs...)
}

// pickError is what the caller of a call sees when the policy refuses an
// attempt: its own refusal for "no regions" and shedding, else the last
// attempt's failure (retries exhausted, budget spent, deadline).
func pickError(err error, last ErrorKind, attempts int) ErrorKind {
	switch {
	case errors.Is(err, policy.ErrNoRegions):
		return NoRegions
	case errors.Is(err, policy.ErrOverCapacity), errors.Is(err, policy.ErrShed):
		return Shed
	case attempts > 0:
		return last
	case errors.Is(err, policy.ErrDeadlineExceeded):
		return Timeout
	default:
		return Other
	}
}
