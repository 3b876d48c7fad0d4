package emulator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/regionwarden/regionwarden/router/table"
)

// DefaultHost is where the emulator listens unless told otherwise.
const DefaultHost = "127.0.0.1"

// Options tune an Emulator. The zero value is usable.
type Options struct {
	// Seed seeds every random stream (latencies, fault bursts); the same seed
	// gives the same pattern for the same arrival order.
	Seed uint64
	// Clock tells scenario time. Nil means a ScaledClock at the scenario's
	// TimeScale, started by Start.
	Clock Clock
	// BasePort, when above zero, fixes the ports: region i serves gRPC on
	// BasePort+2i and REST on BasePort+2i+1, in the scenario's order, and
	// monitoring is on BasePort+2n. Zero means free ports.
	BasePort int
	// Host is the address to listen on. Default 127.0.0.1.
	Host string
}

// RegionAddr is where one emulated region listens.
type RegionAddr struct {
	Name string     `json:"name"`
	Tier table.Tier `json:"tier"`
	// GRPC is host:port of the PredictionService and LlmUtilityService. It
	// serves the Vertex REST surface too (HTTP/1.1), as one Google endpoint
	// serves both: the endpoint a routing table names.
	GRPC string `json:"grpc"`
	// REST is host:port of the Vertex REST surface alone (plain HTTP).
	REST string `json:"rest"`
}

// Emulator serves every region of a scenario and a Cloud Monitoring
// MetricService for its PTs.
type Emulator struct {
	sc      *Scenario
	opts    Options
	clock   Clock
	regions []*region

	mu         sync.Mutex
	started    bool
	closed     bool
	addrs      []RegionAddr
	monAddr    string
	grpcs      []*grpc.Server
	https      []*http.Server
	stop       chan struct{}
	wg         sync.WaitGroup
	monitoring *monitoring
}

// New builds an emulator for a scenario, filling its defaults and refusing it
// if invalid; nothing listens until Start.
func New(sc *Scenario, opts Options) (*Emulator, error) {
	if sc == nil {
		return nil, errors.New("emulator: nil scenario")
	}
	sc.Default()
	if err := sc.Validate(); err != nil {
		return nil, fmt.Errorf("emulator: scenario %q: %w", sc.Name, err)
	}
	opts.Host = cmp.Or(opts.Host, DefaultHost)
	if opts.BasePort < 0 || opts.BasePort+2*len(sc.Regions) > 65535 {
		return nil, fmt.Errorf("emulator: base port %d leaves no room for %d regions", opts.BasePort, len(sc.Regions))
	}
	e := &Emulator{sc: sc, opts: opts, clock: opts.Clock, stop: make(chan struct{})}
	if e.clock == nil {
		e.clock = NewScaledClock(sc.TimeScale)
	}
	for i := range sc.Regions {
		e.regions = append(e.regions, newRegion(sc, &sc.Regions[i], e.clock, opts.Seed))
	}
	e.monitoring = newMonitoring(sc, e.regions)
	return e, nil
}

// Scenario returns the scenario being served.
func (e *Emulator) Scenario() *Scenario { return e.sc }

// Clock returns the clock the regions read.
func (e *Emulator) Clock() Clock { return e.clock }

func (e *Emulator) listen(port int) (net.Listener, error) {
	p := 0
	if e.opts.BasePort > 0 {
		p = e.opts.BasePort + port
	}
	return net.Listen("tcp", net.JoinHostPort(e.opts.Host, strconv.Itoa(p)))
}

// Start listens and serves every region and the monitoring service, then
// starts the clock if it is a ScaledClock not yet started. The emulator
// serves until Close or until ctx ends. On error nothing is left listening.
func (e *Emulator) Start(ctx context.Context) (err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.started {
		return errors.New("emulator: already started")
	}
	if e.closed {
		return errors.New("emulator: closed")
	}
	e.started = true
	var lis []net.Listener
	defer func() {
		if err != nil {
			for _, l := range lis {
				_ = l.Close()
			}
			e.closed = true
		}
	}()
	type pending struct {
		g *grpc.Server
		h *http.Server
		l net.Listener
	}
	var serve []pending
	for i, r := range e.regions {
		gl, err := e.listen(2 * i)
		if err != nil {
			return fmt.Errorf("emulator: region %s: %w", r.cfg.Name, err)
		}
		lis = append(lis, gl)
		hl, err := e.listen(2*i + 1)
		if err != nil {
			return fmt.Errorf("emulator: region %s: %w", r.cfg.Name, err)
		}
		lis = append(lis, hl)
		gd, hd := newDropListener(gl, r.refusing), newDropListener(hl, r.refusing)
		r.listeners = []*dropListener{gd, hd}
		both := newProtocolMux(gd)
		g := grpc.NewServer()
		registerGRPC(g, r)
		h := &http.Server{Handler: restHandler(r), ReadHeaderTimeout: 10 * time.Second}
		serve = append(serve, pending{g: g, l: both.grpc}, pending{h: h, l: hd}, pending{h: h, l: both.rest})
		e.addrs = append(e.addrs, RegionAddr{Name: r.cfg.Name, Tier: r.cfg.Tier, GRPC: gl.Addr().String(), REST: hl.Addr().String()})
	}
	ml, err := e.listen(2 * len(e.regions))
	if err != nil {
		return fmt.Errorf("emulator: monitoring: %w", err)
	}
	lis = append(lis, ml)
	mg := grpc.NewServer()
	e.monitoring.register(mg)
	serve = append(serve, pending{g: mg, l: ml})
	e.monAddr = ml.Addr().String()

	for _, p := range serve {
		if p.g != nil {
			e.grpcs = append(e.grpcs, p.g)
			go func() { _ = p.g.Serve(p.l) }()
		} else {
			if !slices.Contains(e.https, p.h) {
				e.https = append(e.https, p.h)
			}
			go func() { _ = p.h.Serve(p.l) }()
		}
	}
	if c, ok := e.clock.(*ScaledClock); ok {
		c.Start()
	}
	e.monitoring.refresh(e.clock.Elapsed())
	e.wg.Add(1)
	go e.background(ctx)
	return nil
}

// background refreshes the monitoring data once per scenario minute (or
// once a real second, whichever comes first) until Close or ctx ends; when
// ctx ends it closes the emulator.
func (e *Emulator) background(ctx context.Context) {
	defer e.wg.Done()
	every := time.Second
	if c, ok := e.clock.(*ScaledClock); ok {
		every = min(every, c.Real(time.Minute))
	}
	t := time.NewTicker(max(every, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-ctx.Done():
			go func() { _ = e.Close() }()
			return
		case <-t.C:
			e.monitoring.refresh(e.clock.Elapsed())
		}
	}
}

// Regions returns where each region listens, in the scenario's order; empty
// before Start.
func (e *Emulator) Regions() []RegionAddr {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]RegionAddr(nil), e.addrs...)
}

// MonitoringAddr is host:port of the Cloud Monitoring MetricService; empty
// before Start.
func (e *Emulator) MonitoringAddr() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.monAddr
}

// Stats snapshots every region's counters.
func (e *Emulator) Stats() Stats {
	s := Stats{Scenario: e.sc.Name, Elapsed: D(e.clock.Elapsed())}
	for _, r := range e.regions {
		s.Regions = append(s.Regions, r.stats())
	}
	return s
}

// Close stops every server at once, dropping calls in flight. It is safe to
// call more than once.
func (e *Emulator) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	started := e.started
	grpcs, https := e.grpcs, e.https
	e.mu.Unlock()
	if !started {
		return nil
	}
	close(e.stop)
	var errs []error
	for _, g := range grpcs {
		g.Stop()
	}
	for _, h := range https {
		if err := h.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	e.wg.Wait()
	return errors.Join(errs...)
}
