// Package loadtest is the open-loop load of the data-plane benchmarks: calls
// sent at their due times whether or not earlier ones have answered, their
// latencies measured from those times, and what the machine and a process
// spent meanwhile. The router's benchmark in one process (router/server) and
// the one of the router binary in a process of its own (cmd/router) load it
// the same way.
package loadtest

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Load sends one JSON body, with POST, to the URLs it is given.
type Load struct {
	// Client's transport sends the calls. As a load generator does (wrk2's
	// connections, vegeta's -max-connections), it should keep a bounded
	// set of connections per host (New's does): a call that finds them all
	// busy waits for one, and the wait counts in its latency, as its due
	// time has passed. Unbounded, a moment of the machine stalling opens a
	// connection per call queued behind it, thousands, and what is
	// measured is their setup.
	Client *http.Client
	Body   []byte
}

// GenerateBody is the benchmarks' call: a generateContent request of a
// short prompt, as an application sends one.
var GenerateBody = []byte(`{"contents":[{"role":"user","parts":[{"text":"Which regions hold provisioned capacity for this model?"}]}],"generationConfig":{"temperature":0.2,"maxOutputTokens":256}}`)

// New is a Load of body with a transport of at most 256 connections a host.
func New(body []byte) *Load {
	return &Load{Client: &http.Client{Transport: &http.Transport{MaxConnsPerHost: 256, MaxIdleConnsPerHost: 256}}, Body: body}
}

var jsonContentType = []string{"application/json"}

// Call sends one call to url and reads the whole answer; an answer other
// than 200 is an error. It uses the transport straight, as a proxy's load
// generator would: http.Client's own work (header copies, redirects) is the
// same for every path and would only add to the CPU they share.
func (l *Load) Call(url string) error {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(l.Body))
	if err != nil {
		return err
	}
	req.Header["Content-Type"] = jsonContentType
	resp, err := l.Client.Transport.RoundTrip(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	return err
}

// OpenLoop sends n calls to each of urls, interleaved, at rate calls per
// second per url, each at its due time whether or not earlier ones have
// answered (open-loop load: a slow answer does not slow the load down, and
// a late start counts in the latency). It returns each url's latencies,
// measured from the call's due time, and how many calls failed; the first
// failure is printed to stderr.
func (l *Load) OpenLoop(urls []string, rate, n int) ([][]time.Duration, int) {
	var (
		mu     sync.Mutex
		lat    = make([][]time.Duration, len(urls))
		failed int
		wg     sync.WaitGroup
		first  error
	)
	defer func() {
		if first != nil {
			fmt.Fprintf(os.Stderr, "first failure: %v\n", first)
		}
	}()
	every := time.Second / time.Duration(rate*len(urls))
	start := time.Now()
	for i := range n * len(urls) {
		due := start.Add(time.Duration(i) * every)
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		path := i % len(urls)
		wg.Go(func() {
			err := l.Call(urls[path])
			d := time.Since(due)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if failed == 0 {
					first = err
				}
				failed++
				return
			}
			lat[path] = append(lat[path], d)
		})
	}
	wg.Wait()
	return lat, failed
}

// Quantile is the q quantile of l, in microseconds; it sorts l.
func Quantile(l []time.Duration, q float64) float64 {
	if len(l) == 0 {
		return 0
	}
	slices.Sort(l)
	return float64(l[min(int(q*float64(len(l))), len(l)-1)].Nanoseconds()) / 1e3
}

// tick is the unit of /proc's CPU times: USER_HZ is 100 on Linux.
const tick = 10 * time.Millisecond

// MachineCPU reads the machine's CPU time, busy and all, from /proc/stat;
// zero where there is none.
func MachineCPU() [2]time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return [2]time.Duration{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return [2]time.Duration{}
	}
	var busy, total time.Duration
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		total += time.Duration(n) * tick
		if i != 3 && i != 4 { // idle, iowait
			busy += time.Duration(n) * tick
		}
	}
	return [2]time.Duration{busy, total}
}

// MachineShare is how busy the machine's CPUs were between two readings of
// MachineCPU, in percent, and the share of that busy time ours took.
func MachineShare(before, after [2]time.Duration, ours time.Duration) (busyPct, oursPct float64) {
	busy, total := after[0]-before[0], after[1]-before[1]
	if total <= 0 || busy <= 0 {
		return 0, 0
	}
	return 100 * float64(busy) / float64(total), 100 * float64(ours) / float64(busy)
}

// LoadAverage is the machine's load averages over 1, 5 and 15 minutes, as
// uptime shows them; "unknown" where there are none.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// ProcessCPU is the user and system CPU time process pid has used, from
// /proc/PID/stat (in ticks of 10 ms); zero where there is none.
func ProcessCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name, in parentheses, may hold spaces: the fields
	// counted are those after it, state first (field 3 of proc(5)).
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, _ := strconv.ParseInt(f[12], 10, 64) // field 15
	return time.Duration(utime+stime) * tick
}
