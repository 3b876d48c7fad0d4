package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"
	"go.opentelemetry.io/otel/propagation"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/regionwarden/regionwarden/router/auth"
	"github.com/regionwarden/regionwarden/router/policy"
	"github.com/regionwarden/regionwarden/router/share"
	"github.com/regionwarden/regionwarden/router/upstream"
)

// The Live API (genai's client.Live.Connect): a session over a websocket,
// opened at upstream.LivePath on the location's endpoint, whose first
// message (setup) names the model as projects/P/locations/L/publishers/PUB/models/M.
// The router routes the session as it routes a call: the setup's model
// names the pool, the policy picks the region, and the session is set up
// there; a region that refuses the handshake or closes the session before
// its setupComplete is an attempt that failed, and the next region is
// tried, as nothing has reached the caller yet. From setupComplete on, the
// session is the region's: the messages go both ways unchanged, in the
// order they came, until one side closes, and the close (its code and
// text) is passed to the other. The only bytes changed are the location in
// the setup's model, to the region's, as the location in a REST path is.
//
// The attempt settles at setupComplete, as a success: a session lasts
// minutes, and holding its place in the region's in-flight limit for as
// long would shut out the calls the limit is for. What the session asks of
// the region after that is learned turn by turn (learnLive): each turn the
// region answers, with its tokens, and a close with an error, which goes to
// the caller as it came. A session resumed with a handle goes to the region
// that issued it (liveSessions.issuedBy).

// methodLive is the method label of Live sessions.
const methodLive = "live"

// liveRoute reads the path of a Live session's websocket; the API version,
// and false when the path is not one.
func liveRoute(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, "/ws/google.cloud.aiplatform.")
	if !ok {
		return "", false
	}
	version, ok := strings.CutSuffix(rest, ".LlmBidiService/BidiGenerateContent")
	return version, ok && version != "" && !strings.Contains(version, "/")
}

// liveUpgrader accepts the caller's websocket. Any origin is accepted: the
// router takes no ambient credentials (no cookies), only an Authorization
// header, which a web page cannot make a browser send on a websocket.
var liveUpgrader = websocket.Upgrader{
	ReadBufferSize:  8 << 10,
	WriteBufferSize: 8 << 10,
	CheckOrigin:     func(*http.Request) bool { return true },
}

// liveSessionBytes is what a session holds in the budget of request bytes
// while it lasts: its four websocket buffers (the caller's side's and the
// region's, upstream.Live's) and the stacks and state of its two goroutines,
// rounded up.
const liveSessionBytes = 64 << 10

// liveSession is what a Live session's setup is for the router: the
// message as it came, its kind (text or binary) and the model it names.
type liveSession struct {
	kind   int
	setup  []byte
	model  string // as the setup names it
	start  int    // where the model's string value is in setup
	end    int
	handle string          // setup.sessionResumption.handle: the session it resumes; "" for a new one
	region *websocket.Conn // the region's side, once set up
}

// serveLive serves a Live session: before the handshake, what a REST call
// is refused for (a path, a priority or a deadline that is wrong; under an
// Authenticator, no credentials at all); then, on the websocket, the setup
// is read within the body read deadline and its bytes held in the budget,
// the pool found by its model, the caller authorized for it, the session
// admitted and set up in the region the policy picks, trying the next as
// a REST call would, and then relayed until it ends. A refusal after the
// handshake is a close frame with the code and text Google's servers use
// (upstream.LiveCloseCode), the status's name first.
func (x *exchange) serveLive(version string) {
	x.method = methodLive
	r := x.r
	if r.Method != http.MethodGet || !websocket.IsWebSocketUpgrade(r) {
		x.fail(http.StatusBadRequest, codes.InvalidArgument, "the Live API is a websocket: open it with GET and Upgrade: websocket", 0)
		return
	}
	if !x.servedVersion(version) {
		return
	}
	if _, ok := auth.BearerToken(r.Header.Get("Authorization")); !ok && x.s.auth != nil && x.s.auth.Mode() != auth.ModeNone {
		// Who the caller is can only be decided for a pool, which the
		// setup names; a caller with no credentials at all is refused
		// before it holds a connection and the budget's bytes.
		x.fail(http.StatusUnauthorized, codes.Unauthenticated,
			"Request is missing required authentication credential: the Live API needs the caller's credentials as \"Authorization: Bearer TOKEN\"", 0)
		return
	}
	if x.s.live.stopping() {
		x.fail(http.StatusServiceUnavailable, codes.Unavailable, "the router is shutting down; open the session through another", 0)
		return
	}
	var err error
	if x.prio, err = parsePriority(r.Header.Get(HeaderPriority)); err != nil {
		x.fail(http.StatusBadRequest, codes.InvalidArgument, err.Error(), 0)
		return
	}
	timeout, callers, err := x.s.callTimeout(r.Header)
	if err != nil {
		x.fail(http.StatusBadRequest, codes.InvalidArgument, err.Error(), 0)
		return
	}
	// The session's buffers and goroutines are held in the budget of
	// request bytes for as long as it lasts: sessions, which the policy's
	// in-flight limits stop counting once set up, cannot grow past the
	// memory the budget stands for.
	if !x.hold(liveSessionBytes) {
		return
	}
	up := liveUpgrader
	up.Error = func(_ http.ResponseWriter, _ *http.Request, status int, reason error) {
		// A handshake the upgrader refuses (no key, a version it does
		// not speak) is answered in Google's error JSON, as every other
		// refusal of the router's is.
		code := codes.InvalidArgument
		if status >= http.StatusInternalServerError {
			code = codes.Internal
		}
		x.fail(status, code, reason.Error(), 0)
	}
	conn, err := up.Upgrade(x.w, r, nil)
	if err != nil {
		return // answered
	}
	defer func() { _ = conn.Close() }()
	x.status = http.StatusSwitchingProtocols
	ls, err := x.readSetup(conn)
	if err != nil {
		x.closeLive(conn, err)
		return
	}
	key, err := poolKey(ls.model)
	if err != nil {
		x.closeLive(conn, status.Error(codes.InvalidArgument, "setup.model: "+err.Error()))
		return
	}
	if x.pool = x.s.lookup(key); x.pool == nil {
		x.closeLive(conn, status.Errorf(codes.NotFound, "no routing pool for project %q, publisher %q, model %q", key.Project, key.Publisher, key.Model))
		return
	}
	traced := x.startSpan(r.Context(), propagation.HeaderCarrier(r.Header), methodLive, key.Model)
	if aerr := x.authorize(traced, r.Header.Get("Authorization")); aerr != nil {
		x.closeLive(conn, status.Error(aerr.Code, aerr.Message))
		return
	}
	ctx, cancel := x.bound(traced, timeout, callers)
	defer cancel()
	is, ok, herr := x.issuedBy(ctx, ls.handle)
	if herr != nil && x.who.Namespace != "" {
		// Under kubernetes only the store could say whose session the
		// handle resumes: the router will not resume it unchecked.
		x.closeLive(conn, status.Error(codes.Unavailable, "the session this resumption handle resumes cannot be checked now: "+herr.Error()))
		return
	}
	if ok {
		if x.who.Namespace != "" && is.caller != x.callerKey() {
			// Under kubernetes the router resumes sessions as itself,
			// and Google cannot tell its callers apart: a handle is
			// its session's caller's alone.
			x.closeLive(conn, status.Error(codes.PermissionDenied, "the session this resumption handle resumes is another caller's"))
			return
		}
		if x.pool.hasRegion(is.region) {
			// A resumed session goes where its handle was issued,
			// which alone holds the session's state.
			x.pinned = is.region
		}
	}
	x.pool.inFlight.Inc()
	err = x.admit(ctx)
	if err == nil {
		_, err = x.attempts(ctx, func(actx context.Context) (policy.Report, bool, error) {
			return x.setUpLive(actx, conn, &ls, version)
		})
	} else {
		code, msg, _ := x.refusal(err)
		err = status.Error(code, msg)
	}
	x.pool.inFlight.Dec()
	cancel()
	if err != nil {
		x.closeLive(conn, err)
		return
	}
	if ls.region == nil {
		return // the caller went before its setupComplete reached it
	}
	x.s.bodies.give(int64(len(ls.setup)))
	x.held -= int64(len(ls.setup))
	if !x.s.live.add(conn) {
		_ = ls.region.Close()
		return
	}
	defer x.s.live.remove(conn)
	sessions := x.s.metrics.LiveSessions(x.pool.label)
	sessions.Inc()
	defer sessions.Dec()
	x.relayLive(conn, ls.region)
}

// readSetup reads the session's first message, its setup, within the body
// read deadline and no larger than a request body may be, holding its
// bytes in the budget, and finds the model it names.
func (x *exchange) readSetup(conn *websocket.Conn) (liveSession, error) {
	var ls liveSession
	conn.SetReadLimit(x.s.maxBody)
	_ = conn.SetReadDeadline(time.Now().Add(x.s.bodyTimeout))
	kind, setup, err := conn.ReadMessage()
	if err != nil {
		if errors.Is(err, websocket.ErrReadLimit) {
			return ls, status.Errorf(codes.InvalidArgument, "setup message larger than %d bytes", x.s.maxBody)
		}
		if _, closed := errors.AsType[*websocket.CloseError](err); closed {
			return ls, status.Error(codes.Canceled, "the caller closed the session before its setup")
		}
		return ls, status.Errorf(codes.DeadlineExceeded, "no setup message within %s: %v", x.s.bodyTimeout, err)
	}
	_ = conn.SetReadDeadline(time.Time{})
	if !x.s.bodies.take(int64(len(setup))) {
		return ls, status.Error(codes.ResourceExhausted, x.s.bodies.full())
	}
	x.held += int64(len(setup))
	ls.kind, ls.setup = kind, setup
	ls.model, ls.start, ls.end, ls.handle, err = setupModel(setup)
	return ls, err
}

// setupModel finds setup.model in a setup message: its value, and where
// the JSON string that holds it starts and ends in msg, so that it alone
// can be replaced and every other byte kept; and the handle of the session
// it resumes (setup.sessionResumption.handle), if any. The message must be
// one JSON object, with one setup.model.
func setupModel(msg []byte) (model string, start, end int, handle string, err error) {
	bad := func(why string) (string, int, int, string, error) {
		return "", 0, 0, "", status.Error(codes.InvalidArgument, "the Live session's first message must be its setup naming the model (setup.model): "+why)
	}
	// A frame is an open object or array: for an object, the key of the
	// member being read and whether a key comes next.
	type frame struct {
		obj, wantKey bool
		key          string
	}
	var st []frame
	valueDone := func() {
		if n := len(st); n > 0 && st[n-1].obj {
			st[n-1].wantKey = true
		}
	}
	dec := json.NewDecoder(bytes.NewReader(msg))
	found := false
	for {
		before := int(dec.InputOffset())
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			if !found {
				return bad("no setup.model")
			}
			return model, start, end, handle, nil
		}
		if err != nil {
			return bad(err.Error())
		}
		n := len(st)
		d, delim := tok.(json.Delim)
		switch {
		case n > 0 && st[n-1].obj && st[n-1].wantKey:
			if delim { // '}': the object ends
				st = st[:n-1]
				valueDone()
				continue
			}
			st[n-1].key, st[n-1].wantKey = tok.(string), false
		case delim && (d == '{' || d == '['):
			st = append(st, frame{obj: d == '{', wantKey: d == '{'})
		case delim: // ']'
			st = st[:n-1]
			valueDone()
		case n == 2 && st[0].obj && st[0].key == "setup" && st[1].obj && st[1].key == "model":
			// The whole message is read: a second setup.model, which
			// the region's parser might take where the router took the
			// first, would send the session to a model the caller was
			// not authorized for.
			m, ok := tok.(string)
			if !ok {
				return bad("setup.model is not a string")
			}
			if found {
				return bad("setup.model is given twice")
			}
			found, model, end = true, m, int(dec.InputOffset())
			start = before + bytes.IndexByte(msg[before:end], '"')
			valueDone()
		case n == 3 && st[0].obj && st[0].key == "setup" && st[1].obj && st[1].key == "sessionResumption" && st[2].obj && st[2].key == "handle":
			handle, _ = tok.(string)
			valueDone()
		default:
			valueDone()
		}
	}
}

// setUpLive is one attempt to set the session up in x.target's region: the
// websocket opened, the setup sent with the region's location in its model,
// and the region's first message awaited, all within ctx. The first message
// (setupComplete) goes to the caller, and the session is committed; a
// handshake refused or a session closed before it is the attempt's error.
func (x *exchange) setUpLive(ctx context.Context, caller *websocket.Conn, ls *liveSession, version string) (policy.Report, bool, error) {
	region, err := x.s.up.Live(ctx, x.target, version, x.r.Header)
	if err != nil {
		return x.report(err), false, err
	}
	stop := context.AfterFunc(ctx, func() { _ = region.Close() })
	model := upstream.ModelName(&x.pool.table, x.target.Region)
	quoted, _ := json.Marshal(model)
	setup := make([]byte, 0, len(ls.setup)-(ls.end-ls.start)+len(quoted))
	setup = append(append(append(setup, ls.setup[:ls.start]...), quoted...), ls.setup[ls.end:]...)
	err = region.WriteMessage(ls.kind, setup)
	var kind int
	var first []byte
	if err == nil {
		kind, first, err = region.ReadMessage()
	}
	if !stop() || err != nil {
		_ = region.Close()
		if cerr := ctx.Err(); cerr != nil {
			err = cerr
		} else {
			err = upstream.LiveCloseError(err)
		}
		return x.report(err), false, err
	}
	x.settle(policy.Report{Outcome: policy.Success})
	if err := caller.WriteMessage(kind, first); err != nil {
		_ = region.Close()
		return policy.Report{Outcome: gaveUp}, true, err
	}
	ls.region = region
	return policy.Report{Outcome: policy.Success}, true, nil
}

// liveMessage reads a region's message on its way to the caller: a
// resumption handle it issues is remembered, and usageMetadata (a turn's
// end) is counted as a REST answer's is and learned as a request the
// session made of the region, with its tokens (learnLive).
func (x *exchange) liveMessage(msg []byte) {
	if bytes.Contains(msg, resumptionUpdate) {
		h := x.s.live.remember(msg, issued{region: x.target.Region.Name, caller: x.key, at: time.Now()})
		if h != "" && x.s.handles != nil {
			x.s.handles.RememberHandle(h, x.target.Region.Name, x.key)
		}
	}
	x.scan.Reset(upstream.FrameObject)
	_, _ = x.scan.Write(msg)
	if x.scan.Tokens == 0 && x.scan.InputTokens == 0 && x.scan.OutputTokens == 0 {
		return
	}
	x.answered(x.scan.InputTokens, x.scan.OutputTokens, x.scan.TrafficType)
	x.learnLive(policy.Report{Outcome: policy.Success, Tokens: x.scan.Tokens, OnDemand: onDemand(x.scan.TrafficType)})
}

// relayLive passes the session's messages both ways, each unchanged and of
// its kind, until one side closes or breaks off; its close (code and text)
// is passed to the other side, and both connections are closed. The
// caller's messages are no larger than a request body may be; the
// region's are read on their way (liveMessage).
func (x *exchange) relayLive(caller, region *websocket.Conn) {
	defer func() { _ = region.Close() }()
	caller.SetReadLimit(x.s.maxBody)
	done := make(chan struct{})
	var callerEnded atomic.Bool
	go func() {
		defer close(done)
		for {
			kind, msg, err := caller.ReadMessage()
			if err != nil {
				callerEnded.Store(true)
				passClose(region, err, websocket.CloseGoingAway, "the caller's connection broke off")
				// The region has a moment to close its side; then the
				// relay ends regardless.
				_ = region.SetReadDeadline(time.Now().Add(closeGrace))
				return
			}
			if region.WriteMessage(kind, msg) != nil {
				_ = caller.Close()
				return
			}
		}
	}()
	for {
		kind, msg, err := region.ReadMessage()
		if err != nil {
			if !callerEnded.Load() {
				x.learnLiveEnd(err)
			}
			passClose(caller, err, websocket.CloseInternalServerErr, "UNAVAILABLE: the region's connection broke off")
			_ = caller.Close()
			break
		}
		x.liveMessage(msg)
		if caller.WriteMessage(kind, msg) != nil {
			_ = caller.Close()
			break
		}
	}
	<-done
}

// learnLiveEnd teaches the policy what a region that ended a session set
// up (its attempt long settled) said by it: a close with an error, a full
// quota (a turn past the PT's, say: RESOURCE_EXHAUSTED) or the connection
// broken off. Without it, a PT called dedicated that is full would take
// every new session and end each at its first turn past its quota, and a
// region that breaks its sessions would never be ejected. The turn the
// region refused was a request to it (learnLive). A close that ends a
// session well (1000, 1001 going away: Google's sessions have a time
// limit) teaches nothing.
func (x *exchange) learnLiveEnd(err error) {
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		switch ce.Code {
		case websocket.CloseNormalClosure, websocket.CloseGoingAway, websocket.CloseNoStatusReceived:
			return
		}
	}
	rep := upstream.Report(context.Background(), upstream.LiveCloseError(err), x.s.callersCreds, x.pool.table.Key())
	switch rep.Outcome {
	case policy.Failure, policy.Capacity, policy.ProvisionedFull:
		x.learnLive(rep)
	}
}

// learnLive teaches the policy rep, the outcome of a request a session
// made of its region after it was set up: a turn the region answered (its
// tokens, which a PT's meter counts), or one it refused by ending the
// session (learnLiveEnd). The session's own attempt ended at setupComplete,
// so each is learned as an attempt of its own, pinned to the session's
// region and capacity, as a call of the pool's would be: the meters count
// what the session takes of the region's quotas, and the next calls and
// sessions go where there is room. When the policy would not send a call
// to that capacity now (full, or the region ejected), it knows already,
// and nothing is learned.
func (x *exchange) learnLive(rep policy.Report) {
	if d := x.pool.demand; d != nil {
		d.Add(x.s.now().UnixNano()) // the pool's demand, for its share, as admit counts it
	}
	req := x.s.request(context.Background(), x.prio)
	req.Region, req.Caller = x.target.Region.Name, x.key
	pc := x.pool.router.Start(req)
	a, err := pc.Pick()
	if err != nil {
		return
	}
	if a.Region != x.target.Region.Name || a.Tier != x.target.Region.Tier || a.PayGo != x.target.PayGo {
		a.Finish(policy.Report{Outcome: policy.Cancelled}) //nolint:misspell // the policy package's name
		return
	}
	out := a.Finish(rep)
	x.pool.series.attempt(&x.target.Region, out, 0)
}

// closeGrace is how long the region has to close a session the caller
// closed before the relay cuts it.
const closeGrace = 5 * time.Second

// passClose ends the other side of a session with how this side ended:
// the close frame it sent (code and text), or code and text when it broke
// off without one (genai's Session.Close closes the connection so). A close
// frame without a code (1005, which a frame cannot carry) is passed as a
// normal close.
func passClose(to *websocket.Conn, err error, code int, text string) {
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		switch ce.Code {
		case websocket.CloseNoStatusReceived:
			code, text = websocket.CloseNormalClosure, ""
		case websocket.CloseAbnormalClosure, websocket.CloseTLSHandshake:
			// Broken off: code and text say so.
		default:
			code, text = ce.Code, ce.Text
		}
	}
	_ = to.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), time.Now().Add(closeGrace))
}

// closeLive ends a session the router refused or could not set up with
// err, in a close frame as Google's servers send one: the code
// upstream.LiveCloseCode gives, the status's name and its message as text
// (at most the 123 bytes a close frame holds). x.status takes the HTTP
// status a REST call would have been answered with, for the request's
// metrics and log.
func (x *exchange) closeLive(conn *websocket.Conn, err error) {
	st := status.Convert(err)
	if errors.Is(err, context.DeadlineExceeded) {
		st = status.New(codes.DeadlineExceeded, "the Live session was not set up within the request timeout")
	}
	x.status = upstream.HTTPStatus(st.Code())
	text := upstream.StatusName(st.Code()) + ": " + st.Message()
	if len(text) > 123 {
		text = text[:123]
		for !utf8.ValidString(text) {
			text = text[:len(text)-1]
		}
	}
	_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(upstream.LiveCloseCode(st.Code()), text), time.Now().Add(x.s.writeTimeout))
}

// liveSessions are the sessions being relayed, so that the router can end
// them when it stops: http.Server's Shutdown neither waits for nor closes
// the connections its handlers took over; and the regions that issued the
// resumption handles the router relayed, so that a session resumed through
// this router goes where its state is.
type liveSessions struct {
	mu     sync.Mutex
	open   map[*websocket.Conn]struct{}
	closed bool

	handles map[string]issued
	order   []string // the handles, oldest first, for eviction
}

// issued is where, to whom and when a resumption handle was issued.
type issued struct {
	region string
	caller uint64 // the session's callerKey
	at     time.Time
}

// Resumption handles are kept for maxHandleAge, at most maxHandles of them
// (the oldest go first): a handle older than that is routed as a new
// session, as one relayed by another replica is.
const (
	maxHandles   = 10000
	maxHandleAge = 24 * time.Hour
)

// resumptionUpdate is the member of a region's message that carries a new
// resumption handle.
var resumptionUpdate = []byte(`"sessionResumptionUpdate"`)

// remember notes the handle a region's message issues, if it issues one,
// and returns it ("" when it issues none).
func (l *liveSessions) remember(msg []byte, is issued) string {
	var m struct {
		SessionResumptionUpdate *struct {
			NewHandle string `json:"newHandle"`
			Resumable bool   `json:"resumable"`
		} `json:"sessionResumptionUpdate"`
	}
	if json.Unmarshal(msg, &m) != nil || m.SessionResumptionUpdate == nil || m.SessionResumptionUpdate.NewHandle == "" {
		return ""
	}
	h := m.SessionResumptionUpdate.NewHandle
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.handles == nil {
		l.handles = make(map[string]issued)
	}
	if _, ok := l.handles[h]; !ok {
		l.order = append(l.order, h)
	}
	l.handles[h] = is
	for len(l.order) > maxHandles {
		delete(l.handles, l.order[0])
		l.order = l.order[1:]
	}
	return h
}

// liveHandles keeps, for every router, the region and the caller of each
// resumption handle a router relayed (share.Meter, in the share store).
type liveHandles interface {
	RememberHandle(handle, region string, caller uint64)
	HandleOf(ctx context.Context, handle string) (region string, caller uint64, ok bool, err error)
}

// handlesOf is the share store's keeper of handles, nil without one.
func handlesOf(c *share.Controller) liveHandles {
	if c == nil || c.Meter() == nil {
		return nil
	}
	return c.Meter()
}

// issuedBy is where and to whom handle was issued: as this router relayed
// it, or else as the share store says another router did (a client's
// reconnection reaches any router behind the Service). Without either the
// session is routed as a new one. err is the store's failure to tell
// (share.ErrHandlesUnknown).
func (x *exchange) issuedBy(ctx context.Context, handle string) (issued, bool, error) {
	if is, ok := x.s.live.issuedBy(handle); ok || handle == "" || x.s.handles == nil {
		return is, ok, nil
	}
	region, caller, ok, err := x.s.handles.HandleOf(ctx, handle)
	return issued{region: region, caller: caller, at: time.Now()}, ok, err
}

// issuedBy is where and to whom handle was issued, if this router relayed
// it within maxHandleAge.
func (l *liveSessions) issuedBy(handle string) (issued, bool) {
	if handle == "" {
		return issued{}, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	is, ok := l.handles[handle]
	if !ok || time.Since(is.at) > maxHandleAge {
		return issued{}, false
	}
	return is, true
}

// add counts a session in; false, and the session closed as going away,
// once the router is stopping.
func (l *liveSessions) add(c *websocket.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		goAway(c)
		return false
	}
	if l.open == nil {
		l.open = make(map[*websocket.Conn]struct{})
	}
	l.open[c] = struct{}{}
	return true
}

// stopping reports whether the router is stopping (CloseLiveSessions).
func (l *liveSessions) stopping() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

func (l *liveSessions) remove(c *websocket.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.open, c)
}

// goAway ends a session the router is stopping under: 1001 (going away),
// the status an SDK reconnects on, and the caller's connection closed,
// which ends its relay and closes the region's side.
func goAway(c *websocket.Conn) {
	_ = c.WriteControl(websocket.CloseMessage,
		websocket.FormatCloseMessage(websocket.CloseGoingAway, "UNAVAILABLE: the router is shutting down; open a new session"),
		time.Now().Add(closeGrace))
	_ = c.Close()
}

// CloseLiveSessions ends every Live session the router relays, and any
// set up from now on, with a close frame 1001 (going away) that says the
// router is shutting down, so that their callers open new ones through
// another router rather than find them cut off when the process exits. The
// router calls it when it stops, after the drain.
func (s *Server) CloseLiveSessions() {
	s.live.mu.Lock()
	defer s.live.mu.Unlock()
	s.live.closed = true
	for c := range s.live.open {
		goAway(c)
	}
}
