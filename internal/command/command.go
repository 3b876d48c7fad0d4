// Package command is the one main of the repository's binaries: a context
// that SIGINT and SIGTERM cancel, and one way to report failure.
package command

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
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

// FlagSet is the flag set of the command name: it returns its errors rather
// than exiting, and writes them and its usage to stderr.
func FlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// Parse parses args with fs and refuses positional arguments: the commands
// take flags only.
func Parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return nil
}

// number is a flag's numeric value; time.Duration is one.
type number interface {
	~int | ~int64 | ~uint64 | ~float64
}

// Positive is an error naming the flag unless v is above zero.
func Positive[T number](flag string, v T) error {
	if v <= 0 {
		return fmt.Errorf("--%s must be positive, got %v", flag, v)
	}
	return nil
}

// NotNegative is an error naming the flag when v is below zero.
func NotNegative[T number](flag string, v T) error {
	if v < 0 {
		return fmt.Errorf("--%s must not be negative, got %v", flag, v)
	}
	return nil
}
