//go:build !unix

package upstream

import "syscall"

// peekFD is alive's check where no non-blocking peek is at hand: it finds
// every idle connection open, as net/http's transport between the close of
// a connection and its read loop noticing it.
func (c *h1conn) peekFD(uintptr) bool {
	c.peekErr = syscall.EAGAIN
	return true
}
