package source

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/regionwarden/regionwarden/internal/defaults"
	"github.com/regionwarden/regionwarden/router/table"
)

// Defaults of FileOptions.
const (
	DefaultDebounce   = 100 * time.Millisecond
	DefaultFileResync = 30 * time.Second
	fileOriginPrefix  = "file:"
	// maxTableFileBytes bounds what is read: a table is kilobytes.
	maxTableFileBytes = 16 << 20
)

// FileOptions configures a FileSource. Every zero field takes its default.
type FileOptions struct {
	// Logger receives load and refusal logs. Default slog.Default().
	Logger *slog.Logger
	// Observer hears loads and refusals. Default none.
	Observer Observer
	// Debounce is how long the source waits after a file event for more events
	// before it reads the table, so that one update is read once. Default 100ms.
	Debounce time.Duration
	// Resync is how often the table is read even without events, a safety net
	// for missed events. Default 30s; negative turns it off.
	Resync time.Duration
	// Endpoints are the hosts a table's regions may name. Default Google's
	// API hosts alone: a table naming another host is refused.
	Endpoints table.Endpoints
}

// FileSource reads the routing table from a file, or from a folder holding
// table.DataKey such as a mounted ConfigMap.
//
// A mounted ConfigMap is updated by the kubelet's atomic writer: it writes a new
// timestamped folder, points a ..data_tmp symlink at it and renames that over
// ..data, which routing.json links through. The source watches the folder, so
// it sees the rename and reads the new table without a restart. A plain file
// path is watched through its parent folder, so a file rewritten in place or
// renamed over is seen too. (A ConfigMap mounted with subPath is never updated
// by the kubelet; mount the folder.)
type FileSource struct {
	*Store
	path     string
	origin   string
	debounce time.Duration
	resync   time.Duration
	// endpoints are the hosts a table's regions may name.
	endpoints table.Endpoints

	// last is the content read last, good or bad, so that reading the same
	// bytes again neither reloads nor refuses twice; lastReadErr is the text of
	// the last read error, "" after a good read. Only Run's goroutine uses them.
	last        []byte
	lastReadErr string
}

// NewFileSource returns a source for path, a file or a folder holding
// table.DataKey. It reads nothing until Run.
func NewFileSource(path string, opts FileOptions) *FileSource {
	defaults.Positive(&opts.Debounce, DefaultDebounce)
	opts.Resync = cmp.Or(opts.Resync, DefaultFileResync)
	return &FileSource{
		Store:     NewStore(opts.Logger, opts.Observer),
		path:      path,
		origin:    fileOriginPrefix + path,
		debounce:  opts.Debounce,
		resync:    opts.Resync,
		endpoints: opts.Endpoints,
	}
}

// Run reads the table, then watches for changes until ctx is done. It returns
// an error only if the watch cannot be set up (the path's folder is missing);
// a missing or bad table is refused and retried on the next event or resync.
func (s *FileSource) Run(ctx context.Context) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("table file %s: %w", s.path, err)
	}
	defer func() { _ = w.Close() }()
	dir := s.watchDir()
	if err := w.Add(dir); err != nil {
		return fmt.Errorf("table file %s: watch %s: %w", s.path, dir, err)
	}
	s.Reload()

	var resync <-chan time.Time
	if s.resync > 0 {
		t := time.NewTicker(s.resync)
		defer t.Stop()
		resync = t.C
	}
	debounce := time.NewTimer(s.debounce)
	debounce.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-w.Events:
			if !ok {
				return nil
			}
			debounce.Reset(s.debounce)
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			// An overflow loses events; reading now catches up.
			s.log.Warn("routing table watch error, reading the table again", "origin", s.origin, "error", err)
			debounce.Reset(s.debounce)
		case <-debounce.C:
			s.Reload()
		case <-resync:
			s.Reload()
		}
	}
}

// watchDir is the folder whose events mean the table may have changed: the
// path itself when it is a folder, else its parent.
func (s *FileSource) watchDir() string {
	if fi, err := os.Stat(s.path); err == nil && fi.IsDir() {
		return s.path
	}
	return filepath.Dir(s.path)
}

// Reload reads the table now and publishes it if it is good and new. Run
// calls it; call it directly only when Run is not running.
func (s *FileSource) Reload() {
	data, err := s.read()
	if err != nil {
		// The same read error is reported once, not at every resync.
		if err.Error() != s.lastReadErr {
			s.Reject(s.origin, ReasonRead, err)
		}
		s.lastReadErr, s.last = err.Error(), nil
		return
	}
	s.lastReadErr = ""
	if s.last != nil && bytes.Equal(data, s.last) {
		return
	}
	s.last = data
	t, reason, err := parse(data, s.endpoints)
	if err != nil {
		s.Reject(s.origin, reason, err)
		return
	}
	s.accepted(s.origin)
	s.Publish(s.origin, t)
}

// read returns the table's bytes, following the atomic writer's symlinks. It
// never returns a nil slice with a nil error.
func (s *FileSource) read() ([]byte, error) {
	name := s.path
	if fi, err := os.Stat(name); err == nil && fi.IsDir() {
		name = filepath.Join(name, table.DataKey)
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(io.LimitReader(f, maxTableFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxTableFileBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", name, maxTableFileBytes)
	}
	if data == nil {
		data = []byte{}
	}
	return data, nil
}
