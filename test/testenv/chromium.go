package testenv

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// chromiumInstallLimit bounds installing chromium with apt-get, waiting included for another
// apt-get (another test run's) to release Debian's package lock.
const chromiumInstallLimit = 10 * time.Minute

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
		ctx, cancel := context.WithTimeout(context.Background(), chromiumInstallLimit)
		defer cancel()
		out, err := exec.CommandContext(ctx, "bash", script).Output()
		switch {
		case ctx.Err() != nil:
			chromiumErr = fmt.Errorf("scripts/chromium.sh did not finish within %v", chromiumInstallLimit)
			return
		case err != nil:
			chromiumErr = fmt.Errorf("scripts/chromium.sh failed: %w", err)
			return
		}
		chromiumPath = strings.TrimSpace(string(out))
	})
	if chromiumErr != nil || chromiumPath == "" {
		Unreachable(t, "chromium", chromiumErr)
	}
	return chromiumPath
}
