// Package share decides what part of each region's capacity one router may
// use when several routers meter the same regions: the replicas of one
// Deployment, and the clusters that route to the same orders.
//
// A region grants one quota, whoever calls it. A router that meters a
// region's whole capacity as if it were alone, beside N-1 others doing the
// same, lets N times the quota through at failover, and the region answers
// the excess with 429s: the cascade the policy exists to prevent, made by our
// own replicas. So every router meters capacity × share, where
//
//	share = capacityShare/100 × replica share
//
// capacityShare is the pool's cluster share from the routing table (a
// RegionPool's spec.capacityShare: the part of the bought capacity this
// cluster may use), and the replica share is this router's part of what its
// cluster may use.
//
// # A transformation of capacity
//
// The share is applied on top of the table and nowhere else: Scale multiplies
// every region's requests and tokens per second, provisioned and shared
// alike, and its in-flight limits, and the router hands the scaled pool to
// the policy's Update, which keeps each region's live state (failure counts,
// throttle, ejection, limits). The policy's hot path does not know shares
// exist. GSUs are not scaled: they are the order's size, which sets how long
// Google's window is, not how much of it is ours.
//
// # Replica share
//
// Static: --replicas N outside a cluster, share 1/N. In a cluster, N is read
// from the EndpointSlices of the router's own Service (EndpointSliceCounter),
// counted on the safe side: an endpoint that has not yet been ready counts
// as soon as it appears, so a rollout surge shrinks the others' shares before
// the new pod takes traffic; an endpoint that stops being ready counts until
// it has been gone for one capacity window, since what it admitted last is
// still in the regions' windows.
//
// # Demand share
//
// Calls do not spread evenly: keep-alive and gRPC pin a client to one router.
// With a store (Redis or Valkey, Exchange), each router publishes each
// pool's recent demand (calls admitted and refused, over DemandWindowFor)
// and takes its part of the replicas' capacity in proportion to its demand,
// with a floor, once the counts show the demand has moved (Allocate). Every router
// computes its share from the same closed epoch of the store: the store's own
// clock stamps writes into epochs, and an epoch that has ended takes no more
// writes, so every router that reads it reads the same set, and the shares
// computed from it add up to exactly one (Allocate). The exchange is off the
// hot path: a background loop exchanges a few times a second with a short
// timeout.
//
// # When the store stops answering
//
// When the store cannot be read for MaxAge, the router holds the share its
// last epochs gave it, for Hold (five minutes), and then falls back to its
// static share; it falls back at once when the replica count moves, since a
// router that starts meanwhile knows no epoch. The store keeps a roster of
// the last share each router published, and every router that reads an
// epoch a router is missing from reserves that share for it (Allocate), so
// a router cut off alone holds what the others leave it. Why the held shares
// add up to at most one, whoever lost the store: Controller.holdPart.
//
// # One window for all routers
//
// Shares, however well they follow demand, leave each router its own
// windows: a call that finds its router's share full is refused while
// another router's share sits idle. With a store, the request quotas are not
// split: Meter keeps one sliding window per region in the store, and every
// router takes every request to a region with a requests-per-second quota
// from it (policy.SharedMeter, on the hot path, bounded by a short timeout).
// When the store does not answer, the router's share meters the requests,
// with what the router sent in the last second already counted and its part
// of what the store last counted for the others held; the requests its
// share admits are written into the store in the background, for the
// routers still metering there (see Meter). The window also keeps the
// calls in order across routers (by priority, and a retry before a first
// attempt of its priority: policy.Class): a request of a higher class that
// it refuses claims the room that frees next for a moment, and requests of
// lower classes from every router give way in that moment (meterScript;
// why in the policy's reserve.go).
//
// # Changes are safe in both directions
//
// A router shrinks its share at once and grows it only once the larger value
// has been its target for GrowDelay (a sliding minimum), or, for a PT that
// Google counts over a longer window, for that window plus an interval: what
// a router admitted stays in a region's count for the region's window, so
// each region waits its own. Every router moves
// from one allocation to the next within less than GrowDelay of the others, so
// at any moment each one uses at most what some common allocation gave it,
// and the sum stays within one: during a change, capacity goes unused for a
// moment instead of being used twice.
package share
