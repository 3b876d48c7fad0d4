package source

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/regionwarden/regionwarden/router/table"
)

// DefaultConfigMapResync is how often the informer replays its cache by default.
const DefaultConfigMapResync = 10 * time.Minute

// ConfigMapOptions configures a ConfigMapSource. Every zero field takes its default.
type ConfigMapOptions struct {
	// Logger receives load and refusal logs. Default slog.Default().
	Logger *slog.Logger
	// Observer hears loads and refusals. Default none.
	Observer Observer
	// Resync is the informer's resync period. Default 10m; negative turns it off.
	Resync time.Duration
	// Endpoints are the hosts a table's regions may name. Default Google's
	// API hosts alone: a table naming another host is refused.
	Endpoints table.Endpoints
}

// ConfigMapSource serves the routing tables of the ConfigMaps in one namespace
// labeled table.LabelRoutingTable=true and controlled by a RegionPool, merged
// into one table.
//
// Only a ConfigMap whose controller owner reference is a RegionPool is read:
// the operator writes every routing table that way, so a labeled ConfigMap
// that something else created (a copy, a chart, a mistake) is refused with
// ReasonNotOwned and serves nothing, and one that loses its RegionPool
// controller leaves the table as if deleted.
//
// Each ConfigMap holds one table under table.DataKey; the served table holds
// the pools of all of them. A ConfigMap whose table is bad is refused alone: its
// last good pools keep serving, the others are untouched. A pool served by
// several ConfigMaps is taken from the one whose namespace/name sorts first;
// the others are reported as rejected. A deleted ConfigMap (or one whose label
// is removed) takes its pools with it.
//
// It lists and watches only the one namespace with the label selector, so the
// router needs get, list and watch on configmaps in that namespace, nothing
// cluster-wide. If the API server goes away the informer retries and the
// source keeps serving what it has.
type ConfigMapSource struct {
	*Store
	client    kubernetes.Interface
	namespace string
	resync    time.Duration
	endpoints table.Endpoints

	mu      sync.Mutex
	entries map[string]*cmEntry // by namespace/name; guarded by mu
	synced  bool                // the informer's first list is in; guarded by mu
	dups    map[string]bool     // duplicate pools already reported, origin|pool; guarded by mu
}

// cmEntry is what one ConfigMap contributes.
type cmEntry struct {
	// resourceVersion is the version last read, good or bad, so a resync that
	// replays it neither reloads nor refuses twice.
	resourceVersion string
	// pools are the pools of the last good table; nil if it never had one.
	pools []table.Pool
}

// NewConfigMapSource returns a source for the routing ConfigMaps in namespace.
// It reads nothing until Run.
func NewConfigMapSource(client kubernetes.Interface, namespace string, opts ConfigMapOptions) *ConfigMapSource {
	opts.Resync = cmp.Or(opts.Resync, DefaultConfigMapResync)
	if opts.Resync < 0 {
		opts.Resync = 0
	}
	return &ConfigMapSource{
		Store:     NewStore(opts.Logger, opts.Observer),
		client:    client,
		namespace: namespace,
		resync:    opts.Resync,
		endpoints: opts.Endpoints,
		entries:   map[string]*cmEntry{},
		dups:      map[string]bool{},
	}
}

// Selector is the label selector of routing ConfigMaps.
func Selector() string { return table.LabelRoutingTable + "=true" }

// Run watches the ConfigMaps until ctx is done. Once the first list is in it
// serves the merged table, empty (no pools) if there is no routing ConfigMap.
// It returns an error only if ctx ends before the first list.
func (s *ConfigMapSource) Run(ctx context.Context) error {
	factory := informers.NewSharedInformerFactoryWithOptions(s.client, s.resync,
		informers.WithNamespace(s.namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = Selector() }),
	)
	defer factory.Shutdown()
	informer := factory.Core().V1().ConfigMaps().Informer()
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.update(obj) },
		UpdateFunc: func(_, obj any) { s.update(obj) },
		DeleteFunc: s.delete,
	}); err != nil {
		return fmt.Errorf("routing configmaps: %w", err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return fmt.Errorf("routing configmaps in %s: %w before the first list", s.namespace, context.Cause(ctx))
	}
	s.mu.Lock()
	s.synced = true
	s.publishLocked()
	s.mu.Unlock()
	<-ctx.Done()
	return nil
}

func cmKey(cm *corev1.ConfigMap) string { return cm.Namespace + "/" + cm.Name }

func cmOrigin(key string) string { return "configmap:" + key }

func (s *ConfigMapSource) update(obj any) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return
	}
	key := cmKey(cm)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entries[key]
	if e == nil {
		e = &cmEntry{}
		s.entries[key] = e
	}
	if e.resourceVersion == cm.ResourceVersion {
		return
	}
	e.resourceVersion = cm.ResourceVersion
	if err := ownedByRegionPool(cm); err != nil {
		s.Reject(cmOrigin(key), ReasonNotOwned, err)
		if e.pools != nil {
			e.pools = nil
			s.publishLocked()
		}
		return
	}
	data, ok := cm.Data[table.DataKey]
	if !ok {
		s.Reject(cmOrigin(key), ReasonRead, fmt.Errorf("configmap %s has no key %s", key, table.DataKey))
		return
	}
	t, reason, err := parse([]byte(data), s.endpoints)
	if err != nil {
		s.Reject(cmOrigin(key), reason, err)
		return
	}
	// A duplicate pool is decided by publishLocked, against the others.
	s.accepted(cmOrigin(key), ReasonRead, ReasonVersion, ReasonInvalid, ReasonEndpoint, ReasonNotOwned)
	e.pools = t.Pools
	s.publishLocked()
}

// RegionPoolGroup and RegionPoolKind are what the controller owner reference
// of a routing ConfigMap names. The router does not import the operator's
// API types, so it spells them here.
const (
	RegionPoolGroup = "capacity.regionwarden.io"
	RegionPoolKind  = "RegionPool"
)

// ownedByRegionPool returns nil when cm's controller is a RegionPool.
func ownedByRegionPool(cm *corev1.ConfigMap) error {
	ref := metav1.GetControllerOfNoCopy(cm)
	if ref == nil {
		return fmt.Errorf("configmap %s/%s has no controller owner: the router reads only routing tables a RegionPool controls", cm.Namespace, cm.Name)
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || gv.Group != RegionPoolGroup || ref.Kind != RegionPoolKind {
		return fmt.Errorf("configmap %s/%s is controlled by %s %s, not a RegionPool: the router reads only routing tables a RegionPool controls",
			cm.Namespace, cm.Name, ref.Kind, ref.Name)
	}
	return nil
}

func (s *ConfigMapSource) delete(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := cmKey(cm)
	if _, ok := s.entries[key]; !ok {
		return
	}
	delete(s.entries, key)
	s.accepted(cmOrigin(key))
	s.publishLocked()
}

// publishLocked merges the pools of every ConfigMap, in namespace/name order,
// and publishes the result. Nothing is published before the first list is in,
// so a half-listed namespace never serves. Caller must hold s.mu.
func (s *ConfigMapSource) publishLocked() {
	if !s.synced {
		return
	}
	keys := make([]string, 0, len(s.entries))
	for k := range s.entries {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	merged := &table.Table{Version: table.Version, Pools: []table.Pool{}}
	owner := map[table.Key]string{}
	dups := map[string]bool{}
	for _, k := range keys {
		for _, p := range s.entries[k].pools {
			if first, taken := owner[p.Key()]; taken {
				id := k + "|" + p.Project + "/" + p.Publisher + "/" + p.Model
				dups[id] = true
				if !s.dups[id] {
					s.Reject(cmOrigin(k), ReasonDuplicatePool, fmt.Errorf(
						"pool %s/%s/%s is already served by configmap %s", p.Project, p.Publisher, p.Model, first))
				}
				continue
			}
			owner[p.Key()] = k
			merged.Pools = append(merged.Pools, p)
		}
	}
	// A ConfigMap none of whose pools is a duplicate any more is no longer
	// refused as one.
	stillDup := map[string]bool{}
	for id := range dups {
		stillDup[strings.SplitN(id, "|", 2)[0]] = true
	}
	for id := range s.dups {
		if k := strings.SplitN(id, "|", 2)[0]; !stillDup[k] {
			s.accepted(cmOrigin(k), ReasonDuplicatePool)
		}
	}
	s.dups = dups
	s.Publish(s.origin(keys), merged)
}

func (s *ConfigMapSource) origin(keys []string) string {
	if len(keys) == 1 {
		return cmOrigin(keys[0])
	}
	return "configmaps:" + s.namespace
}
