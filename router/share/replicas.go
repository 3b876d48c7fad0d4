package share

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Counter tells how many routers share this cluster's capacity.
type Counter interface {
	// Replicas is the number of routers, at least one.
	Replicas() int
	// Source says where the number comes from, for /debug/pools.
	Source() string
}

// Ranker is a Counter that also knows this router's place among the
// routers it counts, 0 to Replicas()-1, the same order for every router, so
// that a static share can hand out whole calls by rank (Part) instead of
// rounding them down.
type Ranker interface {
	Counter
	// Rank is this router's place, and false when it does not know it.
	Rank() (int, bool)
}

// Static is a replica count that never changes: --replicas outside a cluster.
type Static int

// Replicas is n, at least one.
func (n Static) Replicas() int { return max(int(n), 1) }

// Source names the flag.
func (n Static) Source() string { return "--replicas " + strconv.Itoa(n.Replicas()) }

// StaticRank is a replica count that never changes, with this router's place
// among them: routers started with --replicas N --replica-index I.
type StaticRank struct{ N, Index int }

// Replicas is N, at least one.
func (s StaticRank) Replicas() int { return Static(s.N).Replicas() }

// Source names the flags.
func (s StaticRank) Source() string {
	return fmt.Sprintf("--replicas %d --replica-index %d", s.Replicas(), s.Index)
}

// Rank is Index when it is within [0, N).
func (s StaticRank) Rank() (int, bool) { return s.Index, s.Index >= 0 && s.Index < s.Replicas() }

// EndpointSliceCounter counts the routers behind a Service from its
// EndpointSlices, which it watches in one namespace (RBAC: get, list, watch on
// endpointslices there, nothing else).
//
// It counts on the safe side, since a count too low lets the routers together
// exceed a region's quota, and a count too high only leaves some of it unused
// for a moment:
//
//   - An endpoint that has never been ready counts as soon as it appears. In a
//     rollout surge (N+1 pods for a while) the new pod is in the slice before
//     it is ready, so the others shrink their shares before it takes traffic.
//   - A ready endpoint counts, and so does a terminating one while it still
//     serves: it drains calls it admitted and may still get new ones until
//     every node's proxy has seen it go.
//   - An endpoint that was ready and is no longer (a replica lost or failing
//     its probe) stops counting, and the others grow into its share only
//     after the controller's GrowDelay, when what it admitted last has left
//     the regions' windows. A pod that never turns ready again keeps the others
//     from its share only for that delay.
//
// A router that has just started with no view yet counts one: itself.
type EndpointSliceCounter struct {
	client    kubernetes.Interface
	namespace string
	service   string
	self      string
	onChange  func()

	n    atomic.Int64
	rank atomic.Int64 // this router's place among the counted pods; -1: unknown
	mu   sync.Mutex
	// wasReady holds the endpoints seen ready, by key: one that is not ready
	// now was ready before (a failing or lost replica), not starting.
	// Guarded by mu.
	wasReady map[string]bool
}

// NewEndpointSliceCounter counts the endpoints of Service service in
// namespace. self is this router's pod name (POD_NAME), which ranks it among
// the counted pods by name; empty leaves it unranked. onChange, if set, is
// called (from the watch's goroutine; it must not block) each time the count
// or the rank changes.
func NewEndpointSliceCounter(client kubernetes.Interface, namespace, service, self string, onChange func()) *EndpointSliceCounter {
	c := &EndpointSliceCounter{client: client, namespace: namespace, service: service, self: self, onChange: onChange, wasReady: map[string]bool{}}
	c.n.Store(1)
	c.rank.Store(-1)
	return c
}

// Rank is this router's place among the counted pods, by name.
func (c *EndpointSliceCounter) Rank() (int, bool) {
	r := c.rank.Load()
	return int(r), r >= 0
}

// Replicas is the last count, at least one.
func (c *EndpointSliceCounter) Replicas() int { return int(c.n.Load()) }

// Source names the Service.
func (c *EndpointSliceCounter) Source() string {
	return "endpointslices of service " + c.namespace + "/" + c.service
}

// Run watches the Service's EndpointSlices until ctx ends. It returns an
// error only if ctx ends before the first list.
func (c *EndpointSliceCounter) Run(ctx context.Context) error {
	factory := informers.NewSharedInformerFactoryWithOptions(c.client, 0,
		informers.WithNamespace(c.namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = discoveryv1.LabelServiceName + "=" + c.service
		}),
	)
	defer factory.Shutdown()
	informer := factory.Discovery().V1().EndpointSlices().Informer()
	recount := func(any) { c.recount(informer.GetStore().List()) }
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    recount,
		UpdateFunc: func(_, obj any) { recount(obj) },
		DeleteFunc: recount,
	}); err != nil {
		return fmt.Errorf("endpointslices of %s/%s: %w", c.namespace, c.service, err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return fmt.Errorf("endpointslices of %s/%s: %w before the first list", c.namespace, c.service, context.Cause(ctx))
	}
	c.recount(informer.GetStore().List())
	<-ctx.Done()
	return nil
}

// recount counts the endpoints of every slice, each endpoint once (a pod of a
// dual-stack Service is in one slice per address family).
func (c *EndpointSliceCounter) recount(objs []any) {
	c.mu.Lock()
	counted := map[string]bool{}
	seen := map[string]bool{}
	for _, o := range objs {
		es, ok := o.(*discoveryv1.EndpointSlice)
		if !ok {
			continue
		}
		for _, ep := range es.Endpoints {
			key := endpointKey(ep)
			if key == "" {
				continue
			}
			seen[key] = true
			ready := isTrue(ep.Conditions.Ready)
			if ready {
				c.wasReady[key] = true
			}
			if countEndpoint(ep.Conditions, c.wasReady[key]) {
				counted[key] = true
			}
		}
	}
	// Endpoints that left every slice are forgotten: a pod of the same name
	// that comes back is a new pod, starting.
	for key := range c.wasReady {
		if !seen[key] {
			delete(c.wasReady, key)
		}
	}
	n := int64(max(len(counted), 1))
	rank := int64(-1)
	if c.self != "" && counted["Pod/"+c.namespace+"/"+c.self] {
		keys := make([]string, 0, len(counted))
		for k := range counted {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		rank = int64(sort.SearchStrings(keys, "Pod/"+c.namespace+"/"+c.self))
	}
	old, oldRank := c.n.Swap(n), c.rank.Swap(rank)
	c.mu.Unlock()
	if (old != n || oldRank != rank) && c.onChange != nil {
		c.onChange()
	}
}

// countEndpoint reports whether an endpoint with these conditions counts as a
// router: ready; terminating but still serving; or not ready, not
// terminating and never seen ready (starting). A nil condition is true, as
// the API defines it.
func countEndpoint(cond discoveryv1.EndpointConditions, wasReady bool) bool {
	switch {
	case isTrue(cond.Ready):
		return true
	case cond.Terminating != nil && *cond.Terminating:
		return isTrue(cond.Serving)
	default:
		return !wasReady
	}
}

// isTrue reads an endpoint condition: nil means true (unknown is ready).
func isTrue(b *bool) bool { return b == nil || *b }

// endpointKey names an endpoint by its pod, else by its first address.
func endpointKey(ep discoveryv1.Endpoint) string {
	if r := ep.TargetRef; r != nil && r.Name != "" {
		return r.Kind + "/" + r.Namespace + "/" + r.Name
	}
	if len(ep.Addresses) > 0 {
		return "address/" + ep.Addresses[0]
	}
	return ""
}
