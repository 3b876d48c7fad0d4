//go:build unix

package loadtest

import (
	"syscall"
	"time"
)

// SelfCPU is the user and system CPU time this process has used, as
// getrusage measures it (finer than ProcessCPU's ticks).
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
