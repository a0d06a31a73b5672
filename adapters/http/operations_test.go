package http_test

import (
	"context"
	"encoding/json"
	"errors"
	stdhttp "net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rushgate/rushgate/adapters/system"
	"github.com/rushgate/rushgate/adapters/telemetry"
	"github.com/rushgate/rushgate/bootstrap"
)

// TestHealthz_IsOKAndNamesTheBuild: /healthz answers the build `rushgate version` prints.
func TestHealthz_IsOKAndNamesTheBuild(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})

	rec := h.do(call{method: "GET", path: "/healthz"})

	require.Equal(t, stdhttp.StatusOK, rec.Code)
	build := system.ReadBuild()
	want, err := json.Marshal(map[string]string{"status": "ok", "version": build.Version, "revision": build.Revision})
	require.NoError(t, err)
	assert.JSONEq(t, string(want), rec.Body.String())
}

func passing(context.Context) error { return nil }

func TestReadyz_IsOKWhenEveryCheckPasses(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{readiness: []telemetry.ReadinessCheck{
		{Name: "database", Check: passing},
		{Name: "redis", Check: passing},
	}})

	rec := h.do(call{method: "GET", path: "/readyz"})

	require.Equal(t, stdhttp.StatusOK, rec.Code, rec.Body.String())
	assert.JSONEq(t, `{"status":"ready","checks":{"database":"ok","redis":"ok"}}`, rec.Body.String())
}

func TestReadyz_NamesTheFailingCheck(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{readiness: []telemetry.ReadinessCheck{
		{Name: "database", Check: passing},
		{Name: "redis", Check: func(context.Context) error { return errors.New("dial tcp 10.0.0.9:6379: refused") }},
	}})

	rec := h.do(call{method: "GET", path: "/readyz"})

	body := assertError(t, rec, stdhttp.StatusServiceUnavailable, "UNAVAILABLE")
	assert.Contains(t, body.Message, "redis")
	assert.NotContains(t, body.Message, "database")
	assert.NotContains(t, rec.Body.String(), "10.0.0.9")
	assert.Equal(t, "1", rec.Header().Get("Retry-After"))
	var checks struct {
		Checks map[string]string `json:"checks"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &checks))
	assert.Equal(t, map[string]string{"database": "ok", "redis": "failing"}, checks.Checks)
}

func TestReadyz_BoundsAHangingCheck(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{readiness: []telemetry.ReadinessCheck{
		{Name: "database", Check: func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }},
	}})

	rec := h.do(call{method: "GET", path: "/readyz"})

	body := assertError(t, rec, stdhttp.StatusServiceUnavailable, "UNAVAILABLE")
	assert.Contains(t, body.Message, "database")
}

func TestMetrics_RecordRequestsAndLockWaits(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	crewID := h.createCrew(3)
	tok, _ := h.userToken()
	require.Equal(t, stdhttp.StatusCreated, h.join(crewID, tok, "k1").Code)
	h.do(call{method: "GET", path: "/nope"})

	exposition := h.scrape()

	assert.Contains(t, exposition,
		`rushgate_http_request_duration_seconds_count{method="POST",route="/crews/:crewId/join",status="201"} 1`)
	assert.Contains(t, exposition,
		`rushgate_http_request_duration_seconds_count{method="POST",route="/crews",status="201"} 1`)
	assert.Contains(t, exposition,
		`rushgate_http_request_duration_seconds_count{method="GET",route="unmatched",status="404"} 1`)
	assert.Contains(t, exposition, `rushgate_lock_wait_seconds_count{lock="crew"} 1`)
	assert.Contains(t, exposition, `rushgate_lock_attempts_bucket{lock="crew",le="1"} 1`)
	assert.Contains(t, exposition, `rushgate_lock_queue_length_bucket{lock="crew",le="1"} 1`)
	assert.Contains(t, exposition, `rushgate_lock_batch_size_bucket{lock="crew",le="1"} 1`)
	assert.Contains(t, exposition, "rushgate_idempotency_replays_total 0")
}

// An instance started without a broker (--role dispatcher) answers the SSE route 503 with
// Retry-After, so a balancer's retry finds an instance that streams.
func TestWaitStream_WithoutABrokerIsUnavailable(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{role: bootstrap.RoleDispatcher})
	token, _ := h.userToken()
	rec := h.do(call{method: "GET", path: "/events/e1/tickets/waiting", token: token})
	assertError(t, rec, stdhttp.StatusServiceUnavailable, "UNAVAILABLE")
	assert.NotEmpty(t, rec.Header().Get("Retry-After"))
}
