package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/regionwarden/regionwarden/internal/replay"
)

// policyNames are the --policies keys, in the order the columns appear.
var policyNames = []string{"blocklist", "allowlist", "regionwarden", "router", "portkey"}

// choosePolicies returns the policies the flags ask for, notes for the page
// about the ones that cannot run here, and a cleanup for what preparing them
// left behind (a built router binary).
func choosePolicies(ctx context.Context, cfg config, stdout io.Writer, logf func(string, ...any)) ([]replay.Policy, []string, func(), error) {
	want := map[string]bool{}
	if cfg.policies == "" {
		for _, n := range policyNames {
			want[n] = true
		}
	} else {
		for _, n := range strings.Split(cfg.policies, ",") {
			n = strings.TrimSpace(n)
			if !slices.Contains(policyNames, n) {
				return nil, nil, nil, fmt.Errorf("--policies: unknown policy %q (known: %s)", n, strings.Join(policyNames, ", "))
			}
			want[n] = true
		}
	}
	var (
		policies []replay.Policy
		notes    []string
		cleanups []func()
	)
	cleanup := func() {
		for _, c := range cleanups {
			c()
		}
	}
	for _, n := range policyNames {
		if !want[n] {
			continue
		}
		switch n {
		case "blocklist":
			policies = append(policies, replay.Blocklist())
		case "allowlist":
			policies = append(policies, replay.Allowlist())
		case "regionwarden":
			policies = append(policies, replay.Regionwarden())
		case "router":
			bin, done, err := routerBinary(ctx, cfg.routerBin, stdout)
			if err != nil {
				notes = append(notes, fmt.Sprintf("The end-to-end column (%s) is left out: %v.", replay.NameRouter, err))
				fmt.Fprintf(stdout, "%s: skipped: %v\n", replay.NameRouter, err)
			}
			if done != nil {
				cleanups = append(cleanups, done)
			}
			policies = append(policies, replay.Router(bin))
		case "portkey":
			p, note := portkeyPolicy(ctx, cfg.portkey, cfg.pkScale, stdout, logf)
			if note != "" {
				notes = append(notes, note)
			}
			policies = append(policies, p)
		}
	}
	return policies, notes, cleanup, nil
}

// routerBinary returns the router binary to run: the one given, or
// ./cmd/router built into a temporary folder. An error says why there is none.
func routerBinary(ctx context.Context, given string, stdout io.Writer) (string, func(), error) {
	if given != "" {
		if _, err := os.Stat(given); err != nil {
			return "", nil, err
		}
		return given, nil, nil
	}
	if _, err := os.Stat(filepath.Join("cmd", "router", "main.go")); err != nil {
		return "", nil, fmt.Errorf("cmd/router is not in this tree (run from the repository root, or pass --router-bin)")
	}
	dir, err := os.MkdirTemp("", "replay-router-bin-")
	if err != nil {
		return "", nil, err
	}
	done := func() { _ = os.RemoveAll(dir) }
	bin := filepath.Join(dir, "router")
	fmt.Fprintf(stdout, "building ./cmd/router for the end-to-end column\n")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/router")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", done, fmt.Errorf("go build ./cmd/router: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return bin, done, nil
}
