package main

import (
	"context"
	"io"

	"github.com/regionwarden/regionwarden/test/replay"
)

// portkeyPolicy returns the Portkey gateway column and a note for the page
// when it cannot run here.
func portkeyPolicy(_ context.Context, dir string, _ io.Writer, _ func(string, ...any)) (replay.Policy, string) {
	return replay.Portkey(dir), ""
}
