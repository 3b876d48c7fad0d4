package controllers

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/regionwarden/regionwarden/internal/tracing"
)

// tracerName is the instrumentation scope of the controllers' spans.
const tracerName = "github.com/regionwarden/regionwarden/controllers"

// traced makes each reconcile of r a span named "reconcile <kind>", the root
// of whatever the reconcile calls (Cloud Monitoring's gRPC calls are its
// children), and puts trace_id and span_id on the reconcile's logger. With
// tracing off the span is a no-op and the logger unchanged.
func traced(kind string, r reconcile.Reconciler) reconcile.Reconciler {
	tracer := otel.Tracer(tracerName)
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
		ctx, span := tracer.Start(ctx, "reconcile "+kind, trace.WithAttributes(
			attribute.String("k8s.namespace.name", req.Namespace),
			attribute.String("regionwarden.kind", kind),
			attribute.String("regionwarden.name", req.Name),
		))
		defer span.End()
		if kv := tracing.LogValues(ctx); kv != nil {
			ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues(kv...))
		}
		res, err := r.Reconcile(ctx, req)
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		if res.RequeueAfter > 0 {
			span.SetAttributes(attribute.String("regionwarden.requeue_after", res.RequeueAfter.String()))
		}
		return res, err
	})
}

// traceConditions records the conditions a reconcile decided on its span, so
// a trace says what the reconcile concluded, not only how long it took.
func traceConditions(ctx context.Context, conds []metav1.Condition) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	for _, c := range conds {
		span.SetAttributes(attribute.String("regionwarden.condition."+c.Type, string(c.Status)+"/"+c.Reason))
	}
}
