package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rushgate/rushgate/test/testenv"
	"github.com/rushgate/rushgate/test/testkit"
)

// The tests in this file run the built binary, as an operator does: what it prints on its own
// standard streams (go-redis's default logger writes to the process's stderr) and how it exits
// are only seen from outside.

// The version and revision the test binary is linked with.
const (
	linkedVersion  = "v9.8.7"
	linkedRevision = "0123abc"
)

// binaryDir holds the binary the tests share; TestMain removes it.
var binaryDir string

func TestMain(m *testing.M) {
	code := m.Run()
	if binaryDir != "" {
		_ = os.RemoveAll(binaryDir)
	}
	os.Exit(code)
}

// buildBinary builds cmd/rushgate once, with the link-time version and revision.
var buildBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "rushgate-test-")
	if err != nil {
		return "", err
	}
	binaryDir = dir
	binary := filepath.Join(dir, "rushgate")
	const pkg = "github.com/rushgate/rushgate/adapters/system"
	ldflags := "-X " + pkg + ".version=" + linkedVersion + " -X " + pkg + ".revision=" + linkedRevision
	if out, err := exec.Command("go", "build", "-ldflags", ldflags, "-o", binary, ".").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	return binary, nil
})

// rushgateBinary returns the built binary, building it on first use.
func rushgateBinary(t *testing.T) string {
	t.Helper()
	testenv.Long(t, "builds the binary")
	binary, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	return binary
}

// closedAddr returns a loopback address nothing listens on (its port was just freed).
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// server is a running `rushgate serve` with its output collected.
type server struct {
	cmd            *exec.Cmd
	addr           string
	stdout, stderr lockedBuffer
	exited         chan error
}

// lockedBuffer collects a stream the test may read while the process still writes it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startServe runs `rushgate serve` on a free address with env added to the test's environment.
// The test's cleanup kills it if it is still running.
func startServe(t *testing.T, env ...string) *server {
	t.Helper()
	s := &server{addr: closedAddr(t), exited: make(chan error, 1)}
	s.cmd = exec.Command(rushgateBinary(t), "serve")
	s.cmd.Env = append(os.Environ(), append([]string{"RUSHGATE_ADDR=" + s.addr, "RUSHGATE_DATA_DIR=" + t.TempDir()}, env...)...)
	s.cmd.Stdout, s.cmd.Stderr = &s.stdout, &s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.exited <- s.cmd.Wait() }()
	t.Cleanup(func() {
		_ = s.cmd.Process.Kill()
		if err := <-s.exited; err != nil {
			t.Logf("rushgate serve ended: %v", err)
		}
	})
	return s
}

// waitExit returns the server's exit code once it has exited, failing the test after timeout.
func (s *server) waitExit(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case err := <-s.exited:
		s.exited <- err // for the cleanup
		if exit, ok := errors.AsType[*exec.ExitError](err); ok {
			return exit.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(timeout):
		t.Fatalf("rushgate serve did not exit within %v; stdout %s; stderr %s", timeout, s.stdout.String(), s.stderr.String())
		return -1
	}
}

// rushgateStderr is what the server wrote to stderr but the Go runtime's SCHED lines, which it
// prints under slowSysmon as it starts on a host up for more than 24.8 days.
func (s *server) rushgateStderr() string {
	var b strings.Builder
	for line := range strings.Lines(s.stderr.String()) {
		if !strings.HasPrefix(line, "SCHED ") {
			b.WriteString(line)
		}
	}
	return b.String()
}

// healthz polls GET /healthz until it answers, and returns its body.
func (s *server) healthz(t *testing.T) string {
	t.Helper()
	var body []byte
	testkit.Eventually(t, 30*time.Second, "an answer on /healthz", func() error {
		res, err := http.Get("http://" + s.addr + "/healthz")
		if err != nil {
			return fmt.Errorf("%w; stderr %s", err, s.stderr.String())
		}
		body, _ = io.ReadAll(res.Body)
		return res.Body.Close()
	})
	return string(body)
}

// TestVersion_LinkTimeOverride: a binary built with -ldflags -X prints, and serves on /healthz,
// the version and revision it was given.
func TestVersion_LinkTimeOverride(t *testing.T) {
	out, err := exec.Command(rushgateBinary(t), "version").Output()
	if want := "rushgate " + linkedVersion + " (revision " + linkedRevision + ")\n"; err != nil || string(out) != want {
		t.Fatalf("got %q, %v; want %q", out, err, want)
	}

	s := startServe(t, "RUSHGATE_LOG_LEVEL=error")
	want := `{"revision":"` + linkedRevision + `","status":"ok","version":"` + linkedVersion + `"}`
	if body := s.healthz(t); body != want {
		t.Fatalf("/healthz: %s, want %s", body, want)
	}
}

// TestServe_UnreachableRedisIsOneLine: a Redis that is not there stops the start with one line
// on stderr naming the variable and the address, never the password, and nothing else on
// stderr (go-redis's pool once printed a line per failed dial there).
func TestServe_UnreachableRedisIsOneLine(t *testing.T) {
	addr := closedAddr(t)
	s := startServe(t, "RUSHGATE_REDIS_URL=redis://:hunter2@"+addr+"/0", "RUSHGATE_JWT_SECRET="+strings.Repeat("s", 32))
	if code := s.waitExit(t, 30*time.Second); code != exitFailure {
		t.Fatalf("exit code %d, want %d; stderr %s", code, exitFailure, s.stderr.String())
	}
	stderr := s.rushgateStderr()
	if !strings.HasPrefix(stderr, "rushgate: RUSHGATE_REDIS_URL: ") || strings.Count(stderr, "\n") != 1 ||
		!strings.Contains(stderr, addr) || strings.Contains(stderr, "hunter2") {
		t.Fatalf("stderr is not one line naming RUSHGATE_REDIS_URL and %s: %q", addr, stderr)
	}
	for line := range strings.Lines(s.stdout.String()) {
		if !json.Valid([]byte(line)) {
			t.Errorf("an unstructured line on stdout: %q", line)
		}
		// The warm-up's warning is for a Redis that answers: here it would be a second line
		// about the one failure, telling of a start that goes on.
		if strings.Contains(line, "warm-up") {
			t.Errorf("a warm-up warning for a Redis that is not there: %s", line)
		}
	}
}

// TestServe_ShutdownLogsBeginAndEnd: SIGTERM stops the server with exit code 0, logging that
// the shutdown began and then that it completed.
func TestServe_ShutdownLogsBeginAndEnd(t *testing.T) {
	s := startServe(t, "RUSHGATE_JWT_SECRET="+strings.Repeat("s", 32))
	s.healthz(t)
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := s.waitExit(t, 30*time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM; stderr %s", code, s.stderr.String())
	}
	var messages []string
	for line := range strings.Lines(s.stdout.String()) {
		var entry struct {
			Msg string `json:"msg"`
		}
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Fatalf("an unstructured line on stdout: %q", line)
		}
		messages = append(messages, entry.Msg)
	}
	began, completed := -1, -1
	for i, msg := range messages {
		switch msg {
		case "shutdown began":
			began = i
		case "shutdown complete":
			completed = i
		}
	}
	if began < 0 || completed < began {
		t.Fatalf("want \"shutdown began\" then \"shutdown complete\", got %q", messages)
	}
}

// TestServe_RefusedConfigurationOpensAndLogsNothing: a configuration refused as a whole (a split
// push role without Redis) stops the start with one line on stderr before the database is
// dialed or anything is logged.
func TestServe_RefusedConfigurationOpensAndLogsNothing(t *testing.T) {
	database, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer database.Close()
	s := startServe(t, "RUSHGATE_ROLE=broker",
		"RUSHGATE_DATABASE_URL=postgres://postgres@"+database.Addr().String()+"/test?sslmode=disable")
	if code := s.waitExit(t, 30*time.Second); code != exitFailure {
		t.Fatalf("exit code %d, want %d; stderr %s", code, exitFailure, s.stderr.String())
	}
	if stderr := s.rushgateStderr(); !strings.HasPrefix(stderr, "rushgate: RUSHGATE_ROLE: ") || strings.Count(stderr, "\n") != 1 {
		t.Fatalf("stderr is not one line naming RUSHGATE_ROLE: %q", stderr)
	}
	if stdout := s.stdout.String(); stdout != "" {
		t.Fatalf("logged before refusing the configuration: %q", stdout)
	}
	// The process has exited, so a connection it made would be waiting in the backlog now.
	_ = database.(*net.TCPListener).SetDeadline(time.Now().Add(100 * time.Millisecond))
	if conn, err := database.Accept(); err == nil {
		_ = conn.Close()
		t.Fatal("the database was dialed before the configuration was refused")
	}
}

// TestServe_OpensTheWholeDatabasePoolBeforeAnswering: the first burst a server meets finds all
// of its pool's connections open.
func TestServe_OpensTheWholeDatabasePoolBeforeAnswering(t *testing.T) {
	const pool = 5
	database := testenv.Postgres(t)
	s := startServe(t, "RUSHGATE_DATABASE_URL="+database.URL, fmt.Sprint("RUSHGATE_DB_MAX_OPEN_CONNS=", pool))
	s.healthz(t)
	observer, err := sql.Open("pgx", database.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer observer.Close()
	var open int
	if err := observer.QueryRow("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()").
		Scan(&open); err != nil {
		t.Fatal(err)
	}
	if open != pool {
		t.Fatalf("%d connections of the server open once it answers, want its whole pool of %d", open, pool)
	}
}

// TestServe_RunsWithSysmonAtItsSlowTick: serve runs with the GODEBUG setting that keeps the
// runtime's sysmon at its slow tick, added to the operator's own settings, unless they name
// schedtrace themselves; the process that serves is the one started (same pid).
func TestServe_RunsWithSysmonAtItsSlowTick(t *testing.T) {
	for _, tc := range []struct{ given, want string }{
		{"", slowSysmon},
		{"http2client=0", "http2client=0," + slowSysmon},
		{"schedtrace=0", "schedtrace=0"},
	} {
		t.Run(tc.given, func(t *testing.T) {
			s := startServe(t, "RUSHGATE_LOG_LEVEL=error", "GODEBUG="+tc.given)
			s.healthz(t)
			environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", s.cmd.Process.Pid))
			if err != nil {
				t.Fatal(err)
			}
			var godebug []string
			for kv := range strings.SplitSeq(string(environ), "\x00") {
				if value, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
					godebug = append(godebug, value)
				}
			}
			if len(godebug) != 1 || godebug[0] != tc.want {
				t.Fatalf("the serving process's GODEBUG is %q, want [%q]", godebug, tc.want)
			}
		})
	}
}
