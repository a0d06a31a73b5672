package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rushgate/rushgate/domain/draw"
)

// eventServer answers GET /events/{id} with answer(n), n counting the calls from 1.
func eventServer(t *testing.T, answer func(n int64) (int, string)) *env {
	t.Helper()
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status, body := answer(calls.Add(1))
		w.WriteHeader(status)
		_, _ = fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	return &env{api: newInstances([]string{srv.URL}, 1, time.Second)}
}

func TestAwaitSeed_AnswersThePublishedSeedWithTheTimeSinceOpensAt(t *testing.T) {
	t.Parallel()
	seed, err := draw.RandomSeed()
	require.NoError(t, err)
	e := eventServer(t, func(n int64) (int, string) {
		if n < 3 { // not placed yet
			return http.StatusOK, `{"id":"e1","prequeue":"shuffle"}`
		}
		return http.StatusOK, fmt.Sprintf(`{"id":"e1","seed":%q}`, seed.Hex())
	})
	opensAt := time.Now().Add(-time.Second)

	got, after, err := awaitSeed(context.Background(), e, "e1", nil, opensAt)
	require.NoError(t, err)
	assert.Equal(t, seed, got)
	assert.GreaterOrEqual(t, after, time.Second)
}

// A failing route is an error at once, not a slow opening: awaitSeed would otherwise poll it
// until prequeueSeedBound and report the time it took.
func TestAwaitSeed_StopsAtAnAnswerOtherThan200(t *testing.T) {
	t.Parallel()
	e := eventServer(t, func(int64) (int, string) {
		return http.StatusServiceUnavailable, `{"error":"UNAVAILABLE"}`
	})
	start := time.Now()
	_, _, err := awaitSeed(context.Background(), e, "e1", nil, time.Now())
	require.Error(t, err)
	assert.ErrorContains(t, err, "503")
	assert.Less(t, time.Since(start), prequeueSeedBound/2)
}

// metricsServer serves body as its /metrics.
func metricsServer(t *testing.T, status int, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
		_, _ = fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// The openings are summed over the instances, whichever opened the pre-queue; the histogram's
// buckets and other metrics are not counted.
func TestOpeningsObserved_SumsTheHistogramOverTheInstances(t *testing.T) {
	t.Parallel()
	opened := metricsServer(t, http.StatusOK, `# HELP rushgate_prequeue_opening_seconds How late …
# TYPE rushgate_prequeue_opening_seconds histogram
rushgate_prequeue_opening_seconds_bucket{le="0.5"} 1
rushgate_prequeue_opening_seconds_bucket{le="+Inf"} 2
rushgate_prequeue_opening_seconds_sum 1.25
rushgate_prequeue_opening_seconds_count 2
rushgate_queue_wait_error_seconds_count 7
`)
	idle := metricsServer(t, http.StatusOK, "rushgate_prequeue_opening_seconds_sum 0\nrushgate_prequeue_opening_seconds_count 0\n")
	e := &env{api: newInstances([]string{idle, opened}, 1, time.Second)}

	got, err := openingsObserved(context.Background(), e)
	require.NoError(t, err)
	assert.Equal(t, openings{count: 2, seconds: 1.25}, got)

	failing := &env{api: newInstances([]string{opened, metricsServer(t, http.StatusServiceUnavailable, "")}, 1, time.Second)}
	_, err = openingsObserved(context.Background(), failing)
	assert.ErrorContains(t, err, "503")
}
