package controllers

import (
	"context"
	"fmt"

	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// finishStatus ends every reconcile, deferred by Reconcile: it traces obj's
// conditions, writes its status when the reconcile changed it from before's
// (the one place the operator writes the objects it reconciles), and then,
// only once that write is done, records the events the reconcile kept in buf
// (see eventBuffer). An object deleted meanwhile is not an error.
func finishStatus(ctx context.Context, c client.Client, rec events.EventRecorder, buf *eventBuffer, before, obj conditionObject, changed bool) error {
	traceConditions(ctx, obj.GetConditions())
	if changed {
		if err := c.Status().Patch(ctx, obj, client.MergeFrom(before)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("patching the status of %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
		}
	}
	buf.flush(rec)
	return nil
}
