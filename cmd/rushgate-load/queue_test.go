package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sampleAdmitted keeps the peak of the operators' view, and a read that fails leaves the bound
// unproven: a view that never answered must not pass for "never more admitted than slots".
func TestSampleAdmitted_AFailedReadLeavesThePeakUnproven(t *testing.T) {
	t.Parallel()
	sample := func(answer func(n int64) (int, string)) admittedSamples {
		e := eventServer(t, answer)
		stop := make(chan struct{})
		time.AfterFunc(200*time.Millisecond, func() { close(stop) })
		return sampleAdmitted(context.Background(), e, "admin", "e1", stop)
	}

	answered := sample(func(n int64) (int, string) {
		if n == 2 {
			return http.StatusOK, `{"admitted":7}`
		}
		return http.StatusOK, `{"admitted":3}`
	})
	assert.Equal(t, 7, answered.peak)
	assert.Empty(t, answered.unproven())

	failing := sample(func(n int64) (int, string) {
		if n == 2 {
			return http.StatusServiceUnavailable, `{"error":"UNAVAILABLE"}`
		}
		return http.StatusOK, `{"admitted":3}`
	})
	assert.Equal(t, 3, failing.peak)
	assert.Contains(t, failing.unproven(), "503")

	assert.Equal(t, "the operators' queue view was never read", admittedSamples{}.unproven())
}

// pollOnce checks every answer of its timed run, after it: each must be 200 waiting or ready.
func TestPollOnce_ReportsEveryAnswerNotWaitingOrReady(t *testing.T) {
	t.Parallel()
	e := eventServer(t, func(n int64) (int, string) {
		switch n {
		case 2:
			return http.StatusOK, `{"status":"entered","rank":0}`
		case 5:
			return http.StatusNotFound, `{"error":"NOT_IN_QUEUE"}`
		}
		return http.StatusOK, `{"status":"waiting","rank":4}`
	})
	e.concurrency = 2
	s := &queuePull{eventID: "e1", bearers: make([]map[string]string, 6)}

	phase := s.pollOnce(context.Background(), e, []int{0, 1, 2, 3, 4, 5})

	assert.Equal(t, 5, phase.stats.succeeded, "the 404 is no success")
	require.Len(t, phase.failures, 2)
	joined := phase.failures[0] + "\n" + phase.failures[1]
	assert.Contains(t, joined, `"status":"entered"`)
	assert.Contains(t, joined, "404")
}
