package policy

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/regionwarden/regionwarden/internal/clocktest"
	"github.com/regionwarden/regionwarden/router/table"
)

// offering is region r listing pay-as-you-go tiers ts.
func offering(r table.Region, ts ...table.PayGoTier) table.Region {
	r.PayGoTiers = ts
	return r
}

// globalPT is a pool whose PT is on global, where Priority and Flex are
// offered with standard, beside a shared region offering standard alone.
func globalPT(rt table.RequestType) table.Pool {
	tp := pool(
		offering(provisioned("global", table.Capacity{GSUs: 1}), table.PayGoStandard, table.PayGoPriority, table.PayGoFlex),
		shared("europe-west4", 0),
	)
	tp.Policy.Provisioned.RequestType = rt
	return tp
}

// fullGlobalPT is a pool of globalPT called dedicated whose first call
// Google refused as the PT being full, took after it was picked.
func fullGlobalPT(t *testing.T, clk *clocktest.Clock, took time.Duration) *Pool {
	t.Helper()
	p := mustNew(t, globalPT(table.RequestTypeDedicated), clk)
	_, a := pick(t, p, PriorityDefault)
	clk.Advance(took)
	a.Done(ProvisionedFull)
	return p
}

// TestSpilloverCarriesTheCallsTier: in spillover mode a PT attempt names the
// tier its overflow spills into, the first of the call's tiers the region
// offers: Priority for critical, Flex for sheddable, standard (no header)
// for default; none a region does not offer.
func TestSpilloverCarriesTheCallsTier(t *testing.T) {
	g := NewWithT(t)
	p := mustNew(t, globalPT(table.RequestTypeSpillover), newClock())
	for pr, want := range map[Priority]table.PayGoTier{
		PriorityCritical: table.PayGoPriority, PriorityDefault: table.PayGoStandard, PrioritySheddable: table.PayGoFlex,
	} {
		_, a := pick(t, p, pr)
		g.Expect(a.Region).To(Equal("global"))
		g.Expect(a.Tier).To(Equal(table.TierProvisioned))
		g.Expect(a.PayGo).To(Equal(want), "priority %s", pr)
		a.Done(Success)
	}

	// A PT region that lists no tiers spills into Google's default.
	p = mustNew(t, pool(provisioned("global", table.Capacity{GSUs: 1})), newClock())
	_, a := pick(t, p, PriorityCritical)
	g.Expect(a.PayGo).To(BeEmpty())

	// Dedicated calls never spill.
	p = mustNew(t, globalPT(table.RequestTypeDedicated), newClock())
	_, a = pick(t, p, PriorityCritical)
	g.Expect(a.Tier).To(Equal(table.TierProvisioned))
	g.Expect(a.PayGo).To(BeEmpty())
}

// TestFullPTSpillsWithoutThrottling: a PT-full 429 sends the call on to
// pay-as-you-go (Priority PayGo on the same location for a critical call,
// standard elsewhere for a default one) within the budget's reach even when
// no retry is left in the budget; the PT is full for the next calls, one of
// which asks it again a second later; and nothing of the region is
// throttled, shrunk or demoted.
func TestFullPTSpillsWithoutThrottling(t *testing.T) {
	g := NewWithT(t)
	clk := newClock()
	tp := globalPT(table.RequestTypeDedicated)
	zero := 0
	tp.Policy.Retry.BudgetPercent, tp.Policy.Retry.MinRetriesPerSecond = &zero, &zero
	p := mustNew(t, tp, clk)
	limit := p.st.Load().slots[0].r.limit.get()

	c, a := pick(t, p, PriorityCritical)
	g.Expect(a.Tier).To(Equal(table.TierProvisioned))
	a.Done(ProvisionedFull)
	b, err := c.Pick()
	g.Expect(err).NotTo(HaveOccurred(), "a spill is not a retry the budget bounds")
	g.Expect(b.Region).To(Equal("global"), "the PT's location is still untried for its other capacities")
	g.Expect(b.Tier).To(Equal(table.TierShared))
	g.Expect(b.PayGo).To(Equal(table.PayGoPriority))
	b.Done(Success)

	snap := p.Snapshot().Regions[0]
	g.Expect(snap.ProvisionedFull).To(BeTrue())
	g.Expect(snap.ThrottleProbability).To(BeZero())
	g.Expect(snap.Demotion).To(BeNil())
	g.Expect(p.st.Load().slots[0].r.limit.get()).To(BeNumerically(">=", limit), "a full PT does not shrink the region's limit")

	// While it is full, calls go straight to pay-as-you-go.
	for range 5 {
		_, a := pick(t, p, PriorityDefault)
		g.Expect(a.Tier).To(Equal(table.TierShared))
		g.Expect(a.PayGo).To(Equal(table.PayGoStandard))
		a.Done(Success)
	}
	// A second later, one call asks the PT again; the others still spill.
	clk.Advance(ptFullFor)
	_, probe := pick(t, p, PriorityDefault)
	g.Expect(probe.Tier).To(Equal(table.TierProvisioned))
	_, other := pick(t, p, PriorityDefault)
	g.Expect(other.Tier).To(Equal(table.TierShared))
	other.Done(Success)
	// The PT served it: it is open again.
	probe.Done(Success)
	_, a = pick(t, p, PriorityDefault)
	g.Expect(a.Tier).To(Equal(table.TierProvisioned))
	a.Done(Success)
}

// TestFullPTOpensOnceAskedUnrefused: a call that asks a full PT again and
// is not refused within twice the time Google's refusals took was let in,
// so the PT has room: later calls ask it at once, without waiting for that
// call's answer (a whole generation away). Refused, it keeps the PT full;
// asked by no call (the turn's call refused by the PT's own meter), the PT
// stays full whatever the time.
func TestFullPTOpensOnceAskedUnrefused(t *testing.T) {
	const refusal = 20 * time.Millisecond
	tier := func(p *Pool) table.Tier {
		t.Helper()
		_, a := pick(t, p, PriorityDefault)
		a.Done(Success)
		return a.Tier
	}
	g := NewWithT(t)
	clk := newClock()
	p := fullGlobalPT(t, clk, refusal)

	clk.Advance(ptFullFor)
	_, asked := pick(t, p, PriorityDefault) // a long generation: no answer yet
	g.Expect(asked.Tier).To(Equal(table.TierProvisioned))
	clk.Advance(refusedGrace*refusal - time.Millisecond)
	g.Expect(tier(p)).To(Equal(table.TierShared), "it could still be refused")
	clk.Advance(2 * time.Millisecond)
	g.Expect(tier(p)).To(Equal(table.TierProvisioned), "not refused in time: the PT let it in")
	g.Expect(p.Snapshot().Regions[0].ProvisionedFull).To(BeFalse())

	// Full again: the call asking is refused in time, and the PT stays full.
	_, a := pick(t, p, PriorityDefault)
	a.Done(ProvisionedFull)
	clk.Advance(ptFullFor)
	_, asked2 := pick(t, p, PriorityDefault)
	g.Expect(asked2.Tier).To(Equal(table.TierProvisioned))
	clk.Advance(time.Millisecond)
	asked2.Done(ProvisionedFull)
	clk.Advance(refusedGrace * refusal)
	g.Expect(tier(p)).To(Equal(table.TierShared), "refused: still full")
	// The long generation answers at last; it was asked before the last
	// refusal, so it says nothing of now.
	asked.Done(Success)
	g.Expect(tier(p)).To(Equal(table.TierShared), "an answer older than the refusal says nothing")
}

// TestFullPTTurnTakenBackByTheMeter: when the call that takes the turn to
// ask a full PT is refused by the PT's own meter, nothing asked Google, and
// the PT stays full however long nothing is refused.
func TestFullPTTurnTakenBackByTheMeter(t *testing.T) {
	const tokens = 100
	g := NewWithT(t)
	clk := newClock()
	tp := pool(
		provisioned("europe-west1", table.Capacity{GSUs: 1, TokensPerSecond: 1000}),
		shared("europe-west4", 10000),
	)
	tp.Policy.Provisioned.RequestType = table.RequestTypeDedicated
	tp.Policy.Provisioned.Window = table.Duration{Duration: 10 * time.Second}
	p := mustNew(t, tp, clk)
	burstToPT(t, p, clk, 1, tokens)
	clk.Advance(time.Hour)
	g.Expect(burstToPT(t, p, clk, 200, tokens)).To(BeNumerically(">", 50), "the burst fills the PT's window")
	// A tenth of the window later the burst no longer holds the PT to its
	// pace (pace.go): calls come to it first, and its window is still full.
	clk.Advance(1100 * time.Millisecond)
	c := p.Start(Request{Deadline: clk.Now().Add(30 * time.Second)})
	a, err := c.Pick()
	g.Expect(err).NotTo(HaveOccurred())
	a.Done(Success)
	_, a = pick(t, p, PriorityDefault)
	g.Expect(a.Tier).To(Equal(table.TierShared), "the meter is full")
	a.Done(Success)
	// Google says the PT is full; a second later the turn to ask it goes
	// to a call the meter (still full) refuses.
	c = p.Start(Request{Deadline: clk.Now().Add(30 * time.Second)})
	r := p.st.Load().slots[0].r
	r.lanes[laneProvisioned].markFull(p.nanos(), p.nanos()-int64(time.Millisecond))
	clk.Advance(ptFullFor)
	a, err = c.Pick()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a.Tier).To(Equal(table.TierShared))
	a.Done(Success)
	clk.Advance(time.Second / 2)
	_, a = pick(t, p, PriorityDefault)
	a.Done(Success)
	g.Expect(p.Snapshot().Regions[0].ProvisionedFull).To(BeTrue(), "no call asked the PT")
}

// TestPayGo429ThrottlesItsOwnTier: a 429 of one tier throttles that tier of
// the region alone, and no 429 shrinks the region's in-flight limit (a
// refusal of rate, which the throttle answers, not of concurrency).
func TestPayGo429ThrottlesItsOwnTier(t *testing.T) {
	g := NewWithT(t)
	clk := newClock()
	tp := pool(offering(shared("global", 0), table.PayGoStandard, table.PayGoPriority, table.PayGoFlex))
	p := mustNew(t, tp, clk)
	r := p.st.Load().slots[0].r
	limit := r.limit.get()
	flex := 0
	for range 40 {
		_, a := pick(t, p, PrioritySheddable)
		if a.PayGo == table.PayGoFlex {
			flex++
			a.Done(Capacity)
			continue
		}
		g.Expect(a.PayGo).To(Equal(table.PayGoStandard), "then standard, once Flex is throttled")
		a.Done(Success)
	}
	g.Expect(flex).To(BeNumerically(">=", 20), "sheddable calls go to Flex first")
	st := p.st.Load()
	g.Expect(r.lanes[laneFlex].throttleP(p.nanos(), st)).To(BeNumerically(">", 0.5))
	g.Expect(r.lanes[laneStandard].throttleP(p.nanos(), st)).To(BeZero())
	g.Expect(r.lanes[lanePriority].throttleP(p.nanos(), st)).To(BeZero())
	g.Expect(r.limit.get()).To(Equal(limit), "Flex 429s leave the limit alone")
	g.Expect(p.Snapshot().Regions[0].Throttle).To(HaveKey("flex"))

	// Critical and default calls go on untouched.
	for range 20 {
		_, a := pick(t, p, PriorityCritical)
		g.Expect(a.PayGo).To(Equal(table.PayGoPriority))
		a.Done(Success)
		_, a = pick(t, p, PriorityDefault)
		g.Expect(a.PayGo).To(Equal(table.PayGoStandard))
		a.Done(Capacity)
	}
	g.Expect(r.limit.get()).To(BeNumerically(">=", limit), "standard 429s leave the limit alone")
	g.Expect(r.lanes[laneStandard].throttleP(p.nanos(), st)).To(BeNumerically(">", 0), "standard 429s throttle standard")
}

// TestSheddableFallsBackToStandard: a sheddable call whose Flex is throttled
// away still reaches standard pay-as-you-go, the next of its tiers; a
// default call never asks for Flex or Priority.
func TestSheddableFallsBackToStandard(t *testing.T) {
	g := NewWithT(t)
	clk := newClock()
	p := mustNew(t, pool(offering(shared("global", 0), table.PayGoStandard, table.PayGoFlex)), clk)
	seen := map[table.PayGoTier]int{}
	for range 200 {
		c, a := pick(t, p, PrioritySheddable)
		seen[a.PayGo]++
		if a.PayGo == table.PayGoFlex {
			a.Done(Capacity)
			if b, err := c.Pick(); err == nil {
				seen[b.PayGo+"-retry"]++
				b.Done(Success)
			}
			continue
		}
		a.Done(Success)
	}
	g.Expect(seen[table.PayGoFlex]).To(BeNumerically(">", 0))
	g.Expect(seen[table.PayGoStandard] + seen[table.PayGoStandard+"-retry"]).To(BeNumerically(">", 0))
	for range 20 {
		_, a := pick(t, p, PriorityDefault)
		g.Expect(a.PayGo).To(Equal(table.PayGoStandard))
		a.Done(Success)
	}
}

// TestSpilledAnswerKeepsPTFull: an answer that pay-as-you-go served
// (ON_DEMAND*) on the PT's probe does not reopen a full PT; one the PT
// served does.
func TestSpilledAnswerKeepsPTFull(t *testing.T) {
	g := NewWithT(t)
	clk := newClock()
	p := fullGlobalPT(t, clk, 0)
	clk.Advance(ptFullFor)
	_, probe := pick(t, p, PriorityDefault)
	g.Expect(probe.Tier).To(Equal(table.TierProvisioned))
	probe.Finish(Report{Outcome: Success, OnDemand: true})
	_, a := pick(t, p, PriorityDefault)
	g.Expect(a.Tier).To(Equal(table.TierShared), "still full")
	a.Done(Success)
	clk.Advance(ptFullFor)
	_, probe = pick(t, p, PriorityDefault)
	probe.Done(Success)
	_, a = pick(t, p, PriorityDefault)
	g.Expect(a.Tier).To(Equal(table.TierProvisioned), "open again")
	a.Done(Success)
}

// TestLateSuccessKeepsPTFull: outcomes arrive out of order (a stream
// reports when it ends): the success of a PT call admitted before Google
// said the PT is full, reported after, does not reopen it; a success of a
// call admitted after does.
func TestLateSuccessKeepsPTFull(t *testing.T) {
	g := NewWithT(t)
	clk := newClock()
	p := mustNew(t, globalPT(table.RequestTypeDedicated), clk)
	_, early := pick(t, p, PriorityDefault) // a long stream, admitted first
	g.Expect(early.Tier).To(Equal(table.TierProvisioned))
	clk.Advance(time.Millisecond)
	_, a := pick(t, p, PriorityDefault)
	g.Expect(a.Tier).To(Equal(table.TierProvisioned))
	a.Done(ProvisionedFull)
	early.Done(Success) // the stream ends after the PT filled
	g.Expect(p.Snapshot().Regions[0].ProvisionedFull).To(BeTrue(), "a call admitted before the PT filled says nothing of now")
	_, a = pick(t, p, PriorityDefault)
	g.Expect(a.Tier).To(Equal(table.TierShared), "still full")
	a.Done(Success)

	clk.Advance(ptFullFor)
	_, probe := pick(t, p, PriorityDefault)
	g.Expect(probe.Tier).To(Equal(table.TierProvisioned))
	probe.Done(Success)
	g.Expect(p.Snapshot().Regions[0].ProvisionedFull).To(BeFalse(), "a call admitted after it filled reopens it")
}

// TestProvisionedFullOfPayGoIsCapacity: the PT-full message on an attempt
// that asked for pay-as-you-go cannot mean a full PT; it throttles like any
// 429, and the next pick is bound by the budget again.
func TestProvisionedFullOfPayGoIsCapacity(t *testing.T) {
	g := NewWithT(t)
	p := mustNew(t, pool(shared("europe-west4", 0)), newClock())
	for range 40 {
		c := p.Start(Request{})
		a, err := c.Pick()
		if err != nil {
			break // throttled: what a 429 leads to
		}
		a.Done(ProvisionedFull)
	}
	g.Expect(p.Snapshot().Regions[0].ThrottleProbability).To(BeNumerically(">", 0))
}
