// Package replay replays an incident scenario against routing policies: it
// starts one set of emulated Vertex AI regions per policy (internal/emulator),
// all on one compressed clock, drives the same open-loop load through each
// policy with the same seed, and reports what every policy made of it.
//
// The load is open loop: calls arrive as a Poisson process at the scenario's
// rate (phases included), whatever the regions answer, so a failing policy
// does not slow its own load down. Each call belongs to a client session of
// 50 to 100 calls (the scenario's sessionCalls) that runs its calls one after
// another, as an interactive agent does; a call that arrives while every open
// session is busy opens a new one. Every call has the scenario's deadline.
// Arrivals, priorities and session lengths are drawn from streams of their
// own, so every policy gets the same calls with the same priorities, however
// many sessions its answers keep open; each policy's schedule is shifted by
// its share of the mean gap between calls, so that policies replayed side by
// side do not send their calls to the machine in batches.
//
// Policies are columns: the count blocklist of the outage, the blocklist
// with the provisioned-region allowlist, the adaptive policy in process
// (router/policy, calling the regions over gRPC with the real aiplatform
// client), the router binary end to end over Vertex REST, and an external
// gateway. A policy that cannot run here (no binary, no Node.js) is reported
// as skipped with the reason, never with a made-up number.
//
// Time is scenario time throughout: the policies' clock is the emulator's
// scaled clock, so ejection times, windows and deadlines compress exactly as
// the regions' latencies and fault windows do.
//
// Run replays one scenario for a set of policies and returns a Report; the
// demo and cmd/replay call it. WriteMarkdown and WriteChart render reports.
package replay
