package http_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	stdhttp "net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	rhttp "github.com/rushgate/rushgate/adapters/http"
	"github.com/rushgate/rushgate/adapters/memory/memorytest"
	"github.com/rushgate/rushgate/adapters/system"
	"github.com/rushgate/rushgate/adapters/telemetry"
	appwaiting "github.com/rushgate/rushgate/application/waiting"
)

// BenchmarkPullRoutes is the server's own cost of a pull entry and a status poll beside a bare
// GET /healthz, through the whole middleware chain, on the in-memory waiting room: what an entry
// adds to the HTTP request it rides on, in time and allocations (the load tool measures the same
// ratio over the network and Redis).
func BenchmarkPullRoutes(b *testing.B) {
	clock := system.Clock{}
	env := memorytest.New(memorytest.WithClock(clock, system.Sleeper{}))
	stores := env.Stores
	events := appwaiting.NewService(appwaiting.Deps{Tx: stores.Tx, Events: stores.Events, Seats: stores.Seats,
		Reservations: stores.Reservations, Room: env.Coord.WaitingRoom, Guard: env.Guard, Clock: clock, IDs: system.UUIDs{}},
		appwaiting.Config{IdleTimeout: time.Hour})
	tokens := rhttp.NewTokens(testSecret)
	// At warn, as the load tool runs the server: the access lines are not written.
	logger := slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn}))
	router := rhttp.NewRouter(rhttp.Deps{Routes: []rhttp.Routes{rhttp.EventRoutes(events), rhttp.PushRoutes(nil, tokens, 0)},
		Tokens: tokens, Logger: logger, Metrics: telemetry.NewMetrics(prometheus.NewRegistry())})
	event, err := events.CreateEvent(context.Background(), appwaiting.CreateEventCommand{
		Name: "bench", Seats: 100, Slots: 100, Mode: "pull"})
	if err != nil {
		b.Fatal(err)
	}
	const users = 4096
	bearers := mintBearers(b, tokens, users)
	// The waiting page's polls carry its session cookie instead.
	sessions := make([]string, users)
	for i := range sessions {
		req := httptest.NewRequest(stdhttp.MethodPost, "/events/"+event.ID+"/waiting-room/session", stdhttp.NoBody)
		req.Header.Set("Authorization", bearers[i])
		rec := httptest.NewRecorder()
		router.ServeHTTP(rec, req)
		cookies := rec.Result().Cookies()
		if rec.Code != stdhttp.StatusNoContent || len(cookies) != 1 {
			b.Fatalf("session answered %d with %d cookies: %s", rec.Code, len(cookies), rec.Body)
		}
		sessions[i] = cookies[0].Name + "=" + cookies[0].Value
	}
	const (
		none = iota
		bearer
		session
	)
	queue := "/events/" + event.ID + "/queue"
	serve := func(b *testing.B, method, path string, credential int, want ...int) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			req := httptest.NewRequest(method, path, stdhttp.NoBody)
			switch credential {
			case bearer:
				req.Header.Set("Authorization", bearers[i%users])
			case session:
				req.Header.Set("Cookie", sessions[i%users])
			}
			rec := httptest.NewRecorder()
			router.ServeHTTP(rec, req)
			if rec.Code != want[0] && (len(want) < 2 || rec.Code != want[1]) {
				b.Fatalf("%s %s answered %d: %s", method, path, rec.Code, rec.Body)
			}
			i++
		}
	}
	b.Run("healthz", func(b *testing.B) { serve(b, stdhttp.MethodGet, "/healthz", none, stdhttp.StatusOK) })
	b.Run("enter", func(b *testing.B) {
		serve(b, stdhttp.MethodPost, queue, bearer, stdhttp.StatusCreated, stdhttp.StatusOK)
	})
	b.Run("status", func(b *testing.B) { serve(b, stdhttp.MethodGet, queue+"/status", bearer, stdhttp.StatusOK) })
	b.Run("status by session", func(b *testing.B) {
		serve(b, stdhttp.MethodGet, queue+"/status", session, stdhttp.StatusOK)
	})
}

// mintBearers mints users' Authorization headers ahead of a benchmark's timed loop, user i as
// "bench-user-<i>".
func mintBearers(b *testing.B, tokens *rhttp.Tokens, users int) []string {
	bearers := make([]string, users)
	for i := range bearers {
		token, err := tokens.Mint(fmt.Sprintf("bench-user-%d", i), rhttp.RoleUser, time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		bearers[i] = "Bearer " + token
	}
	return bearers
}
