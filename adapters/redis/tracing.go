package redis

import (
	"fmt"

	"github.com/redis/go-redis/extra/redisotel/v9"
	goredis "github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"
)

// traceCommands makes each command (and pipeline) of c a span of tp, through go-redis's own
// OpenTelemetry instrumentation. The command's arguments are left out: they carry idempotency
// keys, tokens and user ids; so is the caller's source location, which costs a stack walk per
// command.
func traceCommands(c goredis.UniversalClient, tp trace.TracerProvider) error {
	if err := redisotel.InstrumentTracing(c, redisotel.WithTracerProvider(tp), redisotel.WithDBStatement(false),
		redisotel.WithCallerEnabled(false)); err != nil {
		return fmt.Errorf("redis: tracing: %w", err)
	}
	return nil
}
