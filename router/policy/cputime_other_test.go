//go:build !linux

package policy

import "testing"

// reportCPU runs a serial benchmark loop; CPU time per operation is measured
// on Linux only.
func reportCPU(_ *testing.B, loop func()) { loop() }
