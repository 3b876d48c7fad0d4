package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"github.com/regionwarden/regionwarden/internal/emulator"
	"github.com/regionwarden/regionwarden/router/table"
)

// PortkeyVersion is the release of Portkey's gateway the replays install.
const PortkeyVersion = "1.15.2"

// portkeyPackageJSON installs the gateway with @hono/node-server pinned to
// 1.13.5: with the version the release resolves to, the gateway does not
// answer pass-through calls.
const portkeyPackageJSON = `{
  "name": "regionwarden-replay-portkey",
  "private": true,
  "description": "Portkey's open-source gateway, for regionwarden's incident replays.",
  "dependencies": {
    "@portkey-ai/gateway": "` + PortkeyVersion + `"
  },
  "overrides": {
    "@hono/node-server": "1.13.5"
  }
}
`

// portkeyServer is the gateway's entry point inside an install folder.
func portkeyServer(dir string) string {
	return filepath.Join(dir, "node_modules", "@portkey-ai", "gateway", "build", "start-server.js")
}

// InstallPortkey installs Portkey's gateway from npm into dir (a cache
// folder outside the repository) unless it is already there, writing the
// package.json it installs from. It needs node and npm on the PATH.
func InstallPortkey(ctx context.Context, dir string, out io.Writer) error {
	if _, err := os.Stat(portkeyServer(dir)); err == nil {
		return nil
	}
	if _, err := exec.LookPath("node"); err != nil {
		return fmt.Errorf("%w: Node.js is not installed", ErrUnavailable)
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return fmt.Errorf("%w: npm is not installed", ErrUnavailable)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(portkeyPackageJSON), 0o644); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, npm, "install", "--no-audit", "--no-fund")
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%w: npm install @portkey-ai/gateway@%s in %s: %v", ErrUnavailable, PortkeyVersion, dir, err)
	}
	return nil
}

// Portkey is Portkey's open-source gateway (installed in dir by
// InstallPortkey) as a peer: the vertex-ai provider, one target per emulated
// region with custom_host pointing at the region's REST surface, the
// fallback strategy over them in the scenario's order (provisioned first, as
// an application lists them), and the call's deadline as the gateway's
// request timeout. Calls are Vertex pass-through generateContent calls; the
// gateway is started per replay with node and stopped after it. Without node
// or the package the policy is unavailable.
func Portkey(dir string) Policy {
	return Policy{Name: NamePortkey, Start: func(ctx context.Context, env *Env) (Caller, error) {
		node, err := exec.LookPath("node")
		if err != nil {
			return nil, fmt.Errorf("%w: Node.js is not installed", ErrUnavailable)
		}
		if _, err := os.Stat(portkeyServer(dir)); err != nil {
			return nil, fmt.Errorf("%w: @portkey-ai/gateway is not installed in %s", ErrUnavailable, dir)
		}
		return startPortkey(ctx, node, dir, env)
	}}
}

// portkeyConfig is the x-portkey-config of the replay: fallback over every
// region, in the scenario's order with provisioned regions first.
func portkeyConfig(sc *emulator.Scenario, addrs []emulator.RegionAddr) ([]byte, error) {
	type target struct {
		Provider   string `json:"provider"`
		CustomHost string `json:"custom_host"`
		Region     string `json:"vertex_region"`
		Project    string `json:"vertex_project_id"`
		APIKey     string `json:"api_key"`
	}
	var first, rest []target
	for _, a := range addrs {
		t := target{
			Provider: "vertex-ai",
			// The pass-through path after /v1 is appended to custom_host, so
			// each target's host names its own region's model collection.
			CustomHost: fmt.Sprintf("http://%s/v1/projects/%s/locations/%s/publishers/%s/models", a.REST, sc.Project, a.Name, sc.Publisher),
			Region:     a.Name,
			Project:    sc.Project,
			APIKey:     "replay",
		}
		if a.Tier == table.TierProvisioned {
			first = append(first, t)
		} else {
			rest = append(rest, t)
		}
	}
	return json.Marshal(map[string]any{
		"strategy": map[string]string{"mode": "fallback"},
		"targets":  append(first, rest...),
	})
}

// startPortkey starts the gateway on a free loopback port and waits until it
// answers.
func startPortkey(ctx context.Context, node, dir string, env *Env) (*httpCaller, error) {
	cfg, err := portkeyConfig(env.Scenario, env.Regions)
	if err != nil {
		return nil, err
	}
	addr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(addr)
	deadline := env.Clock.Real(env.Scenario.Load.Deadline.Duration)
	cmd := exec.Command(node, portkeyServer(dir), "--port="+port, "--headless")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NODE_ENV=production")
	c, err := startProcess(env, cmd, "")
	if err != nil {
		return nil, fmt.Errorf("start Portkey gateway: %w", err)
	}
	c.url = fmt.Sprintf("http://%s/v1/%s:generateContent", addr, env.Scenario.Model)
	c.headers = http.Header{
		"Content-Type":              {"application/json"},
		"X-Portkey-Config":          {string(cfg)},
		"X-Portkey-Request-Timeout": {strconv.FormatInt(max(deadline.Milliseconds(), 1), 10)},
	}
	c.body = requestBody(env.Prompt)
	if err := c.waitReady(ctx, "http://"+addr+"/"); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}
