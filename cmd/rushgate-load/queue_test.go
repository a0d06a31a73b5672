package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
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
