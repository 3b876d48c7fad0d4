//go:build unix

package upstream

import "syscall"

// peekFD is alive's check, on the connection's descriptor: a one-byte peek
// that does not wait.
func (c *h1conn) peekFD(fd uintptr) bool {
	var b [1]byte
	_, _, c.peekErr = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return true
}
