package share

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/regionwarden/regionwarden/internal/testenv"
	"github.com/regionwarden/regionwarden/internal/waittest"
	"github.com/regionwarden/regionwarden/router/table"
)

// TestEndpointSliceShares runs two routers' share controllers on the
// EndpointSlices of their Service in a real API server, each as a user
// allowed only get, list and watch on endpointslices in its namespace (the
// router's RBAC), and moves the replicas through a rollout and a failure: a
// pod that appears (not yet ready), turns ready, turns unready, comes back,
// terminates. Each change that moves the count must move the routers' shares
// within 2 s; shrinking is at once, growing waits for the grow delay.
func TestEndpointSliceShares(t *testing.T) {
	env := &envtest.Environment{}
	cfg := testenv.Start(t, env)
	admin, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	const ns, svc = "regionwarden-system", "regionwarden-router"
	user := testenv.RoleUser(t, env, admin, ns, "regionwarden-router",
		[]rbacv1.PolicyRule{{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"}}})
	client, err := kubernetes.NewForConfig(user.Config())
	if err != nil {
		t.Fatal(err)
	}

	// The Service's pods, in one slice; an IPv6 slice of the same pods must
	// not count them twice.
	type pod struct {
		name                        string
		ready, serving, terminating bool
	}
	pods := []pod{{name: "r1", ready: true, serving: true}, {name: "r2", ready: true, serving: true}}
	slices := map[string]*discoveryv1.EndpointSlice{}
	write := func() {
		t.Helper()
		for _, family := range []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6} {
			es := &discoveryv1.EndpointSlice{
				ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: svc + "-" + strings.ToLower(string(family)), Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
				AddressType: family,
			}
			for i, p := range pods {
				addr := fmt.Sprintf("10.0.0.%d", i+1)
				if family == discoveryv1.AddressTypeIPv6 {
					addr = fmt.Sprintf("fd00::%d", i+1)
				}
				es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{
					Addresses:  []string{addr},
					Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(p.ready), Serving: ptr.To(p.serving), Terminating: ptr.To(p.terminating)},
					TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: p.name},
				})
			}
			if old := slices[es.Name]; old != nil {
				es.ResourceVersion = old.ResourceVersion
				out, err := admin.DiscoveryV1().EndpointSlices(ns).Update(ctx, es, metav1.UpdateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				slices[es.Name] = out
				continue
			}
			out, err := admin.DiscoveryV1().EndpointSlices(ns).Create(ctx, es, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			slices[es.Name] = out
		}
	}
	write()

	// Two routers, each with its counter and controller, as cmd/router wires
	// them.
	var routers []*Controller
	for range 2 {
		var c *Controller
		counter := NewEndpointSliceCounter(client, ns, svc, "", func() { c.Changed() })
		var a applied
		c = New(Options{Apply: a.apply, Replicas: counter})
		if err := c.SetTable(&table.Table{Version: table.Version, Pools: []table.Pool{testPool()}}); err != nil {
			t.Fatal(err)
		}
		routers = append(routers, c)
		wg.Add(2)
		go func() { defer wg.Done(); _ = counter.Run(ctx) }()
		go func() { defer wg.Done(); _ = c.Run(ctx) }()
	}
	// waitShare waits for every router's share to be want and returns how
	// long it took since start; over 2 s fails the test.
	waitShare := func(what string, want float64, start time.Time) time.Duration {
		t.Helper()
		waittest.For(t, 2*time.Second, func() string {
			return fmt.Sprintf("%s: shares %+v %+v 2s later, want %.3f", what, routers[0].Shares(), routers[1].Shares(), want)
		}, func() bool {
			ok := true
			for _, r := range routers {
				ok = ok && r.Shares()[0].Share == want
			}
			return ok
		})
		took := time.Since(start)
		t.Logf("%s: every router's share is %.3f after %v", what, want, took.Round(time.Millisecond))
		return took
	}
	// holds checks that the share stays want for d.
	holds := func(what string, want float64, d time.Duration) {
		t.Helper()
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
			for _, r := range routers {
				if got := r.Shares()[0].Share; got != want {
					t.Fatalf("%s: share %v, want it to stay %v", what, got, want)
				}
			}
		}
	}

	start := time.Now()
	waitShare("two ready pods", 0.5, start)

	pods = append(pods, pod{name: "r3"}) // a surge: the new pod, not yet ready
	start = time.Now()
	write()
	waitShare("a third pod appears, not yet ready", 1.0/3, start)

	pods[2].ready, pods[2].serving = true, true
	write()
	holds("the third pod turns ready", 1.0/3, 300*time.Millisecond)

	pods[1].ready, pods[1].serving = false, false // r2 fails its probe
	start = time.Now()
	write()
	if took := waitShare("r2 turns unready", 0.5, start); took < DefaultGrowDelay {
		t.Errorf("the share grew %v after r2 turned unready, before the grow delay (%v)", took, DefaultGrowDelay)
	}

	pods[1].ready, pods[1].serving = true, true // r2 is back
	start = time.Now()
	write()
	waitShare("r2 turns ready again", 1.0/3, start)

	pods[0].ready, pods[0].terminating = false, true // r1 drains: terminating, still serving
	write()
	holds("r1 terminating and still serving", 1.0/3, 300*time.Millisecond)

	pods[0].serving = false // r1 has stopped serving
	start = time.Now()
	write()
	waitShare("r1 stops serving", 0.5, start)
}
