package controllers

import (
	"context"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capacityv1alpha1 "github.com/regionwarden/regionwarden/api/v1alpha1"
	"github.com/regionwarden/regionwarden/internal/waittest"
)

// TestPTEventsOnce checks that events tell changes, once each: reconciling an
// unchanged mismatch many times records one Mismatch event, a new mismatch
// records another, and agreement records one Observed event. The events
// reach the API server as events.k8s.io/v1 Events.
func TestPTEventsOnce(t *testing.T) {
	const interval = time.Minute
	e := newPTEnv(t, ptEnvOptions{})
	e.gcpShows(2, 3000, nil)
	e.create("pt", 4, withInterval(interval))
	e.waitReconciled("pt")
	for range 5 {
		e.clk.Step(interval)
		e.reconcile("pt")
	}
	if n := e.rec.await(t, "pt", eventWarning, capacityv1alpha1.ReasonMismatch, 1); n != 1 {
		t.Errorf("Mismatch events after 6 reconciles of one mismatch = %d, want 1: %+v", n, e.rec.all("pt"))
	}

	e.gcpShows(3, 3000, nil) // another disagreement: news
	e.clk.Step(interval)
	e.reconcile("pt")
	e.reconcile("pt")
	if n := e.rec.await(t, "pt", eventWarning, capacityv1alpha1.ReasonMismatch, 2); n != 2 {
		t.Errorf("Mismatch events after GCP's number changed = %d, want 2", n)
	}

	e.gcpShows(4, 3000, nil)
	for range 3 {
		e.clk.Step(interval)
		e.reconcile("pt")
	}
	if n := e.rec.await(t, "pt", eventNormal, capacityv1alpha1.ReasonObserved, 1); n != 1 {
		t.Errorf("Observed events = %d, want 1", n)
	}
	if n := len(e.rec.all("pt")); n != 3 {
		t.Errorf("%d events in all, want 3: %+v", n, e.rec.all("pt"))
	}

	// The API server holds them: one Event per distinct report, none repeated
	// as a series.
	byReason := waittest.Until(t, time.Minute, "Mismatch twice and Observed once in the API server", func() map[string]int {
		var list eventsv1.EventList
		if err := e.cl.List(context.Background(), &list, client.InNamespace(e.ns)); err != nil {
			t.Fatal(err)
		}
		byReason := map[string]int{}
		for _, ev := range list.Items {
			if ev.Regarding.Name == "pt" && ev.Regarding.Kind == "ProvisionedThroughput" {
				byReason[ev.Reason]++
				if ev.Series != nil {
					byReason["series"]++
				}
			}
		}
		return byReason
	}, func(byReason map[string]int) bool {
		return byReason[capacityv1alpha1.ReasonMismatch] == 2 && byReason[capacityv1alpha1.ReasonObserved] == 1
	})
	if byReason["series"] > 0 {
		t.Errorf("%d events repeated as a series, want none: %v", byReason["series"], byReason)
	}
}
