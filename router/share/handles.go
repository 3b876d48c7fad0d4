package share

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Live session resumption handles. Google keeps a Live session's state in
// the region that served it, and issues the session resumption handles
// that resume it there; a session resumed elsewhere is refused. The router
// notes the region (and the caller) of each handle it relays, so that a
// session resumed through it goes where its state is. Behind several
// routers a client's reconnection reaches any of them: the store keeps the
// handles for all of them.

// HandleTTL is how long the store keeps a handle: as long as a router keeps
// the handles it relayed itself (router/server).
const HandleTTL = 24 * time.Hour

// handleKey is the key of handle: its SHA-256, never the handle itself,
// which resumes its session for whoever holds it.
func (m *Meter) handleKey(handle string) string {
	sum := sha256.Sum256([]byte(handle))
	return m.prefix + "handle:" + hex.EncodeToString(sum[:])
}

// RememberHandle notes in the store, in the background (with the meter's
// other writes), that region issued handle to the session of caller.
func (m *Meter) RememberHandle(handle, region string, caller uint64) {
	m.queue(extension{key: m.handleKey(handle), member: region + " " + strconv.FormatUint(caller, 16), set: HandleTTL})
}

// ErrHandlesUnknown says the store did not answer whether a router noted a
// handle.
var ErrHandlesUnknown = errors.New("the share store does not answer")

// HandleOf is the region that issued handle and the caller of its session,
// as some router noted them (RememberHandle); ok is false when the store
// knows none (no router relayed it in HandleTTL, or it is not one Google
// issued). err (ErrHandlesUnknown) is when the store cannot tell.
//
// It asks on the meter's background connections, whose timeouts are a
// window (a second and a fortieth), not on the metering ones, whose timeout
// (20 ms by default) bounds what a call may wait on its way: a resumption
// is one read a session, made once, and a store that answers in 50 ms
// (another zone) must not have it refused or sent where the session's
// state is not; nor is the meter's finding that the store is down (its
// 20 ms went by) a reason not to ask.
func (m *Meter) HandleOf(ctx context.Context, handle string) (region string, caller uint64, ok bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(m.window)*time.Microsecond)
	defer cancel()
	v, err := m.bg.Get(ctx, m.handleKey(handle)).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return "", 0, false, nil
	case err != nil:
		m.log.Debug("share meter: a resumption handle was not read from the store", "router", m.id, "error", err)
		return "", 0, false, ErrHandlesUnknown
	}
	region, c, found := strings.Cut(v, " ")
	if caller, err = strconv.ParseUint(c, 16, 64); !found || err != nil {
		return "", 0, false, nil
	}
	return region, caller, true, nil
}
