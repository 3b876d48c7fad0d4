package controllers

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// reconcileObject is how each reconciler starts: it reads the object req
// names into obj and, while the object exists and is not being deleted, runs
// reconcile through reconcileStatus. An object gone or being deleted only has
// forget called for its metrics: nothing outside the cluster belongs to an
// object of this operator, and what it owns in the cluster carries an owner
// reference, so no object needs a finalizer. reconcile records into the
// recorder it is given, so it works on a copy of its reconciler that holds
// that recorder, and its events wait for the status write.
func reconcileObject[T conditionObject](ctx context.Context, r client.Reader, c client.Client, rec events.EventRecorder, req ctrl.Request, obj T, forget func(namespace, name string), status func(T) any, reconcile func(events.EventRecorder) (ctrl.Result, error)) (ctrl.Result, error) {
	if err := r.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			forget(req.Namespace, req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !obj.GetDeletionTimestamp().IsZero() {
		forget(obj.GetNamespace(), obj.GetName())
		return ctrl.Result{}, nil
	}
	return reconcileStatus(ctx, c, rec, obj, status, reconcile)
}

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
