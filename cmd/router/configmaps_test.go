package main

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/regionwarden/regionwarden/internal/testenv"
	"github.com/regionwarden/regionwarden/router/table"
)

// TestTablesFromConfigMaps runs the router on routing ConfigMaps read through
// a real API server, as a user allowed only get, list and watch on configmaps
// in one namespace: the RBAC the router needs. A ConfigMap update takes
// effect; when the API server goes away (every connection to it cut) the
// router keeps routing on the table it has.
func TestTablesFromConfigMaps(t *testing.T) {
	api := startAPIServer(t)
	ctx := context.Background()
	const ns = "regionwarden-system"
	user := testenv.RoleUser(t, api.env, api.admin, ns, "regionwarden-router",
		[]rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}})
	// The router reaches the API server through a proxy that the test cuts
	// to make the API server go away.
	proxy := startProxy(t, api.host)
	kubeconfig := api.kubeconfig(user, proxy.addr())

	a, b := startRegion(t, "us-central1"), startRegion(t, "europe-west4")
	cm := routingConfigMap(ns, renderTable(t, a))
	api.must(api.admin.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}))

	s := startRun(t, "--table-configmaps", ns, "--kubeconfig", kubeconfig)
	c := s.client(t)
	eventually(t, "routing to us-central1", func() bool {
		got, err := answer(c)
		return err == nil && got == "us-central1"
	})

	cm.Data[table.DataKey] = string(renderTable(t, b))
	api.must(api.admin.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}))
	eventually(t, "routing to europe-west4 after the update", func() bool {
		got, err := answer(c)
		return err == nil && got == "europe-west4"
	})

	proxy.cut()
	if got, err := answer(c); err != nil || got != "europe-west4" {
		t.Errorf("with the API server gone: answer %q, %v; want the last table serving", got, err)
	}
}

// proxy forwards TCP connections to an address until cut.
type proxy struct {
	ln    net.Listener
	to    string
	mu    sync.Mutex
	conns []net.Conn
	dead  bool
}

func startProxy(t *testing.T, to string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, to: to}
	go p.serve()
	t.Cleanup(p.cut)
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.to)
		if err != nil {
			_ = in.Close()
			continue
		}
		p.mu.Lock()
		if p.dead {
			p.mu.Unlock()
			_ = in.Close()
			_ = out.Close()
			return
		}
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(out, in); _ = out.Close() }()
		go func() { _, _ = io.Copy(in, out); _ = in.Close() }()
	}
}

// cut closes the listener and every connection: the API server is gone.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dead {
		return
	}
	p.dead = true
	_ = p.ln.Close()
	for _, c := range p.conns {
		_ = c.Close()
	}
}
