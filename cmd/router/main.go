// Command router serves Vertex AI's REST surface for publisher models and
// routes each call to a region of its pool, as the routing table says:
// applications point their genai SDK at it and change nothing else. The
// caller's bytes go on to the region's Vertex REST endpoint unchanged but
// for what routing must change.
//
//	router --table-file /etc/regionwarden/tables          # a mounted ConfigMap folder
//	router --table-configmaps regionwarden-system         # ConfigMaps watched through the API
//
// See router/server for the surface and router/policy for the routing rules.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/regionwarden/regionwarden/internal/command"
	"github.com/regionwarden/regionwarden/internal/tracing"
	"github.com/regionwarden/regionwarden/router/auth"
	"github.com/regionwarden/regionwarden/router/metrics"
	"github.com/regionwarden/regionwarden/router/server"
	"github.com/regionwarden/regionwarden/router/share"
	"github.com/regionwarden/regionwarden/router/source"
	"github.com/regionwarden/regionwarden/router/table"
	"github.com/regionwarden/regionwarden/router/upstream"
)

func main() {
	command.Main("router", func(ctx context.Context, args []string) error { return run(ctx, args, os.Stderr, nil) })
}

// config is the command line.
type config struct {
	listen            string
	opsListen         string
	grpcListen        string
	tableFile         string
	tableConfigMaps   string
	kubeconfig        string
	upstreamInsecure  bool
	allowHosts        []string
	callerAuth        auth.Mode
	requestTimeout    time.Duration
	shutdownGrace     time.Duration
	shutdownDelay     time.Duration
	maxBodyBytes      int64
	maxBodyInFlight   int64
	bodyReadTimeout   time.Duration
	writeTimeout      time.Duration
	readHeaderTimeout time.Duration
	idleTimeout       time.Duration
	logLevel          string
	logFormat         string
	clockScale        float64
	seed              uint64
	replicas          int
	peersService      string
	shareStore        string
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := command.FlagSet("router", stderr)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: router (--table-file PATH | --table-configmaps NAMESPACE) [flags]")
		fmt.Fprintln(fs.Output(), "\nServes Vertex AI's REST surface and routes each call to a region of its pool.\n\nFlags:")
		fs.PrintDefaults()
	}
	fs.StringVar(&c.listen, "listen", ":8080", "address of the Vertex AI REST surface (and of the operations endpoints unless --ops-listen is set)")
	fs.StringVar(&c.grpcListen, "grpc-listen", "", "address of the Vertex AI gRPC surface (PredictionService, LlmUtilityService) for the aiplatform clients; empty serves none")
	fs.StringVar(&c.opsListen, "ops-listen", "", "address of /metrics, /debug/pools, /healthz and /readyz; empty serves them on --listen")
	fs.StringVar(&c.tableFile, "table-file", "", "routing table file, or a mounted ConfigMap folder holding "+table.DataKey+"; followed as the kubelet updates it")
	fs.StringVar(&c.tableConfigMaps, "table-configmaps", "", "namespace whose ConfigMaps labeled "+source.Selector()+" hold the routing tables (needs get, list, watch on configmaps there)")
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig for --table-configmaps and --caller-auth=kubernetes; empty uses the in-cluster config")
	c.callerAuth = auth.ModeForward
	fs.Func("caller-auth", "how the router knows its callers: forward (default: each caller's own Google token goes with its call, the router has no Google identity), "+
		"kubernetes (the router calls as itself and admits the ServiceAccounts each RegionPool lists, by their token with the audience "+auth.Audience+"), "+
		"or none (nobody is checked: emulators and tests only, with --upstream-insecure)", func(v string) (err error) {
		c.callerAuth, err = auth.ParseMode(v)
		return err
	})
	fs.BoolVar(&c.upstreamInsecure, "upstream-insecure", false, "call regions in plaintext (REST over HTTP/1.1, gRPC over h2c) without credentials: for emulators and tests only")
	fs.Func("allow-endpoint-host", "a host outside Google's API domains (*.googleapis.com) that routing tables may name as an endpoint, "+
		"e.g. an emulator's 127.0.0.1; repeat the flag or separate hosts by commas. Tables naming any other host are refused", func(v string) error {
		for h := range strings.SplitSeq(v, ",") {
			if h = strings.TrimSpace(h); h == "" || strings.ContainsAny(h, "/ ") {
				return fmt.Errorf("%q is not a host name or address", h)
			}
			c.allowHosts = append(c.allowHosts, h)
		}
		return nil
	})
	fs.DurationVar(&c.requestTimeout, "request-timeout", server.DefaultRequestTimeout, "overall deadline of a request, every attempt included")
	fs.DurationVar(&c.shutdownDelay, "shutdown-delay", 5*time.Second, "on SIGTERM, how long the router goes on serving new calls, unready and closing each connection after its answer, before it stops listening: the time the Service's endpoints, proxies and load balancers take to stop sending it calls")
	fs.DurationVar(&c.shutdownGrace, "shutdown-grace", 30*time.Second, "on SIGTERM, after --shutdown-delay, how long in-flight requests and streams may take to finish")
	fs.Int64Var(&c.maxBodyBytes, "max-body-bytes", server.DefaultMaxBodyBytes, "largest request body; larger ones are answered 413")
	fs.Int64Var(&c.maxBodyInFlight, "max-body-bytes-in-flight", 0, "request body bytes the router holds at once, all requests together; a body that does not fit is answered 429 before it is read. 0: a quarter of GOMEMLIMIT, or 256 MiB without one")
	fs.DurationVar(&c.bodyReadTimeout, "body-read-timeout", server.DefaultBodyReadTimeout, "how long a client may take to send a request body; a slower one is answered 408 and cut off")
	fs.DurationVar(&c.writeTimeout, "write-timeout", server.DefaultWriteTimeout, "how long each write of an answer (each chunk of a stream) may wait for the client to read; a client that stalls longer is cut off and its call ends")
	fs.DurationVar(&c.readHeaderTimeout, "read-header-timeout", 10*time.Second, "how long a client may take to send request headers")
	fs.DurationVar(&c.idleTimeout, "idle-timeout", 2*time.Minute, "how long an idle keep-alive connection is kept")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error; debug logs every request")
	fs.StringVar(&c.logFormat, "log-format", "json", "json or text")
	fs.Float64Var(&c.clockScale, "clock-scale", 1, "for replays only: the routing policy's clock runs this many times faster than real time")
	fs.Uint64Var(&c.seed, "seed", 0, "for replays only: seed of the policy's random choices; 0 picks one")
	fs.IntVar(&c.replicas, "replicas", 1, "how many routers meter the same regions, outside a cluster: each meters 1/N of every region's capacity")
	fs.StringVar(&c.peersService, "peers-service", "", "the router's own Service, in namespace POD_NAMESPACE: the routers are counted from its EndpointSlices (needs get, list, watch on endpointslices there); POD_NAME ranks this router among them")
	fs.StringVar(&c.shareStore, "share-store", "", "redis://host:port/db (rediss:// for TLS) of a Redis or Valkey server in which the routers meter request quotas together, share the rest of the capacity by their demand and keep the Live sessions' resumption handles; its password, if any, from the environment variable "+shareStorePasswordEnv+"; empty: each takes 1/N")
	if err := command.Parse(fs, args); err != nil {
		return c, err
	}
	if err := errors.Join(
		command.Positive("clock-scale", c.clockScale),
		command.Positive("request-timeout", c.requestTimeout),
		command.Positive("max-body-bytes", c.maxBodyBytes),
		command.NotNegative("max-body-bytes-in-flight", c.maxBodyInFlight),
		command.Positive("body-read-timeout", c.bodyReadTimeout),
		command.Positive("write-timeout", c.writeTimeout),
		command.NotNegative("shutdown-grace", c.shutdownGrace),
		command.NotNegative("shutdown-delay", c.shutdownDelay),
	); err != nil {
		return c, err
	}
	switch {
	case c.tableFile == "" && c.tableConfigMaps == "":
		return c, errors.New("no routing table source: give --table-file PATH or --table-configmaps NAMESPACE")
	case c.tableFile != "" && c.tableConfigMaps != "":
		return c, errors.New("give one routing table source, not both --table-file and --table-configmaps")
	case c.replicas < 1:
		return c, fmt.Errorf("--replicas must be at least 1, got %d", c.replicas)
	case c.peersService != "" && os.Getenv("POD_NAMESPACE") == "":
		return c, errors.New("--peers-service needs POD_NAMESPACE, the router's namespace (the downward API's metadata.namespace)")
	case c.maxBodyInFlight > 0 && c.maxBodyInFlight < c.maxBodyBytes:
		return c, fmt.Errorf("--max-body-bytes-in-flight (%d) must hold at least one body of --max-body-bytes (%d)", c.maxBodyInFlight, c.maxBodyBytes)
	case c.callerAuth == auth.ModeNone && !c.upstreamInsecure:
		return c, errors.New("--caller-auth=none lets anyone who reaches the router call as it: it is for emulators and tests only, and needs --upstream-insecure")
	}
	if c.tableFile != "" {
		if err := checkTableFile(c.tableFile); err != nil {
			return c, err
		}
	}
	return c, nil
}

// checkTableFile fails early on a table file that cannot be read, so that a
// wrong path is a clear startup error rather than a router that never turns
// ready. A table that reads but is bad is refused later, like any bad update.
func checkTableFile(path string) error {
	name := path
	if fi, err := os.Stat(path); err != nil {
		return fmt.Errorf("--table-file: %w", err)
	} else if fi.IsDir() {
		name = filepath.Join(path, table.DataKey)
	}
	f, err := os.Open(name)
	if err != nil {
		return fmt.Errorf("--table-file: %w", err)
	}
	return f.Close()
}

func newLogger(c config, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(c.logFormat) {
	case "json":
		return slog.New(tracing.LogHandler(slog.NewJSONHandler(w, opts))), nil
	case "text":
		return slog.New(tracing.LogHandler(slog.NewTextHandler(w, opts))), nil
	}
	return nil, fmt.Errorf("--log-format: %q is neither json nor text", c.logFormat)
}

// tableSource is a routing table source as the router uses it.
type tableSource interface {
	Run(ctx context.Context) error
	Subscribe(fn func(*table.Table)) (unsubscribe func())
	Current() *table.Table
	Refusals() []source.Refusal
}

// addresses are where the router listens; grpc is "" without --grpc-listen.
type addresses struct{ api, ops, grpc string }

// listening is told the addresses the router listens on, once it does; tests
// use it to find a router started on port 0.
type listening func(addresses)

// run runs the router until ctx ends, then shuts down gracefully.
func run(ctx context.Context, args []string, stderr io.Writer, onListen listening) error {
	c, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	log, err := newLogger(c, stderr)
	if err != nil {
		return err
	}
	// Traces, configured by the OTEL_* environment variables alone: a
	// server span per call and a client span per attempt; off when no OTLP
	// endpoint is set. Log lines of a traced call carry its trace_id.
	tracingOn, shutdownTracing, err := tracing.Setup(ctx, "regionwarden-router")
	if err != nil {
		return err
	}
	defer func() {
		flush, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = shutdownTracing(flush)
	}()
	log.Info("tracing", "on", tracingOn)

	m := metrics.New()
	var kube kubernetes.Interface
	if c.tableConfigMaps != "" || c.peersService != "" || c.callerAuth == auth.ModeKubernetes {
		if kube, err = kubeClient(c.kubeconfig); err != nil {
			return err
		}
	}
	authn, authorizer, err := callerAuth(c, kube)
	if err != nil {
		return err
	}
	clients := upstream.New(upstream.Options{Insecure: c.upstreamInsecure, Authorizer: authorizer})
	defer func() { _ = clients.Close() }()
	// The source is made below, before anything is served.
	var src tableSource
	var srv *server.Server
	shares, counter, closeStore, err := newShares(c, kube, func(t *table.Table) error { return srv.Apply(t) }, m, log)
	if err != nil {
		return err
	}
	// The share store's connections close last, once the calls that meter
	// in it have ended and the controller exchanges no more (background).
	defer closeStore()
	srv, err = server.New(server.Options{
		Refusals:             func() []source.Refusal { return src.Refusals() },
		Shares:               shares,
		Upstream:             clients,
		Metrics:              m,
		Logger:               log,
		Now:                  server.ScaledClock(c.clockScale),
		ClockScale:           c.clockScale,
		Seed:                 c.seed,
		RequestTimeout:       c.requestTimeout,
		MaxBodyBytes:         c.maxBodyBytes,
		MaxBodyBytesInFlight: c.maxBodyInFlight,
		BodyReadTimeout:      c.bodyReadTimeout,
		WriteTimeout:         c.writeTimeout,
		Auth:                 authn,
		TracerProvider:       tracerProvider(tracingOn),
	})
	if err != nil {
		return err
	}

	endpoints := table.AllowHosts(c.allowHosts...)
	if c.tableFile != "" {
		src = source.NewFileSource(c.tableFile, source.FileOptions{Logger: log, Observer: m, Endpoints: endpoints})
	} else {
		src = source.NewConfigMapSource(kube, c.tableConfigMaps, source.ConfigMapOptions{Logger: log, Observer: m, Endpoints: endpoints})
	}
	apply := func(t *table.Table) {
		if err := shares.SetTable(t); err != nil {
			log.Error("routing table applied in part", "error", err)
		}
	}
	unsubscribe := src.Subscribe(apply)
	defer unsubscribe()

	// The source runs until the server has drained: streams still in flight
	// keep routing on the table they started with, and later tables are still
	// applied.
	srcCtx, stopSource := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSource()
	srcErr := make(chan error, 1)
	// run returns once the source, the share controller and the replica
	// counter have stopped, and the share store's clients close after them.
	var background sync.WaitGroup
	defer func() {
		stopSource()
		background.Wait()
	}()
	background.Go(func() { srcErr <- src.Run(srcCtx) })
	background.Go(func() { _ = shares.Run(srcCtx) })
	if counter != nil {
		background.Go(func() {
			if err := counter.Run(srcCtx); err != nil {
				log.Error("counting the routers", "error", err)
			}
		})
	}

	apiLn, err := net.Listen("tcp", c.listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	// servers is complete before any of them serves: drain and shutdown read
	// it while they serve, and each must see every server (one missing would
	// keep its connections alive through the drain and be closed unshut).
	var servers []*http.Server
	newServer := func(h http.Handler) *http.Server {
		hs := &http.Server{
			Handler:           h,
			ReadHeaderTimeout: c.readHeaderTimeout,
			IdleTimeout:       c.idleTimeout,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		}
		servers = append(servers, hs)
		return hs
	}
	serveErr := make(chan error, 3)
	serve := func(hs *http.Server, ln net.Listener) { go func() { serveErr <- hs.Serve(ln) }() }
	opsAddr := apiLn.Addr().String()
	if c.opsListen == "" {
		serve(newServer(srv.Handler()), apiLn)
	} else {
		opsLn, err := net.Listen("tcp", c.opsListen)
		if err != nil {
			_ = apiLn.Close()
			return fmt.Errorf("--ops-listen: %w", err)
		}
		opsAddr = opsLn.Addr().String()
		api, ops := newServer(srv.APIHandler()), newServer(srv.OpsHandler())
		serve(api, apiLn)
		serve(ops, opsLn)
	}
	addrs := addresses{api: apiLn.Addr().String(), ops: opsAddr}
	var gs *grpc.Server
	if c.grpcListen != "" {
		grpcLn, err := net.Listen("tcp", c.grpcListen)
		if err != nil {
			shutdown(log, servers, nil, 0)
			return fmt.Errorf("--grpc-listen: %w", err)
		}
		addrs.grpc = grpcLn.Addr().String()
		gs = grpc.NewServer(
			// A message is bounded as a REST body is; a connection carries
			// at most as many calls at once as Google's endpoints allow.
			grpc.MaxRecvMsgSize(int(c.maxBodyBytes)),
			grpc.MaxConcurrentStreams(grpcStreamsPerConn),
		)
		srv.RegisterGRPC(gs)
		go func() { serveErr <- gs.Serve(grpcLn) }()
	}
	log.Info("router listening", "api", addrs.api, "ops", opsAddr, "grpc", addrs.grpc,
		"tableFile", c.tableFile, "tableConfigMaps", c.tableConfigMaps, "allowEndpointHosts", c.allowHosts, "callerAuth", c.callerAuth, "clockScale", c.clockScale,
		"maxBodyBytesInFlight", srv.MaxBodyBytesInFlight())
	if onListen != nil {
		onListen(addrs)
	}

	var runErr error
	select {
	case <-ctx.Done():
		drain(log, srv, servers, c.shutdownDelay, serveErr)
		log.Info("shutting down, draining in-flight requests", "grace", c.shutdownGrace)
	case err := <-serveErr:
		runErr = fmt.Errorf("serving: %w", err)
	case err := <-srcErr:
		if err == nil {
			err = errors.New("stopped")
		}
		runErr = fmt.Errorf("routing table source: %w", err)
	}
	// Live sessions last minutes, past any grace: they are told to go
	// elsewhere now rather than cut off when the process exits.
	srv.CloseLiveSessions()
	shutdown(log, servers, gs, c.shutdownGrace)
	stopSource()
	return runErr
}

// grpcStreamsPerConn is how many calls one gRPC connection carries at once,
// as Google's endpoints allow: a client needing more opens more connections.
const grpcStreamsPerConn = 100

// kubeClient is a client of the API server in kubeconfig, or in-cluster.
func kubeClient(kubeconfig string) (kubernetes.Interface, error) {
	kc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	kc.UserAgent = "regionwarden-router"
	client, err := kubernetes.NewForConfig(kc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return client, nil
}

// callerAuth is how the router knows its callers and whose credentials its
// calls carry, by --caller-auth:
//   - forward: the caller's own token, and never the router's, which has
//     none (it needs no Google identity at all);
//   - kubernetes: the router's Application Default Credentials (none under
//     --upstream-insecure), callers checked by TokenReview through kube;
//   - none: no credentials; parseFlags allows it only with
//     --upstream-insecure.
func callerAuth(c config, kube kubernetes.Interface) (*auth.Authenticator, upstream.Authorizer, error) {
	var (
		reviewer   auth.ReviewerInterface
		authorizer upstream.Authorizer
	)
	switch c.callerAuth {
	case auth.ModeForward:
		authorizer = auth.Forward{}
	case auth.ModeKubernetes:
		reviewer = auth.NewReviewer(kube.AuthenticationV1().TokenReviews(), auth.ReviewerOptions{})
		if !c.upstreamInsecure {
			var err error
			if authorizer, err = upstream.ApplicationDefault(); err != nil {
				return nil, nil, fmt.Errorf("%w (on GKE, bind the router's ServiceAccount to a Google service account with Workload Identity; elsewhere, set GOOGLE_APPLICATION_CREDENTIALS)", err)
			}
		}
	}
	authn, err := auth.New(c.callerAuth, reviewer)
	return authn, authorizer, err
}

// drain is the first step of a shutdown: for delay the router stays
// unready (so the endpoints of its Service drop it) while it goes on
// serving every call that still reaches it, and its HTTP answers close their
// connections (Connection: close), so that callers holding one open come
// back through the Service to another router. Stopping to listen at once
// would refuse the calls that proxies, load balancers and callers' pooled
// connections send in the seconds before they learn the router is going;
// a call refused so fails, where one sent to a router still listening is
// served. It ends early if a server fails.
func drain(log *slog.Logger, srv *server.Server, servers []*http.Server, delay time.Duration, serveErr <-chan error) {
	if delay <= 0 {
		return
	}
	log.Info("shutting down: unready, serving until the Service stops sending calls", "delay", delay)
	srv.Drain()
	for _, hs := range servers {
		hs.SetKeepAlivesEnabled(false)
	}
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
	case err := <-serveErr:
		log.Warn("a server stopped while draining", "error", err)
	}
}

// shutdown stops accepting requests and waits up to grace for those in flight,
// streams included, to finish; then it closes what is left, which cancels the
// remaining requests and their upstream calls.
func shutdown(log *slog.Logger, servers []*http.Server, gs *grpc.Server, grace time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if gs != nil {
		stopped := make(chan struct{})
		go func() {
			gs.GracefulStop()
			close(stopped)
		}()
		defer func() {
			select {
			case <-stopped:
			case <-ctx.Done():
				log.Warn("grace period over, closing the gRPC calls still in flight")
				gs.Stop()
			}
		}()
	}
	for _, hs := range servers {
		if err := hs.Shutdown(ctx); err != nil {
			log.Warn("grace period over, closing the requests still in flight", "error", err)
			_ = hs.Close()
		}
	}
}

// shareStorePasswordEnv names the environment variable that holds the share
// store's password: set from a Secret, it stays out of the router's
// arguments, which anyone who may read the pod sees.
const shareStorePasswordEnv = "REGIONWARDEN_SHARE_STORE_PASSWORD"

// newShares makes the controller of this router's share of each pool's
// capacity: 1/--replicas, or 1/N with N counted from the EndpointSlices of
// --peers-service (then returned, to run), and with --share-store by demand,
// with request quotas metered in the store; closeStore closes the store's
// clients, once nothing uses them.
// Its intervals run at the policy's clock scale.
func newShares(c config, client kubernetes.Interface, apply func(*table.Table) error, mets *metrics.Metrics, log *slog.Logger) (ctl *share.Controller, counter *share.EndpointSliceCounter, closeStore func(), err error) {
	closeStore = func() {}
	o := share.Options{
		Apply:    apply,
		Replicas: share.Static(c.replicas),
		Now:      server.ScaledClock(c.clockScale),
		Interval: time.Duration(float64(share.DefaultInterval) / c.clockScale),
		Logger:   log,
	}
	if c.shareStore != "" {
		password := os.Getenv(shareStorePasswordEnv)
		x, err := share.NewExchange(share.ExchangeOptions{URL: c.shareStore, Password: password, Epoch: time.Duration(float64(share.DefaultEpoch) / c.clockScale), Keep: time.Duration(float64(share.DefaultKeep) / c.clockScale)})
		if err != nil {
			return nil, nil, nil, fmt.Errorf("--share-store: %w", err)
		}
		o.Store = x
		up := mets.ShareStoreUp()
		up.Set(1)
		m, err := share.NewMeter(share.MeterOptions{URL: c.shareStore, Password: password, ID: x.ID(), Scale: c.clockScale, Logger: log, OnState: func(answering bool) {
			if answering {
				up.Set(1)
			} else {
				up.Set(0)
			}
		}})
		if err != nil {
			_ = x.Close()
			return nil, nil, nil, fmt.Errorf("--share-store: %w", err)
		}
		o.Meter = m
		closeStore = func() {
			if err := errors.Join(x.Close(), m.Close()); err != nil {
				log.Warn("closing the share store's connections", "error", err)
			}
		}
	}
	if c.peersService != "" {
		counter = share.NewEndpointSliceCounter(client, os.Getenv("POD_NAMESPACE"), c.peersService, os.Getenv("POD_NAME"), func() { ctl.Changed() })
		o.Replicas = counter
	}
	ctl = share.New(o)
	return ctl, counter, closeStore, nil
}

// tracerProvider is the global provider tracing.Setup installed when tracing
// is on, and otherwise one that makes the server start no span at all, so a
// call pays nothing for tracing it does not do.
func tracerProvider(on bool) trace.TracerProvider {
	if on {
		return otel.GetTracerProvider()
	}
	return noop.NewTracerProvider()
}
