package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// processes are the child processes of the demo. Each runs in a process group
// of its own, so that stopping it stops whatever it started too.
type processes struct {
	mu    sync.Mutex
	procs []*process
}

type process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// start runs bin with args, its output in <work>/<name>.log.
func (ps *processes) start(_ context.Context, work, name, bin string, env []string, args ...string) error {
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("%s binary: %w (run `make demo`, which builds it)", name, err)
	}
	logPath := filepath.Join(work, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = f.Close()
		close(p.done)
	}()
	ps.mu.Lock()
	ps.procs = append(ps.procs, p)
	ps.mu.Unlock()
	return nil
}

// exited returns an error naming the first process that has ended.
func (ps *processes) exited() error {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, p := range ps.procs {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited early (%v); see %s", p.name, p.err, p.log)
		default:
		}
	}
	return nil
}

// stopAll stops every process, last started first: SIGTERM to its group, and
// SIGKILL after five seconds.
func (ps *processes) stopAll() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for i := len(ps.procs) - 1; i >= 0; i-- {
		p := ps.procs[i]
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	}
	ps.procs = nil
}
