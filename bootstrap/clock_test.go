package bootstrap

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rushgate/rushgate/adapters/telemetry"
)

// TestClockWatch_ReportsAClockOffOnceAChange: every offset measured is the gauge's value; a clock
// newly more than a second off Redis's is one error line, back within it one info line, and a
// run of failed syncs one warning that keeps the gauge.
func TestClockWatch_ReportsAClockOffOnceAChange(t *testing.T) {
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	w := &clockWatch{log: slog.New(slog.NewJSONHandler(&logs, nil)), metrics: telemetry.NewMetrics(reg)}
	gauge := func(want string) {
		t.Helper()
		expected := "# HELP rushgate_clock_offset_seconds How far Redis's clock (TIME) is ahead of this instance's own, " +
			"as last measured (every 10 s): the instance's times follow Redis's.\n# TYPE rushgate_clock_offset_seconds gauge\n"
		if want != "" {
			expected += "rushgate_clock_offset_seconds " + want + "\n"
		}
		if err := testutil.GatherAndCompare(reg, strings.NewReader(expected), "rushgate_clock_offset_seconds"); err != nil {
			t.Error(err)
		}
	}
	levels := func(want ...string) {
		t.Helper()
		var got []string
		for _, line := range logLines(t, &logs) {
			got = append(got, line["level"].(string))
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("log levels %v, want %v: %s", got, want, logs.String())
		}
		logs.Reset()
	}

	gauge("")
	w.report(300*time.Millisecond, nil)
	gauge("0.3")
	levels()
	w.report(-2500*time.Millisecond, nil)
	w.report(-2600*time.Millisecond, nil)
	gauge("-2.6")
	levels("ERROR")
	w.report(-2600*time.Millisecond, errors.New("redis: read TIME: unavailable"))
	w.report(-2600*time.Millisecond, errors.New("redis: read TIME: unavailable"))
	gauge("-2.6")
	levels("WARN")
	w.report(-100*time.Millisecond, nil)
	w.report(200*time.Millisecond, nil)
	gauge("0.2")
	levels("INFO")
	w.report(1500*time.Millisecond, nil)
	levels("ERROR")
}
