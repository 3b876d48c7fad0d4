// Package command is the one main of the repository's binaries: a context
// that SIGINT and SIGTERM cancel, and one way to report failure.
package command

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// Main runs run with the command line's arguments, under a context that
// SIGINT and SIGTERM cancel, so that run can shut down in order. When run
// fails, Main prints "name: error" on stderr and exits 1; flag.ErrHelp (the
// usage was asked for and printed) is not a failure.
func Main(name string, run func(ctx context.Context, args []string) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}
