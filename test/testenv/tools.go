package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// toolInstallLimit bounds installing a tool with apt-get, waiting included for another apt-get
// (another test run's) to release Debian's package lock.
const toolInstallLimit = 10 * time.Minute

// debianTool is a command from a Debian package that a test needs, installed by
// scripts/debian-tool.sh on a machine that lacks it, once per test binary.
type debianTool struct {
	command, pkg string

	once sync.Once
	path string
	err  error
}

var (
	chromium = &debianTool{command: "chromium", pkg: "chromium"}
	promtool = &debianTool{command: "promtool", pkg: "prometheus"}
	jq       = &debianTool{command: "jq", pkg: "jq"}
)

// Chromium returns the path of Debian's chromium.
// Unreachable when that fails: a skip, or a failure under CI=true.
func Chromium(t testing.TB) string {
	t.Helper()
	return chromium.find(t)
}

// Promtool returns the path of promtool, from Debian's prometheus package. Unreachable when that fails: a skip, or a failure under
// CI=true.
func Promtool(t testing.TB) string {
	t.Helper()
	return promtool.find(t)
}

// Jq returns the path of Debian's jq. Unreachable when installing it fails: a skip, or a
// failure under CI=true.
func Jq(t testing.TB) string {
	t.Helper()
	return jq.find(t)
}

func (d *debianTool) find(t testing.TB) string {
	t.Helper()
	d.once.Do(func() {
		if path, err := exec.LookPath(d.command); err == nil {
			d.path = path
			return
		}
		_, file, _, _ := runtime.Caller(0)
		script := filepath.Join(filepath.Dir(file), "..", "..", "scripts", "debian-tool.sh")
		ctx, cancel := context.WithTimeout(context.Background(), toolInstallLimit)
		defer cancel()
		out, err := exec.CommandContext(ctx, "bash", script, d.command, d.pkg).Output()
		switch {
		case ctx.Err() != nil:
			d.err = fmt.Errorf("scripts/debian-tool.sh %s did not finish within %v", d.command, toolInstallLimit)
			return
		case err != nil:
			d.err = fmt.Errorf("scripts/debian-tool.sh %s failed (%w)%s", d.command, err, lastLine(err))
			return
		}
		d.path = strings.TrimSpace(string(out))
	})
	if d.err != nil || d.path == "" {
		Unreachable(t, d.command, d.err)
	}
	return d.path
}

// lastLine is ": " and the last line the failed script wrote to standard error, if any, so
// the failure reads as one line that says why.
func lastLine(err error) string {
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return ""
	}
	lines := bytes.Split(bytes.TrimSpace(exit.Stderr), []byte("\n"))
	if len(lines[len(lines)-1]) == 0 {
		return ""
	}
	return ": " + string(lines[len(lines)-1])
}
