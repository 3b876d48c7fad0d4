package command

import (
	"io"
	"strings"
	"testing"
	"time"
)

// TestFlagChecks: a check names the flag and the value it refused, and
// passes the values its rule allows.
func TestFlagChecks(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{Positive("request-timeout", time.Duration(0)), "--request-timeout must be positive, got 0s"},
		{Positive("max-body-bytes", int64(-1)), "--max-body-bytes must be positive, got -1"},
		{Positive("clock-scale", 0.5), ""},
		{NotNegative("scale", -0.5), "--scale must not be negative, got -0.5"},
		{NotNegative("replicas", 0), ""},
	} {
		got := ""
		if tc.err != nil {
			got = tc.err.Error()
		}
		if got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

// TestParseRefusesArguments: the commands take flags only.
func TestParseRefusesArguments(t *testing.T) {
	fs := FlagSet("x", io.Discard)
	v := fs.Int("n", 0, "")
	if err := Parse(fs, []string{"-n", "3"}); err != nil || *v != 3 {
		t.Fatalf("Parse: %v, n=%d", err, *v)
	}
	if err := Parse(FlagSet("x", io.Discard), []string{"stray"}); err == nil || !strings.Contains(err.Error(), `unexpected arguments ["stray"]`) {
		t.Errorf("a stray argument: %v", err)
	}
	if err := Parse(FlagSet("x", io.Discard), []string{"--nope"}); err == nil {
		t.Error("an unknown flag was accepted")
	}
}
