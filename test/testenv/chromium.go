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

var (
	chromiumOnce sync.Once
	chromiumPath string
	chromiumErr  error
)

// Chromium returns the path of Debian's chromium, installing it with scripts/chromium.sh on a
// machine that lacks it (once per test binary). Unreachable when that fails: a skip, or a
// failure under CI=true.
func Chromium(t testing.TB) string {
	t.Helper()
	chromiumOnce.Do(func() {
		if path, err := exec.LookPath("chromium"); err == nil {
			chromiumPath = path
			return
		}
		_, file, _, _ := runtime.Caller(0)
		script := filepath.Join(filepath.Dir(file), "..", "..", "scripts", "chromium.sh")
		out, err := exec.Command("bash", script).Output()
		if err != nil {
			chromiumErr = errors.Join(errors.New("scripts/chromium.sh failed"), err)
			return
		}
		chromiumPath = strings.TrimSpace(string(out))
	})
	if chromiumErr != nil || chromiumPath == "" {
		Unreachable(t, "chromium", chromiumErr)
	}
	return chromiumPath
}
