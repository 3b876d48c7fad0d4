package table

import (
	"fmt"
	"net"
	"regexp"
	"slices"
	"strings"
)

// googleAPIHost is a DNS name under googleapis.com: Google's API hosts. It
// covers the regional endpoints ({region}-aiplatform.googleapis.com), the
// global one (aiplatform.googleapis.com), the multi-regions
// (aiplatform.eu.rep.googleapis.com) and the names Private Service Connect
// gives endpoints for Google APIs (SERVICE-ENDPOINT.p.googleapis.com) and for
// regional endpoints (SERVICE.REGION.p.rep.googleapis.com). Each label is
// letters, digits and inner hyphens only, so nothing a URL parser reads as
// user info, a port or a path can hide in front of the suffix.
var googleAPIHost = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]*[a-z0-9])?\.)+googleapis\.com$`)

// GoogleAPIHost reports whether host (without port) is one of Google's API
// hosts, the only ones the router sends credentials to by default.
func GoogleAPIHost(host string) bool {
	return googleAPIHost.MatchString(strings.ToLower(host))
}

// EndpointHost is the host of a host:port endpoint, lowercased, without the
// brackets of an IPv6 literal.
func EndpointHost(endpoint string) (string, error) {
	host, _, err := net.SplitHostPort(endpoint)
	if err != nil {
		return "", fmt.Errorf("%q is not host:port", endpoint)
	}
	return strings.ToLower(host), nil
}

// Endpoints says which hosts a router may send credentials to: Google's API
// hosts, and the hosts an operator named explicitly (emulators, tests). The
// zero value allows Google's hosts alone.
type Endpoints struct {
	allowed []string
	any     bool
}

// AllowHosts returns Endpoints that also allow hosts (compared without case,
// exactly: "127.0.0.1", "vertex-emulator.test.svc").
func AllowHosts(hosts ...string) Endpoints {
	var e Endpoints
	for _, h := range hosts {
		if h = strings.ToLower(strings.TrimSpace(h)); h != "" {
			e.allowed = append(e.allowed, strings.Trim(h, "[]"))
		}
	}
	return e
}

// anyEndpoint allows every host: what the operator renders is checked by the
// RegionPool CRD, and only a router sends credentials.
var anyEndpoint = Endpoints{any: true}

// Check returns nil when a call to endpoint (host:port) may carry
// credentials, and otherwise an error (an *EndpointError when the endpoint
// is well formed) that says how to allow it.
func (e Endpoints) Check(endpoint string) error {
	host, err := EndpointHost(endpoint)
	if err != nil {
		return err
	}
	if e.any || GoogleAPIHost(host) || slices.Contains(e.allowed, host) {
		return nil
	}
	return &EndpointError{Host: host}
}

// EndpointError is an endpoint whose host may not receive credentials.
type EndpointError struct {
	// Host is the endpoint's host, lowercased.
	Host string
}

func (e *EndpointError) Error() string {
	return fmt.Sprintf("host %q is not a Google API host (*.googleapis.com): the router sends credentials only to Google, "+
		"unless it is started with --allow-endpoint-host=%s", e.Host, e.Host)
}
