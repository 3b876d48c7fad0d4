// Package redisserver starts a real redis-server (Debian's package, installed
// by `make redis`) on a free loopback port, for the tests and replays
// of routers that exchange demand through it. Nothing is persisted.
package redisserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// ErrNotInstalled is returned when redis-server is not on the PATH.
var ErrNotInstalled = errors.New("redis-server is not on the PATH: run make redis")

// Server is one redis-server process.
type Server struct {
	// Addr is host:port.
	Addr string

	cmd    *exec.Cmd
	exited chan struct{}
	once   sync.Once
}

// Start starts redis-server on a free 127.0.0.1 port and waits until it
// answers PING, for at most ten seconds.
func Start(ctx context.Context) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNotInstalled
	}
	for try := 0; ; try++ {
		s, err := start(ctx, bin)
		// Another process may take the port between probing and binding.
		if err == nil || try == 2 {
			return s, err
		}
	}
}

func start(ctx context.Context, bin string) (*Server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	_ = l.Close()
	dir, err := os.MkdirTemp("", "redis-")
	if err != nil {
		return nil, err
	}
	s := &Server{Addr: addr, exited: make(chan struct{})}
	s.cmd = exec.Command(bin, "--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no",
		"--dir", dir, "--protected-mode", "yes", "--loglevel", "warning")
	if err := s.cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("starting redis-server: %w", err)
	}
	go func() {
		_ = s.cmd.Wait()
		_ = os.RemoveAll(dir)
		close(s.exited)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if ping(addr) == nil {
			return s, nil
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("redis-server on %s exited at start", addr)
		case <-ctx.Done():
			s.Kill()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Kill()
			return nil, fmt.Errorf("redis-server on %s did not answer within 10s", addr)
		}
	}
}

// ping sends PING and expects +PONG.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// URL is the server's redis:// URL, database 0.
func (s *Server) URL() string { return "redis://" + s.Addr + "/0" }

// Kill stops the server at once (SIGKILL), as a crash would, and waits for it
// to exit. Safe to call more than once.
func (s *Server) Kill() {
	s.once.Do(func() { _ = s.cmd.Process.Kill() })
	<-s.exited
}

// TB is what ForTest needs of a test or benchmark; testing.TB has it.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// ForTest starts a server for t and kills it when t ends. A machine without
// redis-server fails t, saying which make target installs it: the tests that
// need a real store never skip.
func ForTest(t TB) *Server {
	t.Helper()
	s, err := Start(context.Background())
	if errors.Is(err, ErrNotInstalled) {
		t.Fatalf("%v (make test installs it)", err)
	}
	if err != nil {
		t.Fatalf("redis-server: %v", err)
	}
	t.Cleanup(s.Kill)
	return s
}
