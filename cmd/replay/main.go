// Command replay replays the incident scenarios against every routing policy
// (the count blocklist, the blocklist with the PT allowlist, regionwarden in
// process, the regionwarden router binary end to end and, where Node.js is
// installed, the Portkey gateway) and writes the results as a Markdown page
// and one PNG chart per scenario.
//
//	go run ./cmd/replay                        # every scenario in test/scenarios
//	go run ./cmd/replay --scenarios test/scenarios/retry-surge.yaml --out ''
//	go run ./cmd/replay --generate 12 --seed 7 --out /tmp/generated.md --charts ''
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/regionwarden/regionwarden/internal/command"
	"github.com/regionwarden/regionwarden/internal/emulator"
	"github.com/regionwarden/regionwarden/internal/replay"
)

func main() {
	command.Main("replay", func(ctx context.Context, args []string) error { return run(ctx, args, os.Stdout, os.Stderr) })
}

// config is the command line.
type config struct {
	scenarios string
	out       string
	charts    string
	policies  string
	seed      uint64
	repeat    int
	scale     float64
	duration  time.Duration
	routerBin string
	portkey   string
	pkScale   float64
	pkScens   string
	routers   int
	routersIn string
	verbose   bool
	generate  int
	genRate   float64
	writeTo   string
	timeline  time.Duration
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := command.FlagSet("replay", stderr)
	fs.StringVar(&c.scenarios, "scenarios", "test/scenarios", "scenario YAML files or folders, comma-separated")
	fs.StringVar(&c.out, "out", "docs/replays.md", "Markdown page to write; empty writes none")
	fs.StringVar(&c.charts, "charts", "docs/replays", "folder for the PNG charts; empty draws none")
	fs.StringVar(&c.policies, "policies", "", "policies to run, comma-separated among blocklist, allowlist, regionwarden, router, portkey; empty runs all")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the load and of the emulated regions")
	fs.IntVar(&c.repeat, "repeat", 1, "replay each scenario this many times, with --seed and the seeds after it: the page says each policy's success over them (mean, least, most), and with several scenarios its mean over all; the tables and charts are the first seed's")
	fs.Float64Var(&c.scale, "scale", 0, "scenario seconds per real second; 0 uses each scenario's timeScale")
	fs.DurationVar(&c.duration, "duration", 0, "replay only this much of each scenario (scenario time); 0 replays all")
	fs.StringVar(&c.routerBin, "router-bin", "", "router binary for the end-to-end column; empty builds ./cmd/router if it exists")
	fs.StringVar(&c.portkey, "portkey-dir", defaultPortkeyDir(), "folder where the Portkey gateway is installed from npm")
	fs.Float64Var(&c.pkScale, "portkey-scale", 6, "the fastest scale the Portkey gateway keeps up with (Node.js needs milliseconds of CPU per call); it replays in a pass of its own at this scale")
	fs.StringVar(&c.pkScens, "portkey-scenarios", strings.Join(portkeyScenarios, ","), "scenarios to replay the Portkey gateway in, comma-separated; empty means all")
	fs.IntVar(&c.routers, "routers", 3, "routers of the columns that share capacity (--routers-in); 1 leaves them out")
	fs.StringVar(&c.routersIn, "routers-in", replay.ScenarioManyRouters, "scenarios replayed with the columns of several routers that share capacity, comma-separated; all adds them to every scenario, generated ones too")
	fs.BoolVar(&c.verbose, "v", false, "print the policies' diagnostics")
	fs.IntVar(&c.generate, "generate", 0, "replay this many generated scenarios (failure shapes drawn at random from --seed) instead of --scenarios")
	fs.Float64Var(&c.genRate, "generate-rate", 1, "with --generate, multiplies each generated scenario's calls per second, its quotas and PTs alike (0.2: pools of 2 to 12 calls a second)")
	fs.StringVar(&c.writeTo, "write-scenarios", "", "with --generate, a folder to write the generated scenarios' YAML to, to replay or edit them later")
	fs.DurationVar(&c.timeline, "region-timeline", 0, "a width of scenario time (whole seconds, e.g. 10s): the page shows, per policy, what each region was sent and how it answered in each such span; 0 leaves it out")
	if err := command.Parse(fs, args); err != nil {
		return c, err
	}
	var lone, whole error
	if c.writeTo != "" && c.generate == 0 {
		lone = errors.New("--write-scenarios needs --generate")
	}
	if c.genRate != 1 && c.generate == 0 {
		lone = errors.Join(lone, errors.New("--generate-rate needs --generate"))
	}
	if c.timeline%time.Second != 0 {
		// The regions count their calls second by second.
		whole = fmt.Errorf("--region-timeline must be whole seconds, got %s", c.timeline)
	}
	return c, errors.Join(
		command.NotNegative("scale", c.scale),
		command.NotNegative("duration", c.duration),
		command.NotNegative("generate", c.generate),
		command.Positive("repeat", c.repeat),
		command.Positive("generate-rate", c.genRate),
		command.NotNegative("region-timeline", c.timeline),
		lone,
		whole,
	)
}

func defaultPortkeyDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "regionwarden", "portkey")
	}
	return ""
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	scenarios, err := loadScenarios(cfg)
	if err != nil {
		return err
	}
	if err := routersInKnown(cfg.routersIn, scenarios); err != nil {
		return err
	}
	logf := func(string, ...any) {}
	if cfg.verbose {
		logf = func(format string, a ...any) { fmt.Fprintf(stderr, format+"\n", a...) }
	}
	policies, notes, cleanup, err := choosePolicies(ctx, cfg, stdout, logf)
	if err != nil {
		return err
	}
	defer cleanup()

	notes = append(notes, machineNote(), policyNote)
	if cfg.generate > 0 {
		cmd := fmt.Sprintf("replay --generate %d --seed %d", cfg.generate, cfg.seed)
		if cfg.genRate != 1 {
			cmd += fmt.Sprintf(" --generate-rate %g", cfg.genRate)
		}
		notes = append(notes, fmt.Sprintf("The %d scenarios were generated from seed %d (`%s`): "+
			"random failure shapes with no targets; read each policy's success during the faults against what the regions can carry.",
			cfg.generate, cfg.seed, cmd))
	}
	begin := time.Now()
	var reports []*replay.Report
	var repeats [][]*replay.Report
	for _, sc := range scenarios {
		scale := cmp.Or(cfg.scale, sc.TimeScale) // --scale 0: the scenario's
		dur := sc.Duration.Duration
		if cfg.duration > 0 {
			dur = min(dur, cfg.duration)
		}
		cols := forScenario(policies, sc.Name, cfg.pkScens)
		cols = append(cols, routerColumns(cfg, sc.Name, dur)...)
		if sc.Name == replay.ScenarioSmallPTBursts && slices.ContainsFunc(cols, func(p replay.Policy) bool { return p.Name == replay.NameRegionwarden }) {
			// What the PT's window is worth: the same policy, metering
			// the PT over one second.
			cols = append(cols, replay.PerSecond())
		}
		fmt.Fprintf(stdout, "== %s: %s of scenario time at scale %g (about %s real), %d policies\n",
			sc.Name, dur, scale, time.Duration(float64(dur)/scale).Round(time.Second), len(cols))
		var runs []*replay.Report
		for k := range uint64(cfg.repeat) {
			if k > 0 {
				fmt.Fprintf(stdout, "   again with seed %d\n", cfg.seed+k)
			}
			r, err := replay.Run(ctx, sc, cols, replay.Options{
				Seed: cfg.seed + k, Scale: cfg.scale, Duration: cfg.duration,
				ProgressEvery: 5 * time.Second, Progress: progress(stdout), Logf: logf,
			})
			if err != nil {
				return fmt.Errorf("scenario %s, seed %d: %w", sc.Name, cfg.seed+k, err)
			}
			runs = append(runs, r)
		}
		rep := runs[0]
		if cfg.repeat > 1 {
			repeats = append(repeats, runs)
			for _, sp := range replay.Spreads(runs) {
				fmt.Fprintf(stdout, "   %-34s over %d seeds: %s\n", sp.Policy, sp.Runs, sp)
			}
		}
		for _, c := range replay.Checks(rep) {
			mark := "met"
			switch {
			case c.Skipped:
				mark = "not measured"
			case !c.Pass:
				mark = "MISSED"
			}
			fmt.Fprintf(stdout, "   target %s: %s: %s\n", mark, c.Target, c.Measured)
		}
		reports = append(reports, rep)
		if cfg.charts != "" {
			path := filepath.Join(cfg.charts, replay.ChartFile(rep.Scenario))
			if err := replay.WriteChart(path, rep); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "   chart %s\n", path)
		}
	}
	var slow time.Duration
	for _, r := range reports {
		slow += r.SlowWall
	}
	total := time.Since(begin)
	timing := fmt.Sprintf("All scenarios replayed in %s of real time", total.Round(time.Second))
	if slow > 0 {
		timing += fmt.Sprintf(": %s for the policies at each scenario's scale, and %s for the passes of policies too slow for it", (total - slow).Round(time.Second), slow.Round(time.Second))
	}
	fmt.Fprintln(stdout, timing)
	notes = append(notes, timing+".")
	if cfg.out == "" {
		return nil
	}
	page := replay.Page{Command: "make replay", Notes: notes, Reports: reports, Repeats: repeats, Timeline: cfg.timeline}
	if cfg.charts != "" {
		rel, err := filepath.Rel(filepath.Dir(cfg.out), cfg.charts)
		if err != nil {
			return err
		}
		page.ChartDir = filepath.ToSlash(rel)
	}
	var b strings.Builder
	if err := replay.WriteMarkdown(&b, page); err != nil {
		return err
	}
	if err := os.WriteFile(cfg.out, []byte(b.String()), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s\n", cfg.out)
	return nil
}

// machineNote says what the replay ran on: compressed-clock replays are only
// as faithful as the CPU they get, which the "load sent late" column measures.
func machineNote() string {
	load := "unknown"
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			load = f[0]
		}
	}
	return fmt.Sprintf("Replayed on %d CPUs with a load average of %s when the replay started. The replays run in real time on a "+
		"compressed clock, so a process that waits for a CPU falls behind its schedule and then sends its backlog at once; "+
		"the \"load sent late\" column measures that (at scale 30, 0.1 s of real delay is 3 s of scenario time).",
		runtime.NumCPU(), load)
}

// progress prints a line of running success rates every few seconds and one
// line per policy when its result is complete.
func progress(w io.Writer) func(replay.Event) {
	return func(ev replay.Event) {
		if r := ev.Result; r != nil {
			if r.Skipped != "" {
				fmt.Fprintf(w, "   %-34s skipped: %s\n", r.Policy, r.Skipped)
				return
			}
			fmt.Fprintf(w, "   %-34s %7.3f%% success, p50 %.2fs p99 %.2fs, PT %5.1f%%, %.3f attempts/call, %d no regions, %d shed (%d calls)\n",
				r.Policy, 100*r.SuccessRate(), r.P50.Seconds(), r.P99.Seconds(), 100*r.PTShare(), r.AttemptsPerRequest(), r.NoRegions, r.Shed, r.Requests)
			return
		}
		var parts []string
		for _, l := range ev.Live {
			if l.Skipped != "" {
				continue
			}
			parts = append(parts, fmt.Sprintf("%s %.1f%%", l.Policy, 100*l.SuccessRate()))
		}
		fmt.Fprintf(w, "   ... %s/%s  %s\n", ev.Elapsed.Truncate(time.Second), ev.Duration, strings.Join(parts, " | "))
	}
}

// loadScenarios reads every scenario before any replay starts, so a bad
// file is refused at once: the files --scenarios names, or the scenarios
// --generate draws (written to --write-scenarios when set).
func loadScenarios(cfg config) ([]*emulator.Scenario, error) {
	var out []*emulator.Scenario
	if cfg.generate > 0 {
		if cfg.writeTo != "" {
			if err := os.MkdirAll(cfg.writeTo, 0o755); err != nil {
				return nil, err
			}
		}
		for i := 1; i <= cfg.generate; i++ {
			sc, err := replay.GenerateAt(cfg.seed, i, cfg.genRate)
			if err != nil {
				return nil, err
			}
			if cfg.writeTo != "" {
				data, err := yaml.Marshal(sc)
				if err != nil {
					return nil, err
				}
				if err := os.WriteFile(filepath.Join(cfg.writeTo, sc.Name+".yaml"), data, 0o644); err != nil {
					return nil, err
				}
			}
			out = append(out, sc)
		}
		return out, nil
	}
	files, err := scenarioFiles(cfg.scenarios)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		sc, err := emulator.LoadScenario(f)
		if err != nil {
			return nil, err
		}
		out = append(out, sc)
	}
	return out, nil
}

// scenarioFiles expands a comma-separated list of files and folders into the
// scenario files, folders' YAML files sorted by name.
func scenarioFiles(list string) ([]string, error) {
	var out []string
	for _, p := range strings.Split(list, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			out = append(out, p)
			continue
		}
		m, err := filepath.Glob(filepath.Join(p, "*.yaml"))
		if err != nil {
			return nil, err
		}
		sort.Slice(m, func(i, j int) bool {
			ri, rj := scenarioRank(m[i]), scenarioRank(m[j])
			if ri != rj {
				return ri < rj
			}
			return m[i] < m[j]
		})
		out = append(out, m...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no scenarios in %q", list)
	}
	return out, nil
}

// forScenario leaves the Portkey gateway out of scenarios it is not asked
// for: at its scale it takes several minutes of real time per scenario.
func forScenario(policies []replay.Policy, scenario, portkeyScenarios string) []replay.Policy {
	if portkeyScenarios == "" {
		return policies
	}
	var out []replay.Policy
	for _, p := range policies {
		if p.Name == replay.NamePortkey && !slices.Contains(strings.Split(portkeyScenarios, ","), scenario) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// routerColumns are the columns of cfg.routers routers sharing capacity
// that scenario gets, of which dur is replayed: none unless --routers-in
// names it. The store is killed in the middle of what is replayed (of the
// provisioned region's outage, in many-routers), not of the whole scenario,
// which --duration may cut before the kill.
func routerColumns(cfg config, scenario string, dur time.Duration) []replay.Policy {
	if cfg.routers < 2 || !sharesIn(cfg.routersIn, scenario) {
		return nil
	}
	var cols []replay.Policy
	for _, o := range replay.ReplicaColumns(cfg.routers, dur/2) {
		cols = append(cols, replay.Replicas(o))
	}
	return cols
}

// sharesIn reports whether scenario is replayed with the columns of several
// routers sharing capacity: routersIn names it, or is "all". A failure shape
// nobody replayed behind several routers can break the sharing as well as
// the policy; all puts every generated one behind them.
func sharesIn(routersIn, scenario string) bool {
	names := strings.Split(routersIn, ",")
	return slices.Contains(names, "all") || slices.Contains(names, scenario)
}

// routersInKnown refuses a --routers-in that names a scenario not among
// those replayed, so that a mistyped name is not a replay without the
// columns it asked for. The default, many-routers, may be absent: a replay
// of other scenarios did not ask for it.
func routersInKnown(routersIn string, scenarios []*emulator.Scenario) error {
	if routersIn == replay.ScenarioManyRouters {
		return nil
	}
	for _, name := range strings.Split(routersIn, ",") {
		if name == "all" || slices.ContainsFunc(scenarios, func(sc *emulator.Scenario) bool { return sc.Name == name }) {
			continue
		}
		return fmt.Errorf("--routers-in names %q, which is not among the scenarios replayed", name)
	}
	return nil
}

// portkeyScenarios are the scenarios the Portkey gateway replays in by
// default: the outage, and the failure shapes of the provisioned region that
// a gateway with no policy handles by retrying every target. Each takes it
// minutes of real time at its scale.
var portkeyScenarios = []string{
	replay.ScenarioProvisionedIncident,
	replay.ScenarioProvisionedDown,
	replay.ScenarioProvisionedSlow,
	replay.ScenarioTotalOutage,
	replay.ScenarioManyRouters,
}

// scenarioOrder is the order in which the page tells the incident
// scenarios: the outage first, then its neighbors, then the failure shapes of
// the provisioned region; any other scenario comes after them.
var scenarioOrder = []string{
	replay.ScenarioProvisionedIncident,
	replay.ScenarioCascadingFailover,
	replay.ScenarioRetrySurge,
	replay.ScenarioProvisionedDown,
	replay.ScenarioUnreachable,
	replay.ScenarioDownPriorities,
	replay.ScenarioProvisionedSlow,
	replay.ScenarioNearDeadline,
	replay.ScenarioProvisionedThrottled,
	replay.ScenarioSharedContention,
	replay.ScenarioSpillFailing,
	replay.ScenarioSharedDown,
	replay.ScenarioTotalOutage,
	replay.ScenarioProvisionedFlapping,
	replay.ScenarioSharedHangs,
	replay.ScenarioManyRouters,
	replay.ScenarioSmallPTBursts,
	replay.ScenarioPriorityPayGo,
}

// scenarioRank is a scenario file's place in scenarioOrder.
func scenarioRank(path string) int {
	if i := slices.Index(scenarioOrder, strings.TrimSuffix(filepath.Base(path), ".yaml")); i >= 0 {
		return i
	}
	return len(scenarioOrder)
}

// policyNote says what regionwarden does in the scenarios, and what it still
// loses.
const policyNote = "How regionwarden gets its numbers. It counts each region's capacity over a sliding second, as the regions count their quota, and a PT's tokens over the PT's window (40 s for an order of up to 3 GSUs: small-pt-bursts), as Google counts them; it charges a call to a PT its expected tokens when it starts, so it sends no region more than it takes and a retry finds headroom where the table says there is some; once a PT's window has filled, it holds the PT to its rate over each tenth of its window while the pay-as-you-go quotas, and the PTs' overflows, have room, so a load above the PT's rate is served by the PT evenly rather than in turns of everything and nothing, and it holds a PT paced when it was demoted to its pace again once it is restored, rather than let it take its emptied window at once. " +
	"A provisioned region failing intermittently (the incident's runs of six 504s) keeps its first attempts, and its failed calls fall back to another region outside the retry budget (10% of calls plus one retry a second). " +
	"A call answered 429 (a full PT, or a region out of quota: provisioned-region-throttled) spills, outside the budget too, to a capacity it has not tried: Google refused it before the model ran, so nothing is repeated; a 429 throttles the capacity that answered it (at most twice what it accepts is sent there) but leaves its in-flight limit alone, as it refuses rate, not concurrency (shared-quota-contention). " +
	"A provisioned region failing at or over the ejection threshold (provisioned-region-down, total-outage) is demoted, never removed: the regions that answer take first attempts up to their quotas, it takes what they have no room for and a probe every half second and tenth call, and it gets its full share back after a run of probes succeeds, in the order they were sent (seven in a row after one failure in the ejection interval, more the more it failed, so that a region still failing half its calls strings one together by chance less than once in a hundred intervals); a region that refused connections is connected to again within a second of answering, so the probes find it back at once (provisioned-region-unreachable). A pay-as-you-go region failing as much is ejected, and ejected is not removed either: it takes only what the others have no room for (cascading-failover, spill-regions-failing); when its ejection ends it is on probation, ranked last still with a probe every half second and tenth call, until a run of probes succeeds, so a region still failing is not sent its share again; while it is ejected, once its failures have aged out of the ejection interval, it takes one of those calls at a time, whose answer says whether it serves again, so a region back before its ejection ends (each one longer than the last) takes them again within seconds (shared-region-down). A location that answers it does not serve the pool's model (Google's 404 \"Publisher Model ... was not found\" naming that model) fails as one that answers 503 does: its calls are retried where the model is served, and it is ejected (model-not-served); any other 404 is the caller's, passed on and never retried. Either takes that within the share of its bound it answers: one answering none takes none, and the call waits for a quota's room rather than be lost there (shared-region-hangs). A PT called in spillover mode overflows, once every other capacity that answers is full or the PT is ahead of its pace, into its location's pay-as-you-go, where Google would spill it, sent at most about twice what that accepts. A call that a demoted or ejected region took for want of room elsewhere, and failed, falls back outside the budget too, but only to a region that answers, once one has room: a PT failing most of its calls still serves its share of them, and the quotas serve the rest (provisioned-region-brownout). " +
	"Among the capacities the pool values alike (its PTs, or one pay-as-you-go tier across regions), a region that fails a larger share of its calls than the least-failing one, by more than chance, takes only what the others have no room for: a region whose latency tail runs past the callers' deadline is sent the rank's overflow, not its share, and none of the rank's room is lost. " +
	"A provisioned region failing by turns (provisioned-region-flapping) is demoted a few seconds into each bad turn, once its failures are half of what it answered over the ejection interval, its failed calls falling back to the quotas meanwhile, and it is restored within about a second of each good one. " +
	"A region that holds calls without answering ranks behind the regions that answer once it has held them longer than its slowest recent answer, so a pay-as-you-go region that answers after every deadline takes only what the others have no room for (shared-region-hangs); a PT whose answers slow past the callers' deadline sends no failure until those deadlines pass, and the calls sent to it in that time are lost before it is demoted (provisioned-region-backing-up, which no target holds). " +
	"Each region's throttle (the SRE book's client-side adaptive throttling) counts failures as well as 429s, so when every region fails every region's share falls together and attempts per call fall under one. When every region fails half its calls (all-regions-brownout, which no target holds), the retry budget refuses part of the retries that a client retrying every failure makes, and regionwarden serves fewer calls than the PT allowlist: the price of not multiplying a surge (retry-surge) when it cannot tell the two apart. " +
	"A region that answers within the deadline may hold its capacity times the deadline in flight (Little's law), whatever its adaptive limit (provisioned-region-slow), and a region that fails keeps the share of that bound it answers: a PT answering half its calls after their deadline, demoted, takes what the quotas have no room for and answers half of it, where its adaptive limit, shrunk by the timeouts, would refuse most of it (provisioned-region-near-deadline); that share is weighed against the calls sent it since the latest one it answered, so a PT whose latency ran past the deadline and came back takes calls again at once, while the calls sent during the fault still wait out their deadline. That limit shrinks only for a timeout that waited longer than the region's slowest recent answer: a 504 answered in the region's usual time is a failure, not a sign that it holds too many calls (spill-regions-failing). " +
	"An attempt (first or retry) that finds every quota full waits for the first to have room, when that comes within 1.025 s and leaves it as long again before its deadline; while it waits, calls of a lower priority, and first attempts of its own priority when it is a retry, take no room in the quotas it waits for, so a shortage sheds sheddable calls first, then default ones (provisioned-region-down-priorities), and a retry that only a quota can take is not lost to a call that has just come and can still go to the failing PT (provisioned-region-brownout). A retry goes only to a region whose latest successes took, at the median, less time than the call has left (once it has answered twenty in the ejection interval, and where the call was given that long to begin with): a retry after a failure that took most of the deadline goes to a quicker region or nowhere, rather than take a place in a quota that a new call would more likely be served in; a first attempt goes anywhere. The calls regionwarden still loses are shed when no region had headroom soon enough, or had both attempts (maxAttempts 2, where an attempt answered 429 does not count and the call goes on to a capacity it has not tried) fail; none fail for want of a region. " +
	"The Portkey gateway retries every failure on every target, with no budget."
