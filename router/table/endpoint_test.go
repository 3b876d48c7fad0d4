package table

import (
	"strings"
	"testing"
)

// TestEndpointsCheck checks which hosts may receive credentials: Google's API
// hosts, Private Service Connect names under googleapis.com, and what the
// router's operator names; nothing that merely looks like Google's.
func TestEndpointsCheck(t *testing.T) {
	for _, tc := range []struct {
		endpoint string
		allow    []string
		ok       bool
	}{
		{"europe-west1-aiplatform.googleapis.com:443", nil, true},
		{"aiplatform.googleapis.com:443", nil, true},
		{"aiplatform.eu.rep.googleapis.com:443", nil, true},
		{"AIPlatform.GoogleAPIs.com:443", nil, true},
		{"aiplatform-vialink1.p.googleapis.com:443", nil, true},         // Private Service Connect, global
		{"aiplatform.europe-west1.p.rep.googleapis.com:443", nil, true}, // Private Service Connect, regional
		{"googleapis.com:443", nil, false},
		{"attacker.example.com:443", nil, false},
		{"googleapis.com.attacker.example:443", nil, false},
		{"x.googleapis.com.:443", nil, false},
		{"attacker.example@x.googleapis.com:443", nil, false},
		{"-x.googleapis.com:443", nil, false},
		{"x_y.googleapis.com:443", nil, false},
		{"127.0.0.1:8443", nil, false},
		{"localhost:8443", nil, false},
		{"[::1]:8443", nil, false},
		{"127.0.0.1:8443", []string{"127.0.0.1"}, true},
		{"[::1]:8443", []string{"[::1]"}, true},
		{"LocalHost:1", []string{"localhost"}, true},
		{"vertex-emulator.test.svc:8080", []string{"vertex-emulator.test.svc"}, true},
		{"127.0.0.2:8443", []string{"127.0.0.1"}, false},
		{"no-port", []string{"no-port"}, false},
	} {
		err := AllowHosts(tc.allow...).Check(tc.endpoint)
		if (err == nil) != tc.ok {
			t.Errorf("Check(%q) with %q allowed = %v, want ok=%v", tc.endpoint, tc.allow, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "host") {
			t.Errorf("Check(%q): error %q does not name the host", tc.endpoint, err)
		}
	}
}

// TestParseAllowsNamedHosts checks that Parse accepts an endpoint off Google
// when, and only when, its host is allowed by name.
func TestParseAllowsNamedHosts(t *testing.T) {
	data := []byte(doc(pool(`{"name": "us-east5", "endpoint": "127.0.0.1:9000"}, {"name": "europe-west1"}`)))
	if _, err := Parse(data); err == nil {
		t.Fatal("Parse accepted a loopback endpoint without an allowance")
	}
	if _, err := Parse(data, AllowHosts("localhost")); err == nil {
		t.Fatal("Parse accepted a loopback endpoint allowed under another name")
	}
	tb, err := Parse(data, AllowHosts("127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	if got := tb.Pools[0].Regions[1].Endpoint; got != "127.0.0.1:9000" {
		t.Errorf("endpoint = %q", got)
	}
}
