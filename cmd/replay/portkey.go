package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/regionwarden/regionwarden/internal/replay"
)

// portkeyPolicy returns the Portkey gateway column, installing the gateway
// from npm into dir first if it is not there yet, and a note for the page
// when it cannot run here.
func portkeyPolicy(ctx context.Context, dir string, scale float64, stdout io.Writer, logf func(string, ...any)) (replay.Policy, string) {
	p := replay.Portkey(dir)
	p.MaxScale = scale
	if dir == "" {
		return p, fmt.Sprintf("The %s column is left out: no cache folder to install it in.", replay.NamePortkey)
	}
	fmt.Fprintf(stdout, "Portkey gateway %s in %s\n", replay.PortkeyVersion, dir)
	if err := replay.InstallPortkey(ctx, dir, logWriter{logf}); err != nil {
		fmt.Fprintf(stdout, "%s: skipped: %v\n", replay.NamePortkey, err)
		if errors.Is(err, replay.ErrUnavailable) {
			return p, fmt.Sprintf("The %s column is left out: %v.", replay.NamePortkey, err)
		}
		return p, fmt.Sprintf("The %s column is left out: installing it failed: %v.", replay.NamePortkey, err)
	}
	return p, fmt.Sprintf("The %s (%s, installed from npm into a cache folder outside the repository, @hono/node-server "+
		"pinned to 1.13.5) replays only the scenarios named by --portkey-scenarios, in a pass of its own at scale %g: "+
		"Node.js spends milliseconds of CPU per call, so it cannot keep up with the hundreds of calls per second "+
		"that the other columns take at their scale on two cores. Scenario time, seed and load are the same.",
		replay.NamePortkey, replay.PortkeyVersion, scale)
}

// logWriter sends npm's output to the diagnostics.
type logWriter struct{ logf func(string, ...any) }

func (w logWriter) Write(p []byte) (int, error) {
	w.logf("%s", p)
	return len(p), nil
}
