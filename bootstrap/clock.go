package bootstrap

import (
	"context"
	"log/slog"
	"time"

	"go.uber.org/fx"

	"github.com/rushgate/rushgate/adapters/redis"
	"github.com/rushgate/rushgate/adapters/system"
	"github.com/rushgate/rushgate/adapters/telemetry"
	"github.com/rushgate/rushgate/ports"
)

// LocalClock is this instance's own clock, time.Now, which the shared clock corrects to Redis's
// TIME, so that every instance decides by one clock (a raffle's close, an expiry) whatever its
// own shows.
type LocalClock func() time.Time

// clockSyncInterval is how often the shared clock measures its offset to Redis's TIME again: a
// local clock drifting by 10 ppm moves 0.1 ms in that time, and a clock set right (or wrong) by
// NTP shows in Now within it.
const clockSyncInterval = 10 * time.Second

// maxClockOffset is the offset to Redis's clock past which an instance's clock is reported off.
const maxClockOffset = time.Second

// provideClock is the clock of the application's services: the local clock corrected to Redis's
// TIME, measured at start and every clockSyncInterval, when Redis is configured; the system's
// otherwise (one instance).
func provideClock(lc fx.Lifecycle, local LocalClock, shared sharedRedis, log *slog.Logger, metrics *telemetry.Metrics) ports.Clock {
	if shared.client == nil {
		return system.Clock{}
	}
	clock := redis.NewSharedClock(shared.client, local)
	watch := &clockWatch{clock: clock, log: log, metrics: metrics}
	watch.sync(context.Background())
	runUntilStop(lc, every(clockSyncInterval, watch.sync))
	return clock
}

// clockWatch syncs the shared clock, records its offset in rushgate_clock_offset_seconds and logs
// each change of whether it is past maxClockOffset, and the first of a run of failed syncs.
type clockWatch struct {
	clock   *redis.SharedClock
	log     *slog.Logger
	metrics *telemetry.Metrics
	// off is whether the offset last measured was past maxClockOffset, which was logged then.
	off bool
	// failing is whether the last sync failed, which was logged then.
	failing bool
}

// sync measures the offset (three round trips, each within the Redis timeout) and reports it.
func (w *clockWatch) sync(ctx context.Context) {
	offset, err := w.clock.Sync(ctx)
	if ctx.Err() != nil {
		return // stopping
	}
	w.report(offset, err)
}

// report records offset in rushgate_clock_offset_seconds and logs a clock newly past
// maxClockOffset at error, one back within it at info; a failed sync (err) keeps the gauge, and
// the first of a run of them is logged at warn.
func (w *clockWatch) report(offset time.Duration, err error) {
	if err != nil {
		if !w.failing {
			w.log.Warn("redis TIME not read: the clock keeps the offset to Redis measured last",
				"offsetSeconds", offset.Seconds(), "error", err)
		}
		w.failing = true
		return
	}
	w.failing = false
	w.metrics.ClockOffset(offset)
	off := offset.Abs() > maxClockOffset
	switch {
	case off && !w.off:
		w.log.Error("this instance's clock is more than a second off Redis's: raffle closes, expiries and stamps follow "+
			"Redis's clock, but timeouts, logs and the time other systems see follow this one; check its NTP",
			"offsetSeconds", offset.Seconds())
	case !off && w.off:
		w.log.Info("this instance's clock is within a second of Redis's again", "offsetSeconds", offset.Seconds())
	}
	w.off = off
}
