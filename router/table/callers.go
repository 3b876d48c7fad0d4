package table

import (
	"fmt"
	"regexp"
)

// Priority is how a call asks to be treated when a pool sheds load: the
// lowest is shed first. Its values are what the router's
// X-Regionwarden-Priority header spells.
type Priority string

const (
	// PrioritySheddable is shed first.
	PrioritySheddable Priority = "sheddable"
	// PriorityDefault is an ordinary call.
	PriorityDefault Priority = "default"
	// PriorityCritical is shed last.
	PriorityCritical Priority = "critical"
)

// DefaultMaxPriority is the highest priority a caller may claim when the
// pool says nothing: "critical" is kept for callers a pool names.
const DefaultMaxPriority = PriorityDefault

// Rank orders priorities: sheddable 0, default 1, critical 2; -1 for an
// unknown one.
func (p Priority) Rank() int {
	switch p {
	case PrioritySheddable:
		return 0
	case PriorityDefault:
		return 1
	case PriorityCritical:
		return 2
	}
	return -1
}

// Cap is p lowered to ceiling when it is above it: a caller never gets more
// than the pool allows it, whatever it asks for.
func (p Priority) Cap(ceiling Priority) Priority {
	if p.Rank() > ceiling.Rank() {
		return ceiling
	}
	return p
}

// Callers says who may call through a pool and the highest priority each may
// claim. Which part applies depends on how the router knows its callers
// (its --caller-auth flag).
type Callers struct {
	// MaxPriority is the highest priority a caller may claim when the router
	// does not authenticate it as a Kubernetes ServiceAccount: callers whose
	// own Google token goes with their call, or callers of a router that
	// checks no identity. Default "default".
	MaxPriority Priority `json:"maxPriority"`
	// ServiceAccounts are the Kubernetes ServiceAccounts that may call
	// through the pool when the router authenticates callers by their
	// ServiceAccount token. Empty admits none.
	ServiceAccounts []ServiceAccount `json:"serviceAccounts,omitempty"`
}

// ServiceAccount names the Kubernetes ServiceAccounts of one entry of
// Callers.
type ServiceAccount struct {
	// Namespace of the ServiceAccount.
	Namespace string `json:"namespace"`
	// Name of the ServiceAccount, or "*" for every ServiceAccount of the
	// namespace.
	Name string `json:"name"`
	// MaxPriority is the highest priority these callers may claim. Default
	// "default".
	MaxPriority Priority `json:"maxPriority"`
}

// AnyServiceAccount is the Name that matches every ServiceAccount of a
// namespace.
const AnyServiceAccount = "*"

// dnsLabel is a Kubernetes namespace name (RFC 1123 label); dnsSubdomain a
// ServiceAccount name (RFC 1123 subdomain).
var (
	dnsLabel     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

// MaxCallers is the most ServiceAccount entries one pool may list.
const MaxCallers = 256

// MaxPriorityFor is the highest priority the ServiceAccount namespace/name
// may claim in the pool, and false when the pool does not admit it. An entry
// that names the account wins over the namespace's "*": the more precise
// entry says what the pool's owner meant for that account.
func (c *Callers) MaxPriorityFor(namespace, name string) (Priority, bool) {
	var wildcard *ServiceAccount
	for i := range c.ServiceAccounts {
		sa := &c.ServiceAccounts[i]
		if sa.Namespace != namespace {
			continue
		}
		if sa.Name == name {
			return sa.MaxPriority, true
		}
		if sa.Name == AnyServiceAccount {
			wildcard = sa
		}
	}
	if wildcard != nil {
		return wildcard.MaxPriority, true
	}
	return "", false
}

// fill sets every unset priority to its default.
func (c *Callers) fill() {
	if c.MaxPriority == "" {
		c.MaxPriority = DefaultMaxPriority
	}
	for i := range c.ServiceAccounts {
		if c.ServiceAccounts[i].MaxPriority == "" {
			c.ServiceAccounts[i].MaxPriority = DefaultMaxPriority
		}
	}
}

// Validate checks defaulted callers; the error starts with the field at fault.
func (c *Callers) Validate() error {
	if c.MaxPriority.Rank() < 0 {
		return fieldError("maxPriority", "unknown priority %q (critical, default or sheddable)", c.MaxPriority)
	}
	if len(c.ServiceAccounts) > MaxCallers {
		return fieldError("serviceAccounts", "%d entries, at most %d", len(c.ServiceAccounts), MaxCallers)
	}
	seen := map[[2]string]int{}
	for i, sa := range c.ServiceAccounts {
		path := fmt.Sprintf("serviceAccounts[%d]", i)
		switch {
		case len(sa.Namespace) > 63 || !dnsLabel.MatchString(sa.Namespace):
			return fieldError(path+".namespace", "%q is not a namespace name", sa.Namespace)
		case sa.Name != AnyServiceAccount && (len(sa.Name) > 253 || !dnsSubdomain.MatchString(sa.Name)):
			return fieldError(path+".name", "%q is neither a ServiceAccount name nor %q", sa.Name, AnyServiceAccount)
		case sa.MaxPriority.Rank() < 0:
			return fieldError(path+".maxPriority", "unknown priority %q (critical, default or sheddable)", sa.MaxPriority)
		}
		k := [2]string{sa.Namespace, sa.Name}
		if j, dup := seen[k]; dup {
			return fieldError(path, "duplicate ServiceAccount %s/%s (also serviceAccounts[%d])", sa.Namespace, sa.Name, j)
		}
		seen[k] = i
	}
	return nil
}
