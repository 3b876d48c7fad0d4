package replay

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"github.com/regionwarden/regionwarden/router/table"
)

// Router is regionwarden's router binary end to end: started per replay with
// the scenario's routing table in a file, --upstream-insecure toward the
// emulated regions and --clock-scale at the replay's scale, and called over
// Vertex REST (generateContent) as an application's SDK would. bin is the
// binary; an empty bin or a missing file makes the policy unavailable.
func Router(bin string) Policy {
	return Policy{Name: NameRouter, Start: func(ctx context.Context, env *Env) (Caller, error) {
		if bin == "" {
			return nil, fmt.Errorf("%w: no router binary was given", ErrUnavailable)
		}
		if _, err := os.Stat(bin); err != nil {
			return nil, fmt.Errorf("%w: router binary: %v", ErrUnavailable, err)
		}
		return startRouter(ctx, bin, env)
	}}
}

// startRouter writes the table, starts the router on a free loopback port
// and waits until it is ready.
func startRouter(ctx context.Context, bin string, env *Env) (*httpCaller, error) {
	dir, err := os.MkdirTemp("", "replay-router-")
	if err != nil {
		return nil, err
	}
	rendered, err := table.Render(&table.Table{Version: table.Version, Pools: []table.Pool{env.Pool}})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("render table: %w", err)
	}
	tableFile := filepath.Join(dir, table.DataKey)
	if err := os.WriteFile(tableFile, rendered, 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	addr, err := FreeAddr()
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	// The router's own request timeout is the call's deadline in real time,
	// so it, not the caller hanging up, ends a call that runs out of time.
	deadline := env.Clock.Real(env.Scenario.Load.Deadline.Duration)
	cmd := exec.Command(bin,
		"--table-file", tableFile,
		"--listen", addr,
		"--upstream-insecure",
		"--allow-endpoint-host", "127.0.0.1",
		"--clock-scale", strconv.FormatFloat(env.Clock.Scale(), 'g', -1, 64),
		"--seed", strconv.FormatUint(env.Seed, 10),
		"--request-timeout", deadline.String(),
		"--shutdown-delay", "0s",
		"--shutdown-grace", "1s",
		"--log-level", "error",
	)
	c, err := startProcess(env, cmd, dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start router: %w", err)
	}
	sc := env.Scenario
	c.url = fmt.Sprintf("http://%s/v1/projects/%s/locations/%s/publishers/%s/models/%s:generateContent",
		addr, sc.Project, sc.Regions[0].Name, sc.Publisher, sc.Model)
	// The caller's own token, which the router forwards (its default
	// --caller-auth): the emulated regions take any.
	c.headers = http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer replay-caller"}}
	c.priority = true
	c.body = requestBody(env.Prompt)
	if err := c.waitReady(ctx, "http://"+addr+"/readyz"); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}
