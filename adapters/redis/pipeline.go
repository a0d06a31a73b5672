package redis

import (
	"context"
	"errors"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// pipelined is a client whose SET NX and script calls go to Redis together when concurrent
// callers make them: a call made while pipelinesInFlight pipelines are out waits, and the calls
// that waited go as one pipeline when one returns (the waiting room's combining engine, with one
// line for the whole client). A call with a free slot goes at once, alone. The lock's take and
// release and the idempotency scripts are four small calls per guarded request; a crowd's then
// cost Redis and the server a read and a write per pipeline instead of one per call. Every other
// command goes straight to the client.
//
// A pipeline keeps its calls' bounds: it runs until the earliest deadline among them (and the
// client's own timeouts), so no call waits past its own, and a pipeline Redis does not answer
// fails the calls waiting for the next one at once with ports.ErrUnavailable rather than each in
// turn. Its span (tracing) is its first call's child.
type pipelined struct {
	goredis.UniversalClient
	calls *combiner[struct{}, pipelinedCall, struct{}]
}

// pipelinesInFlight is how many pipelines of one client may be out at once: with one, every call
// that arrives while a slow reply is on its way waits for all of it.
const pipelinesInFlight = 2

// pipelinedCall is one call waiting for a pipeline, with its caller's deadline (zero: none).
type pipelinedCall struct {
	cmd      goredis.Cmder
	deadline time.Time
}

// withPipelining returns c with its SET NX and script calls pipelined across callers.
func withPipelining(c goredis.UniversalClient) *pipelined {
	p := &pipelined{UniversalClient: c}
	// Each call carries its caller's deadline, which bounds its pipeline (send).
	p.calls = newCombiner(pipelinesInFlight, 0, p.send)
	return p
}

// SetNX is the client's SetNX, pipelined when it expires (as a lock does).
func (p *pipelined) SetNX(ctx context.Context, key string, value any, expiration time.Duration) *goredis.BoolCmd {
	if expiration <= 0 {
		return p.UniversalClient.SetNX(ctx, key, value, expiration)
	}
	cmd := goredis.NewBoolCmd(ctx, "set", key, value, "px", expiration.Milliseconds(), "nx")
	p.do(ctx, cmd)
	return cmd
}

// EvalSha is the client's EvalSha, pipelined.
func (p *pipelined) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *goredis.Cmd {
	cmd := scriptCall(ctx, "evalsha", sha1, keys, args)
	p.do(ctx, cmd)
	return cmd
}

// Eval is the client's Eval, pipelined.
func (p *pipelined) Eval(ctx context.Context, script string, keys []string, args ...any) *goredis.Cmd {
	cmd := scriptCall(ctx, "eval", script, keys, args)
	p.do(ctx, cmd)
	return cmd
}

// scriptCall builds EVAL or EVALSHA as go-redis does, first key marked so that a Cluster
// pipeline sends it to the key's node.
func scriptCall(ctx context.Context, name, payload string, keys []string, args []any) *goredis.Cmd {
	callArgs := make([]any, 0, 3+len(keys)+len(args))
	callArgs = append(callArgs, name, payload, len(keys))
	for _, key := range keys {
		callArgs = append(callArgs, key)
	}
	cmd := goredis.NewCmd(ctx, append(callArgs, args...)...)
	if len(keys) > 0 {
		cmd.SetFirstKeyPos(3)
	}
	return cmd
}

// do sends cmd in the next pipeline and leaves its answer in it. A call whose context has ended
// is answered at once and never sent.
func (p *pipelined) do(ctx context.Context, cmd goredis.Cmder) {
	if err := ctx.Err(); err != nil {
		cmd.SetErr(err)
		return
	}
	deadline, _ := ctx.Deadline()
	if _, err := p.calls.do(ctx, struct{}{}, pipelinedCall{cmd: cmd, deadline: deadline}); err != nil {
		cmd.SetErr(err)
	}
}

// send is the combiner's run: one pipeline (or one call, alone), bounded by the earliest
// deadline among the calls. Each call keeps its own reply or Redis error; a pipeline that got
// no reply (a timeout, a lost connection) fails as a whole with ports.ErrUnavailable.
func (p *pipelined) send(ctx context.Context, _ struct{}, calls []pipelinedCall) ([]struct{}, error) {
	var earliest time.Time
	for _, c := range calls {
		if !c.deadline.IsZero() && (earliest.IsZero() || c.deadline.Before(earliest)) {
			earliest = c.deadline
		}
	}
	if !earliest.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, earliest)
		defer cancel()
	}
	if len(calls) == 1 {
		_ = p.Process(ctx, calls[0].cmd)
	} else {
		pipe := p.Pipeline()
		for _, c := range calls {
			_ = pipe.Process(ctx, c.cmd)
		}
		_, _ = pipe.Exec(ctx)
	}
	for _, c := range calls {
		if err := c.cmd.Err(); err != nil && !isRedisReply(err) {
			return nil, unavailable("pipeline", err)
		}
	}
	return make([]struct{}, len(calls)), nil
}

// isRedisReply reports an error Redis answered (a script's error, NOSCRIPT, a nil reply), as
// opposed to no answer at all.
func isRedisReply(err error) bool {
	var reply goredis.Error
	return errors.As(err, &reply)
}
