package auth

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/regionwarden/regionwarden/internal/defaults"
)

// Audience is the audience a ServiceAccount token must be issued for to
// call the router: a projected token with this audience is good for the
// router and nothing else, and a token for the API server is refused.
const Audience = "regionwarden"

// Defaults of ReviewerOptions.
const (
	// DefaultCacheSize bounds the tokens remembered.
	DefaultCacheSize = 10000
	// DefaultCacheTTL bounds how long a token is trusted without asking
	// again, within its own expiry: a ServiceAccount or pod deleted stops
	// calling within it. It is the API server's own default for webhook
	// token caches (--authentication-token-webhook-cache-ttl).
	DefaultCacheTTL = 2 * time.Minute
	// DefaultRefusedTTL is how long a refused token is refused without
	// asking again.
	DefaultRefusedTTL = 10 * time.Second
	// DefaultMaxReviews bounds the TokenReviews in flight at once, so a
	// flood of new tokens cannot flood the API server.
	DefaultMaxReviews = 16
	// DefaultReviewWait bounds how long a call waits for a TokenReview slot
	// before it is answered 503.
	DefaultReviewWait = 2 * time.Second
)

// ReviewerOptions configures a Reviewer. Every zero field takes its default.
type ReviewerOptions struct {
	// CacheSize is the most tokens remembered. Default DefaultCacheSize.
	CacheSize int
	// CacheTTL is the longest a token is trusted without asking again; a
	// token is never trusted past its own expiry. Default DefaultCacheTTL.
	CacheTTL time.Duration
	// RefusedTTL is how long a refused token is refused without asking
	// again. Default DefaultRefusedTTL.
	RefusedTTL time.Duration
	// MaxReviews is the most TokenReviews in flight. Default DefaultMaxReviews.
	MaxReviews int
	// ReviewWait is how long a call waits for a TokenReview slot. Default
	// DefaultReviewWait.
	ReviewWait time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// TokenReviews creates TokenReviews: client-go's
// AuthenticationV1().TokenReviews().
type TokenReviews interface {
	Create(ctx context.Context, tr *authnv1.TokenReview, opts metav1.CreateOptions) (*authnv1.TokenReview, error)
}

// Identity is a ServiceAccount.
type Identity struct {
	Namespace, Name string
}

// Reviewer checks ServiceAccount tokens with TokenReviews through the API
// server, for the audience Audience. An answer is remembered by the token's
// SHA-256 (never the token itself) until the token expires, and at most
// CacheTTL; refusals for RefusedTTL. Concurrent calls with one token share
// one review. It is safe for concurrent use.
type Reviewer struct {
	api  TokenReviews
	opts ReviewerOptions

	slots chan struct{} // a TokenReview in flight holds one

	mu       sync.Mutex
	cache    map[[sha256.Size]byte]*review // guarded by mu
	inFlight map[[sha256.Size]byte]*review // guarded by mu
}

// review is one token's answer: an identity, or why it was refused.
type review struct {
	done    chan struct{} // closed once id, err and until are set
	id      Identity
	err     error
	until   time.Time
	refused bool // err is the token's fault, not the API server's
}

// NewReviewer returns a Reviewer that creates TokenReviews with api.
func NewReviewer(api TokenReviews, opts ReviewerOptions) *Reviewer {
	defaults.Positive(&opts.CacheSize, DefaultCacheSize)
	defaults.Positive(&opts.CacheTTL, DefaultCacheTTL)
	defaults.Positive(&opts.RefusedTTL, DefaultRefusedTTL)
	defaults.Positive(&opts.MaxReviews, DefaultMaxReviews)
	defaults.Positive(&opts.ReviewWait, DefaultReviewWait)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Reviewer{
		api: api, opts: opts,
		slots:    make(chan struct{}, opts.MaxReviews),
		cache:    map[[sha256.Size]byte]*review{},
		inFlight: map[[sha256.Size]byte]*review{},
	}
}

// Review returns the ServiceAccount token belongs to. A refusal is an
// *Error: 401 for a token the API server does not accept for Audience or
// that is not a ServiceAccount's, 503 when the API server could not be asked.
func (r *Reviewer) Review(ctx context.Context, token string) (Identity, error) {
	key := sha256.Sum256([]byte(token))
	r.mu.Lock()
	if c, ok := r.cache[key]; ok {
		if r.opts.Now().Before(c.until) {
			r.mu.Unlock()
			return c.id, c.err
		}
		delete(r.cache, key)
	}
	if c, ok := r.inFlight[key]; ok {
		r.mu.Unlock()
		select {
		case <-c.done:
			return c.id, c.err
		case <-ctx.Done():
			return Identity{}, unavailable(ctx.Err())
		}
	}
	c := &review{done: make(chan struct{})}
	r.inFlight[key] = c
	r.mu.Unlock()

	r.ask(ctx, token, c)

	r.mu.Lock()
	delete(r.inFlight, key)
	if c.refused || c.err == nil {
		r.remember(key, c)
	}
	r.mu.Unlock()
	close(c.done)
	return c.id, c.err
}

// ask fills c with the API server's answer about token.
func (r *Reviewer) ask(ctx context.Context, token string, c *review) {
	wait := time.NewTimer(r.opts.ReviewWait)
	defer wait.Stop()
	select {
	case r.slots <- struct{}{}:
		defer func() { <-r.slots }()
	case <-wait.C:
		c.err = unavailable(errors.New("too many ServiceAccount tokens are being checked at once"))
		return
	case <-ctx.Done():
		c.err = unavailable(ctx.Err())
		return
	}
	now := r.opts.Now()
	tr, err := r.api.Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token, Audiences: []string{Audience}}}, metav1.CreateOptions{})
	if err != nil {
		c.err = unavailable(err)
		return
	}
	c.id, c.err = identity(tr.Status)
	if c.err != nil {
		c.refused, c.until = true, now.Add(r.opts.RefusedTTL)
		return
	}
	c.until = now.Add(r.opts.CacheTTL)
	if exp, ok := expiry(token); ok && exp.Before(c.until) {
		c.until = exp
	}
}

// remember keeps c under key. When the cache is full, expired answers go
// first, then an arbitrary one (Go's map order), so the cache stays bounded
// whatever the callers send. Caller must hold r.mu.
func (r *Reviewer) remember(key [sha256.Size]byte, c *review) {
	if len(r.cache) >= r.opts.CacheSize {
		now := r.opts.Now()
		for k, old := range r.cache {
			if !now.Before(old.until) {
				delete(r.cache, k)
			}
		}
		for k := range r.cache {
			if len(r.cache) < r.opts.CacheSize {
				break
			}
			delete(r.cache, k)
		}
	}
	r.cache[key] = c
}

// serviceAccountPrefix begins the user name of every ServiceAccount.
const serviceAccountPrefix = "system:serviceaccount:"

// identity reads a TokenReview's answer: the ServiceAccount, or why the
// token is refused.
func identity(st authnv1.TokenReviewStatus) (Identity, error) {
	if !st.Authenticated {
		msg := "the Kubernetes API server does not accept the token"
		if st.Error != "" {
			msg += ": " + st.Error
		}
		return Identity{}, unauthenticated("%s (a ServiceAccount token with the audience %q is needed)", msg, Audience)
	}
	// An API server that does not know audiences answers with none: the
	// token is then one for the API server itself, not for the router.
	if !slices.Contains(st.Audiences, Audience) {
		return Identity{}, unauthenticated("the token is not issued for the audience %q: project a ServiceAccount token with that audience", Audience)
	}
	rest, ok := strings.CutPrefix(st.User.Username, serviceAccountPrefix)
	ns, name, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 || ns == "" || name == "" || strings.Contains(name, ":") {
		return Identity{}, unauthenticated("the token is %q's, not a ServiceAccount's", st.User.Username)
	}
	return Identity{Namespace: ns, Name: name}, nil
}

// expiry is the exp claim of a JWT, read without checking the signature:
// the API server has checked the token, this only bounds how long its
// answer is reused.
func expiry(token string) (time.Time, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}, false
	}
	var claims struct {
		Exp *json.Number `json:"exp"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil || claims.Exp == nil {
		return time.Time{}, false
	}
	secs, err := claims.Exp.Int64()
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(secs, 0), true
}

// unavailable is the answer when the router could not check a token.
func unavailable(err error) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Code: codes.Unavailable,
		Message: fmt.Sprintf("the router could not check the caller's ServiceAccount token: %v", err)}
}
