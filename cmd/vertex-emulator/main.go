// Command vertex-emulator serves the emulated Vertex AI regions of a scenario
// (gRPC PredictionService and Vertex REST per region, plus a Cloud Monitoring
// MetricService for the scenario's PTs) until SIGINT or SIGTERM, then prints
// what each region served.
//
//	vertex-emulator --scenario test/scenarios/provisioned-region-incident.yaml \
//	    --addresses-file /tmp/emulator.json
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/regionwarden/regionwarden/internal/command"
	"github.com/regionwarden/regionwarden/internal/emulator"
	"github.com/regionwarden/regionwarden/router/table"
)

func main() {
	command.Main("vertex-emulator", func(ctx context.Context, args []string) error { return run(ctx, args, os.Stdout, os.Stderr) })
}

// config is the command line.
type config struct {
	scenario      string
	scale         float64
	seed          uint64
	basePort      int
	host          string
	addressesFile string
	statsFile     string
	statsInterval time.Duration
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := command.FlagSet("vertex-emulator", stderr)
	fs.StringVar(&c.scenario, "scenario", "", "scenario YAML file (required)")
	fs.Float64Var(&c.scale, "scale", 0, "scenario seconds per real second; 0 uses the scenario's timeScale")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the latency and fault streams")
	fs.IntVar(&c.basePort, "base-port", 0, "first port: region i gets base+2i (gRPC) and base+2i+1 (REST), monitoring base+2n; 0 picks free ports")
	fs.StringVar(&c.host, "listen-host", emulator.DefaultHost, "address to listen on")
	fs.StringVar(&c.addressesFile, "addresses-file", "", "write the regions' and monitoring's addresses to this JSON file")
	fs.StringVar(&c.statsFile, "stats-file", "", "write the final stats, with the per-second histogram, to this JSON file")
	fs.DurationVar(&c.statsInterval, "stats-interval", 0, "print a stats summary this often (real time); 0 prints only at the end")
	if err := command.Parse(fs, args); err != nil {
		return c, err
	}
	if c.scenario == "" {
		return c, errors.New("--scenario is required")
	}
	return c, errors.Join(
		command.NotNegative("scale", c.scale),
		command.NotNegative("stats-interval", c.statsInterval),
	)
}

// Addresses is the addresses file: where a script finds each region.
type Addresses struct {
	Scenario   string                   `json:"scenario"`
	TimeScale  float64                  `json:"timeScale"`
	Regions    map[string]RegionAddress `json:"regions"`
	Monitoring string                   `json:"monitoring"`
}

// RegionAddress is one region's listeners.
type RegionAddress struct {
	Tier table.Tier `json:"tier"`
	GRPC string     `json:"grpc"`
	REST string     `json:"rest"`
}

// run serves until ctx ends, then prints the final stats.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	sc, err := emulator.LoadScenario(cfg.scenario)
	if err != nil {
		return err
	}
	scale := cmp.Or(cfg.scale, sc.TimeScale) // --scale 0: the scenario's
	clock := emulator.NewScaledClock(scale)
	e, err := emulator.New(sc, emulator.Options{Seed: cfg.seed, Clock: clock, BasePort: cfg.basePort, Host: cfg.host})
	if err != nil {
		return err
	}
	if err := e.Start(ctx); err != nil {
		return err
	}
	defer func() { _ = e.Close() }()

	addrs := Addresses{Scenario: sc.Name, TimeScale: scale, Regions: map[string]RegionAddress{}, Monitoring: e.MonitoringAddr()}
	fmt.Fprintf(stdout, "scenario %s: %s of scenario time at scale %v (%s real), seed %d\n",
		sc.Name, sc.Duration, scale, clock.Real(sc.Duration.Duration).Round(time.Millisecond), cfg.seed)
	for _, r := range e.Regions() {
		addrs.Regions[r.Name] = RegionAddress{Tier: r.Tier, GRPC: r.GRPC, REST: r.REST}
		fmt.Fprintf(stdout, "  %-20s %-11s grpc=%s rest=%s\n", r.Name, r.Tier, r.GRPC, r.REST)
	}
	fmt.Fprintf(stdout, "  monitoring %s\n", addrs.Monitoring)
	if cfg.addressesFile != "" {
		if err := writeJSON(cfg.addressesFile, addrs); err != nil {
			return err
		}
	}

	var tick <-chan time.Time
	if cfg.statsInterval > 0 {
		t := time.NewTicker(cfg.statsInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-tick:
			if err := e.Stats().WriteSummary(stdout); err != nil {
				return err
			}
		case <-ctx.Done():
			st := e.Stats()
			fmt.Fprintln(stdout, "final stats:")
			if err := st.WriteSummary(stdout); err != nil {
				return err
			}
			if cfg.statsFile != "" {
				return writeJSON(cfg.statsFile, st)
			}
			return nil
		}
	}
}

// writeJSON writes v to path through a temporary file and a rename, so a
// script that polls for the file never reads half of it.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
