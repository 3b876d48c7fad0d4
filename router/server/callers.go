package server

import (
	"context"
	"errors"
	"net/http"

	"google.golang.org/grpc/codes"

	"github.com/regionwarden/regionwarden/router/auth"
	"github.com/regionwarden/regionwarden/router/policy"
	"github.com/regionwarden/regionwarden/router/table"
)

// authorize decides who the call is from, given the Authorization its caller
// presented, and lowers the call's priority to what the pool lets that
// caller claim. It runs once the pool is known and before the call is
// admitted or its body read, so a caller the pool refuses costs neither a
// place in the pool nor the memory of its body. A refusal is counted and
// returned as the answer to give.
func (c *call) authorize(ctx context.Context, authorization string) *auth.Error {
	c.caller = authorization
	if c.s.auth == nil {
		return nil
	}
	who, refused := c.s.authenticate(ctx, authorization, c.pool)
	if refused != nil {
		return refused
	}
	c.who = who
	c.prio = capPriority(c.prio, who)
	if who.Namespace != "" {
		c.s.metrics.Caller(c.pool.label, who.Namespace)
	}
	return nil
}

// authenticate asks the Authenticator who presented authorization to pool,
// and counts a refusal; an error that is not a refusal is an internal one.
// s.auth is set.
func (s *Server) authenticate(ctx context.Context, authorization string, pool *poolEntry) (auth.Caller, *auth.Error) {
	who, err := s.auth.Authenticate(ctx, authorization, &pool.table)
	if err == nil {
		return who, nil
	}
	var refused *auth.Error
	if !errors.As(err, &refused) {
		refused = &auth.Error{Status: http.StatusInternalServerError, Code: codes.Internal, Message: err.Error()}
	}
	s.metrics.CallerRefused(pool.label, refused.Reason())
	return auth.Caller{}, refused
}

// capPriority is pr lowered to the caller's ceiling. The policy's priorities
// and the table's have the same names.
func capPriority(pr policy.Priority, who auth.Caller) policy.Priority {
	switch who.Priority(table.Priority(pr.String())) {
	case table.PriorityCritical:
		return policy.PriorityCritical
	case table.PrioritySheddable:
		return policy.PrioritySheddable
	}
	return policy.PriorityDefault
}
