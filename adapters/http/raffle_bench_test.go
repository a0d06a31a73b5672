package http_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	stdhttp "net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	rhttp "github.com/rushgate/rushgate/adapters/http"
	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/adapters/system"
	"github.com/rushgate/rushgate/adapters/telemetry"
	appraffle "github.com/rushgate/rushgate/application/raffle"
)

// BenchmarkRaffleEntry is the server's own cost of a raffle entry, through the whole middleware
// chain and the entries' combining, on the in-memory stores: what an entry adds to the HTTP
// request it rides on, in time and allocations (raffle-entry in the load tool measures the same
// over the network and a database). "first" is each user's first entry (201), "again" an entry
// of a user who has one (200); "parallel" sends first entries from several goroutines, so they
// share batches as a crowd's do.
func BenchmarkRaffleEntry(b *testing.B) {
	db := memory.NewDatabase()
	stores := memory.NewRaffleStores(db)
	raffles := appraffle.NewService(appraffle.Deps{Tx: db, Raffles: stores.Raffles, Entries: stores.Entries,
		Products: memory.NewCommerceStores(db).Products, Clock: system.Clock{}, IDs: system.UUIDs{}, Timeout: time.Second})
	tokens := rhttp.NewTokens(testSecret)
	// At warn, as the load tool runs the server: the access lines are not written.
	logger := slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn}))
	router := rhttp.NewRouter(rhttp.Deps{Routes: []rhttp.Routes{rhttp.RaffleRoutes(raffles)},
		Tokens: tokens, Logger: logger, Metrics: telemetry.NewMetrics(prometheus.NewRegistry())})
	// Each run enters a raffle of its own, so "first" finds no user entered.
	newRaffle := func(b *testing.B) string {
		view, err := raffles.Create(context.Background(), appraffle.CreateCommand{Name: "bench", Winners: 10,
			ClosesAt: time.Now().Add(time.Hour)})
		if err != nil {
			b.Fatal(err)
		}
		return "/raffles/" + view.ID + "/entries"
	}
	// Users are minted ahead of the timed loop; a run longer than this many entries wraps
	// around to users entered already, which "first" then reports.
	const users = 1 << 16
	bearers := mintBearers(b, tokens, users)
	enter := func(path string, i int, want int) error {
		req := httptest.NewRequest(stdhttp.MethodPost, path, stdhttp.NoBody)
		req.Header.Set("Authorization", bearers[i%users])
		rec := httptest.NewRecorder()
		router.ServeHTTP(rec, req)
		if rec.Code != want {
			return fmt.Errorf("entry answered %d, want %d: %s", rec.Code, want, rec.Body)
		}
		return nil
	}
	b.Run("first", func(b *testing.B) {
		path := newRaffle(b)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if i == users {
				b.Fatalf("more than %d entries: users would enter twice", users)
			}
			if err := enter(path, i, stdhttp.StatusCreated); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("again", func(b *testing.B) {
		path := newRaffle(b)
		const entered = 1024
		for i := range entered {
			if err := enter(path, i, stdhttp.StatusCreated); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if err := enter(path, i%entered, stdhttp.StatusOK); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("parallel", func(b *testing.B) {
		path := newRaffle(b)
		b.ReportAllocs()
		b.SetParallelism(16)
		var next atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				i := int(next.Add(1) - 1)
				if i >= users {
					b.Errorf("more than %d entries: users would enter twice", users)
					return
				}
				if err := enter(path, i, stdhttp.StatusCreated); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
