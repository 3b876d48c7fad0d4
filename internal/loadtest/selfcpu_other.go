//go:build !unix

package loadtest

import "time"

// SelfCPU is not measured on this platform: zero.
func SelfCPU() time.Duration { return 0 }
