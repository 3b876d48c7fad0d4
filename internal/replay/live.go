package replay

import (
	"context"
	"fmt"
	"net/http"
	"strings"
)

// LiveRouter is a router that is already running, reached at baseURL (such as
// "http://127.0.0.1:8080"), and called over Vertex REST as an application's
// SDK would. The replay starts nothing for it: the router's table, upstreams
// and clock are whatever it was started with. onStart, when set, is called
// before the replay's clock starts, with the environment the policy is given,
// so the caller can point its own emulated regions at the replay's clock.
func LiveRouter(name, baseURL string, onStart func(env *Env)) Policy {
	return Policy{Name: name, Start: func(ctx context.Context, env *Env) (Caller, error) {
		if onStart != nil {
			onStart(env)
		}
		sc := env.Scenario
		c := &httpCaller{
			env:     env,
			client:  newHTTPClient(),
			headers: http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer replay-caller"}},
			body:    requestBody(env.Prompt),
			exited:  make(chan struct{}),
			out:     &tailBuffer{max: 1024},
			url: fmt.Sprintf("%s/v1/projects/%s/locations/%s/publishers/%s/models/%s:generateContent",
				strings.TrimRight(baseURL, "/"), sc.Project, sc.Regions[0].Name, sc.Publisher, sc.Model),
		}
		if err := RouterReady(ctx, c.client, baseURL); err != nil {
			return nil, err
		}
		return c, nil
	}}
}

// RouterReady asks the router at baseURL once whether it is ready: nil when
// its /readyz answers 200, an error wrapping ErrUnavailable when it does not
// answer or answers otherwise.
func RouterReady(ctx context.Context, client *http.Client, baseURL string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(baseURL, "/")+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("%w: router at %s: %v", ErrUnavailable, baseURL, err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: router at %s is not ready (%s)", ErrUnavailable, baseURL, resp.Status)
	}
	return nil
}
