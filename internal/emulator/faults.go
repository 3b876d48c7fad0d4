package emulator

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"time"

	"google.golang.org/grpc/codes"
)

// faultCodes maps the HTTP codes a fault may inject to their gRPC codes.
var faultCodes = map[int]codes.Code{
	404: codes.NotFound,
	429: codes.ResourceExhausted,
	500: codes.Internal,
	503: codes.Unavailable,
	504: codes.DeadlineExceeded,
}

// z99 is the standard normal quantile at 0.99.
const z99 = 2.326347874

// streamSeed derives a seed for one named random stream from the run's seed,
// so streams do not depend on each other's consumption.
func streamSeed(seed uint64, parts ...string) uint64 {
	h := fnv.New64a()
	for _, p := range parts {
		_, _ = h.Write([]byte(p))
		_, _ = h.Write([]byte{0})
	}
	return h.Sum64() ^ seed
}

// burstProcess decides which calls of a fault window fail. Failures come in
// runs of exactly burst calls; a run starts at a call outside a run with
// probability p = r / (r + burst*(1-r)), which keeps the long-run failure
// fraction at r: a cycle holds burst failures and on average (1-p)/p
// successes, and burst / (burst + (1-p)/p) = r.
// Not safe for concurrent use; the region serializes calls to it.
type burstProcess struct {
	rng       *rand.Rand
	start     float64 // probability that a call outside a run starts one
	burst     int
	remaining int // failures left in the current run
}

func newBurstProcess(rate float64, burst int, seed uint64) *burstProcess {
	if burst < 1 {
		burst = 1
	}
	p := 0.0
	if rate >= 1 {
		p = 1
	} else if rate > 0 {
		p = rate / (rate + float64(burst)*(1-rate))
	}
	return &burstProcess{rng: rand.New(rand.NewPCG(seed, seed>>1|1)), start: p, burst: burst}
}

// fail reports whether the next call fails.
func (b *burstProcess) fail() bool {
	if b.remaining > 0 {
		b.remaining--
		return true
	}
	if b.start > 0 && b.rng.Float64() < b.start {
		b.remaining = b.burst - 1
		return true
	}
	return false
}

// latencySampler draws latencies from a region's distribution.
// Not safe for concurrent use; the region serializes calls to it.
type latencySampler struct {
	rng       *rand.Rand
	mu, sigma float64 // of ln(latency in ns)
	fixed     time.Duration
}

func newLatencySampler(l Latency, seed uint64) *latencySampler {
	s := &latencySampler{rng: rand.New(rand.NewPCG(seed, seed>>1|1)), fixed: l.P50.Duration}
	s.mu, s.sigma = l.lognormal()
	return s
}

// lognormal is the distribution's mu and sigma, of ln(latency in ns); sigma
// is zero when the latency is fixed at P50.
func (l Latency) lognormal() (mu, sigma float64) {
	if l.Distribution != Lognormal || l.P99.Duration <= l.P50.Duration {
		return 0, 0
	}
	mu = math.Log(float64(l.P50.Duration))
	return mu, (math.Log(float64(l.P99.Duration)) - mu) / z99
}

// Within is the share of calls whose latency, drawn from l, is shorter
// than d: the distribution's CDF at d. A caller whose deadline leaves d for
// the region's own latency (its deadline less what faults add) is answered
// in time by that share of its calls.
func (l Latency) Within(d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	mu, sigma := l.lognormal()
	if sigma == 0 {
		if d > l.P50.Duration {
			return 1
		}
		return 0
	}
	return 0.5 * math.Erfc(-(math.Log(float64(d))-mu)/(sigma*math.Sqrt2))
}

func (s *latencySampler) sample() time.Duration {
	if s.sigma == 0 {
		return s.fixed
	}
	return time.Duration(math.Exp(s.mu + s.sigma*s.rng.NormFloat64()))
}

// AddedLatencyAt is the latency the fault adds at scenario time t inside its window.
func (f *Fault) AddedLatencyAt(t time.Duration) time.Duration {
	if f.AddedLatencyEnd.Duration == 0 {
		return f.AddedLatency.Duration
	}
	span := f.To.Duration - f.From.Duration
	frac := float64(t-f.From.Duration) / float64(span)
	frac = math.Max(0, math.Min(1, frac))
	a, b := float64(f.AddedLatency.Duration), float64(f.AddedLatencyEnd.Duration)
	return time.Duration(a + (b-a)*frac)
}

// Active reports whether t falls in the fault's window.
func (f *Fault) Active(t time.Duration) bool {
	return t >= f.From.Duration && t < f.To.Duration
}
