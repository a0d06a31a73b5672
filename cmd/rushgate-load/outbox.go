package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/rushgate/rushgate/adapters/dataplatform"
	"github.com/rushgate/rushgate/adapters/gormdb"
	"github.com/rushgate/rushgate/adapters/notify"
	"github.com/rushgate/rushgate/adapters/system"
	"github.com/rushgate/rushgate/application/relay"
	"github.com/rushgate/rushgate/domain/outbox"
	"github.com/rushgate/rushgate/ports"
)

// The outbox drain: --users PENDING messages written straight to the database, drained by two
// relay workers (rushgate's relay service on the same database) into a fake data platform that
// fails 10% of calls, with the retry schedule shortened to milliseconds. Judged on messages per
// second; its invariant: no message sent twice at the same time, every message SENT or FAILED
// by the schedule, none sent more often than the schedule allows. The ceiling marks the same
// number of rows SENT one UPDATE each through database/sql: what the database alone does per
// message.

const (
	drainWorkers     = 2
	drainFailureRate = 0.1
	// drainRoundsInARow bounds the failed relay rounds a worker runs again in a row before it
	// gives up: a round can lose a claim to a database deadlock (InnoDB picks a victim when two
	// relays' claims and records cross) and the server's worker then simply runs the next tick,
	// as this one runs the next round; a database that stays unreachable fails the run.
	drainRoundsInARow = 20
)

// drainBackoff is the schedule shortened so a whole drain takes seconds.
var drainBackoff = outbox.Schedule{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond}

// newOutboxDrain is --users messages for two relay workers.
func newOutboxDrain(cfg config) (scenario, error) {
	return &outboxDrain{messages: cfg.users}, nil
}

// outboxDrain is two relays draining one outbox.
type outboxDrain struct {
	messages     int
	failedRounds atomic.Int64 // relay rounds that failed and ran again

	// Set by prepare.
	createdAt time.Time
	platform  *flakyPlatform
	url       string
	close     func()
}

var _ scenario = (*outboxDrain)(nil)

func (s *outboxDrain) shape() string {
	return fmt.Sprintf("%d PENDING messages → %d relay workers, platform failing %.0f%%", s.messages, drainWorkers, drainFailureRate*100)
}

func (s *outboxDrain) targets(gormdb.Dialect) []target {
	return []target{{measure: measureP99}}
}

// flakyPlatform fails a share of calls with 503 and notices two sends of one message at once.
type flakyPlatform struct {
	mu          sync.Mutex
	inFlight    map[string]bool
	calls       map[string]int
	overlapping atomic.Int64
	total       atomic.Int64
}

func (p *flakyPlatform) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	id := r.Header.Get("Idempotency-Key")
	p.total.Add(1)
	p.mu.Lock()
	if p.inFlight[id] {
		p.overlapping.Add(1)
	}
	p.inFlight[id] = true
	p.calls[id]++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.inFlight[id] = false
		p.mu.Unlock()
	}()
	if rand.Float64() < drainFailureRate {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// prepare writes the messages and starts the platform.
func (s *outboxDrain) prepare(ctx context.Context, e *env) error {
	// One timestamp marks this run's messages; it is in the past so they are due at once.
	s.createdAt = time.Now().UTC().Add(-time.Hour).Truncate(time.Millisecond)
	rows := make([][]any, s.messages)
	for i := range rows {
		id := uuid.NewString()
		rows[i] = []any{id, `{"messageId":"` + id + `"}`, "PENDING", 0, s.createdAt, "", s.createdAt}
	}
	if err := bulkInsert(ctx, e.db, "outbox (id, payload, status, attempts, next_attempt_at, last_error, created_at)", rows); err != nil {
		return err
	}
	s.platform = &flakyPlatform{inFlight: map[string]bool{}, calls: map[string]int{}}
	srv := httptest.NewServer(s.platform)
	s.url, s.close = srv.URL, srv.Close
	return nil
}

// run is the two workers: each relays until none of the run's messages is PENDING.
func (s *outboxDrain) run(e *env) work {
	stores := gormdb.NewStores(e.db)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	return work{n: drainWorkers, do: func(ctx context.Context, i int) attempt {
		r := relay.NewService(relay.Deps{Outbox: stores.Outbox, Platform: dataplatform.New(s.url, time.Second),
			Notifier: notify.Log{Logger: quiet}, Clock: system.Clock{}, IDs: system.UUIDs{}, Logger: quiet},
			relay.Config{Backoff: drainBackoff})
		start := time.Now()
		for failed := 0; ; {
			if _, err := r.Relay(ctx); err != nil {
				if failed++; failed >= drainRoundsInARow || !errors.Is(err, ports.ErrUnavailable) {
					return attempt{latency: time.Since(start), err: err}
				}
				s.failedRounds.Add(1)
				select {
				case <-ctx.Done():
					return attempt{latency: time.Since(start), err: ctx.Err()}
				case <-time.After(5 * time.Millisecond):
				}
				continue
			}
			failed = 0
			pending, err := s.pending(ctx, e)
			if err != nil || pending == 0 {
				return attempt{latency: time.Since(start), ok: err == nil, err: err}
			}
			time.Sleep(5 * time.Millisecond) // the next retries fall due
		}
	}}
}

// pending counts the run's messages still PENDING.
func (s *outboxDrain) pending(ctx context.Context, e *env) (int, error) {
	var n int
	err := e.db.SQL().QueryRowContext(ctx, gormdb.Bind(e.db.Dialect(),
		"SELECT COUNT(*) FROM outbox WHERE created_at = ? AND status = 'PENDING'"), s.createdAt).Scan(&n)
	return n, err
}

// invariant reads the run's messages by status and checks the platform's view of them.
func (s *outboxDrain) invariant(ctx context.Context, e *env, attempts []attempt) (invariantResult, error) {
	defer s.close()
	byStatus := map[string]int{}
	err := queryRows(ctx, e.db.SQL(), gormdb.Bind(e.db.Dialect(), "SELECT status, COUNT(*) FROM outbox WHERE created_at = ? GROUP BY status"),
		[]any{s.createdAt}, func(rows *sql.Rows) error {
			var status string
			var n int
			err := rows.Scan(&status, &n)
			byStatus[status] = n
			return err
		})
	if err != nil {
		return invariantResult{}, fmt.Errorf("invariant: count messages: %w", err)
	}
	drain := time.Duration(0)
	for _, a := range attempts {
		drain = max(drain, a.latency)
	}
	s.platform.mu.Lock()
	tooMany := 0
	for _, n := range s.platform.calls {
		if n > len(drainBackoff)+1 {
			tooMany++
		}
	}
	sentTo := len(s.platform.calls)
	s.platform.mu.Unlock()
	var violations []string
	if byStatus["PENDING"] > 0 || byStatus["SENT"]+byStatus["FAILED"] != s.messages {
		violations = append(violations, fmt.Sprintf("messages by status %v, want all %d SENT or FAILED", byStatus, s.messages))
	}
	if n := s.platform.overlapping.Load(); n > 0 {
		violations = append(violations, fmt.Sprintf("%d sends overlapped another send of the same message", n))
	}
	if tooMany > 0 {
		violations = append(violations, fmt.Sprintf("%d messages sent more than %d times", tooMany, len(drainBackoff)+1))
	}
	return invariantResult{
		rows: []invariantRow{
			{label: "db: SENT", value: byStatus["SENT"]},
			{label: "db: FAILED", value: byStatus["FAILED"]},
			{label: "db: PENDING", value: byStatus["PENDING"]},
			{label: "platform: calls", value: int(s.platform.total.Load())},
			{label: "platform: messages reached", value: sentTo},
			{label: "platform: overlapping sends of one message", value: int(s.platform.overlapping.Load())},
			{label: "relay rounds that failed and ran again", text: fmt.Sprintf("%d (target 0: %s)", s.failedRounds.Load(), passMiss(s.failedRounds.Load() == 0))},
			{label: fmt.Sprintf("messages/s (drained in %v)", drain.Round(time.Millisecond)), value: int(float64(s.messages) / max(drain.Seconds(), 0.001))},
		},
		violations: violations,
	}, nil
}

// ceiling marks as many fresh rows SENT, one UPDATE each.
func (s *outboxDrain) ceiling(ctx context.Context, e *env) (work, error) {
	now := time.Now().UTC()
	ids := make([]string, s.messages)
	rows := make([][]any, s.messages)
	for i := range rows {
		ids[i] = uuid.NewString()
		rows[i] = []any{ids[i], `{}`, "PENDING", 0, now, "", now}
	}
	if err := bulkInsert(ctx, e.db, "outbox (id, payload, status, attempts, next_attempt_at, last_error, created_at)", rows); err != nil {
		return work{}, fmt.Errorf("ceiling: %w", err)
	}
	mark := gormdb.Bind(e.db.Dialect(), "UPDATE outbox SET status = 'SENT', sent_at = ? WHERE id = ? AND status = 'PENDING'")
	return work{n: s.messages, do: func(ctx context.Context, i int) attempt {
		ctx, cancel := context.WithTimeout(ctx, e.timeout)
		defer cancel()
		start := time.Now()
		_, err := e.db.SQL().ExecContext(ctx, mark, time.Now().UTC(), ids[i])
		return attempt{latency: time.Since(start), ok: err == nil, err: err}
	}}, nil
}
