package controllers

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// reconcileStatus runs reconcile on obj and ends every reconcile: reconcile
// records its events into the recorder it is given, which keeps them (see
// eventBuffer); then obj's conditions are traced, its status is written when
// reconcile changed it (the one place the operator writes the objects it
// reconciles), and only once that write is done are the kept events recorded
// with rec. status returns the part of an object that says whether it
// changed. An object deleted meanwhile is not an error.
func reconcileStatus[T conditionObject](ctx context.Context, c client.Client, rec events.EventRecorder, obj T, status func(T) any, reconcile func(events.EventRecorder) (ctrl.Result, error)) (result ctrl.Result, retErr error) {
	before := obj.DeepCopyObject().(T)
	buf := &eventBuffer{}
	defer func() {
		traceConditions(ctx, obj.GetConditions())
		if !equality.Semantic.DeepEqual(status(before), status(obj)) {
			if err := c.Status().Patch(ctx, obj, client.MergeFrom(before)); client.IgnoreNotFound(err) != nil {
				retErr = errors.Join(retErr, fmt.Errorf("patching the status of %s/%s: %w", obj.GetNamespace(), obj.GetName(), err))
				return
			}
		}
		buf.flush(rec)
	}()
	return reconcile(buf)
}
