package gormdb_test

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/rushgate/rushgate/adapters/gormdb"
	"github.com/rushgate/rushgate/domain/crew"
)

// TestTracing_EveryStatementIsASpanOfTheCallersSpan: with Options.Tracing, a statement run
// through GORM (its plugin) and a hand-written one are each a client span under the caller's
// span, naming the database and the query without its values.
func TestTracing_EveryStatementIsASpanOfTheCallersSpan(t *testing.T) {
	for name, fresh := range dialects {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			spans := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
			db := openMigrated(t, fresh, gormdb.Options{Tracing: tp})
			crews := gormdb.NewCrewRepository(db)
			c, err := crew.New(rand.Text(), "traced", 3, time.Now().UTC().Truncate(time.Microsecond))
			require.NoError(t, err)

			ctx, request := tp.Tracer("test").Start(context.Background(), "request")
			require.NoError(t, crews.Create(ctx, c))                                                 // through GORM
			require.NoError(t, crews.Save(ctx, crew.Rebuild(c.ID(), c.Name(), 3, 1, c.CreatedAt()))) // hand-written
			request.End()

			var statements []sdktrace.ReadOnlySpan
			for _, s := range spans.Ended() {
				if s.Parent().SpanID() == request.SpanContext().SpanID() {
					statements = append(statements, s)
				}
			}
			require.Len(t, statements, 2, "one span per statement under the request")
			for _, s := range statements {
				attrs := attribute.NewSet(s.Attributes()...)
				system, _ := attrs.Value("db.system.name")
				query, _ := attrs.Value("db.query.text")
				assert.NotEmpty(t, system.AsString(), "%s: db.system.name", s.Name())
				assert.NotContains(t, query.AsString(), c.ID(), "%s: the query text carries a value", s.Name())
			}
			assert.Contains(t, statements[0].Name(), "crews", "GORM's plugin names the statement by its table")
			assert.Equal(t, "save crew", statements[1].Name(), "a hand-written statement is named by what it does")
		})
	}
}
