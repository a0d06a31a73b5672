package testenv

import (
	"errors"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// debianTool is one command's lookup, done once per test binary.
type debianTool struct {
	once sync.Once
	path string
	err  error
}

var (
	debianToolsMu sync.Mutex
	debianTools   = map[string]*debianTool{}
)

// DebianTool returns the path of command name, installing Debian's package of that name with
// scripts/debian-tool.sh on a machine that lacks it (once per test binary). Unreachable when
// that fails: a skip, or a failure under CI=true.
func DebianTool(t testing.TB, name string) string {
	t.Helper()
	debianToolsMu.Lock()
	tool, ok := debianTools[name]
	if !ok {
		tool = &debianTool{}
		debianTools[name] = tool
	}
	debianToolsMu.Unlock()
	tool.once.Do(func() {
		if path, err := exec.LookPath(name); err == nil {
			tool.path = path
			return
		}
		_, file, _, _ := runtime.Caller(0)
		script := filepath.Join(filepath.Dir(file), "..", "..", "scripts", "debian-tool.sh")
		out, err := exec.Command("bash", script, name).Output()
		if err != nil {
			tool.err = errors.Join(errors.New("scripts/debian-tool.sh "+name+" failed"), err)
			return
		}
		tool.path = strings.TrimSpace(string(out))
	})
	if tool.err != nil || tool.path == "" {
		Unreachable(t, name, tool.err)
	}
	return tool.path
}

// Chromium returns the path of Debian's chromium, for the waiting page's browser test.
func Chromium(t testing.TB) string {
	t.Helper()
	return DebianTool(t, "chromium")
}
