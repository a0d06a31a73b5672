package gormdb

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"gorm.io/gorm"
	"gorm.io/plugin/opentelemetry/tracing"
)

// traceStatements makes every statement a span of tp: GORM's OpenTelemetry plugin traces what
// runs through GORM, and the hand-written statements trace themselves (traceStatement). Query
// text is recorded without its values, which hold user ids and amounts.
func (db *DB) traceStatements(tp trace.TracerProvider) error {
	if err := traceGorm(db.gorm, tp); err != nil {
		return err
	}
	db.tracer = tp.Tracer("github.com/rushgate/rushgate/adapters/gormdb")
	db.system = semconv.DBSystemNamePostgreSQL
	if db.dialect == MySQL {
		db.system = semconv.DBSystemNameMySQL
	}
	return nil
}

// traceGorm records the statements a GORM handle runs as spans of tp.
func traceGorm(handle *gorm.DB, tp trace.TracerProvider) error {
	if err := handle.Use(tracing.NewPlugin(tracing.WithTracerProvider(tp), tracing.WithoutMetrics(),
		tracing.WithoutQueryVariables())); err != nil {
		return fmt.Errorf("gormdb: tracing plugin: %w", err)
	}
	return nil
}

// traceStatement starts the span of a hand-written statement, named by what it does; the
// returned function ends it with the statement's error. Without tracing it costs a nil check.
func (db *DB) traceStatement(ctx context.Context, m errorMeanings, query string) (context.Context, func(error)) {
	if db.tracer == nil {
		return ctx, endNothing
	}
	ctx, span := db.tracer.Start(ctx, m.op, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(db.system, semconv.DBQueryText(query)))
	return ctx, func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

func endNothing(error) {}
