package testenv

import (
	"bytes"
	"io"
	"sync"
	"testing"
)

// LogWriter returns a writer that passes each line written to it to t.Log, so the logs of a
// server or process a test runs are shown only when the test fails (or under -v), next to
// the failure, instead of on the run's output. Lines written after the test's cleanup began
// (a process still stopping) are dropped: t.Log must not be called after the test ends.
func LogWriter(t testing.TB) io.Writer {
	w := &logWriter{t: t}
	t.Cleanup(w.close)
	return w
}

type logWriter struct {
	mu      sync.Mutex
	t       testing.TB
	partial []byte // an unfinished last line
	closed  bool
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return len(p), nil
	}
	w.partial = append(w.partial, p...)
	for {
		line, rest, found := bytes.Cut(w.partial, []byte("\n"))
		if !found {
			break
		}
		w.t.Log(string(line))
		w.partial = rest
	}
	return len(p), nil
}

// close logs an unfinished last line and drops whatever comes later.
func (w *logWriter) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.partial) > 0 {
		w.t.Log(string(w.partial))
	}
	w.closed = true
}
