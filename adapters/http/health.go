package http

import (
	"context"
	"log/slog"
	stdhttp "net/http"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rushgate/rushgate/adapters/system"
	"github.com/rushgate/rushgate/adapters/telemetry"
)

// readinessTimeout bounds each check so /readyz answers even when a dependency hangs.
const readinessTimeout = time.Second

// healthz answers GET /healthz: the process is up, and which build it runs.
func healthz(build system.Build) gin.HandlerFunc {
	return func(c *gin.Context) {
		writeJSON(c, stdhttp.StatusOK, gin.H{"status": "ok", "version": build.Version, "revision": build.Revision})
	}
}

// readyz answers GET /readyz: 200 when every check passes, else 503 UNAVAILABLE naming the
// failing checks. The checks run concurrently, each bounded by readinessTimeout; their errors are
// logged, not returned, since they may name hosts.
func readyz(checks []telemetry.ReadinessCheck) gin.HandlerFunc {
	return func(c *gin.Context) {
		errs := make([]error, len(checks))
		var wg sync.WaitGroup
		for i, check := range checks {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(c.Request.Context(), readinessTimeout)
				defer cancel()
				errs[i] = check.Check(ctx)
			})
		}
		wg.Wait()

		results := make(map[string]string, len(checks))
		var failing []string
		for i, check := range checks {
			if errs[i] == nil {
				results[check.Name] = "ok"
				continue
			}
			results[check.Name] = "failing"
			failing = append(failing, check.Name)
			requestLogger(c).LogAttrs(c.Request.Context(), slog.LevelWarn, "readiness check failed",
				slog.String("check", check.Name), slog.String("error", errs[i].Error()))
		}
		if len(failing) > 0 {
			notReady := errUnavailable.WithMessage("not ready: " + strings.Join(failing, ", ") + " failing").
				WithDetails(map[string]any{"checks": results})
			notReady.RetryAfter = unavailableRetryAfter
			writeError(c, stdhttp.StatusServiceUnavailable, notReady)
			return
		}
		writeJSON(c, stdhttp.StatusOK, gin.H{"status": "ready", "checks": results})
	}
}
