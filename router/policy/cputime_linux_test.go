package policy

import (
	"runtime"
	"syscall"
	"testing"
)

// rusageThread is RUSAGE_THREAD: the calling thread's usage only.
const rusageThread = 1

// threadCPU returns the CPU time the calling OS thread has used, in
// nanoseconds.
func threadCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// reportCPU runs a serial benchmark loop on one locked OS thread and reports
// the CPU time it used per operation ("cpu-ns/op") beside the wall time: on a
// shared machine the wall time includes time the thread spent waiting for a
// CPU, the CPU time does not.
func reportCPU(b *testing.B, loop func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := threadCPU()
	loop()
	if b.N > 0 {
		b.ReportMetric(float64(threadCPU()-start)/float64(b.N), "cpu-ns/op")
	}
}
