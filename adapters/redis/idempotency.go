package redis

import (
	"context"
	"crypto/rand"
	"fmt"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rushgate/rushgate/ports"
)

var _ ports.IdempotencyStore = (*IdempotencyStore)(nil)

// IdempotencyStore is a ports.IdempotencyStore keeping each record in one Redis hash with the
// fields status, fingerprint, token, lease_until (Redis server time, ms), response_outcome and
// response_body. Every operation is one Lua script, so it is atomic across instances, and
// leases are measured on the Redis server's clock, so instances with skewed clocks agree
// (this needs Redis 5 or later, which replicates a script's effects rather than re-running it).
// Concurrent callers' scripts go to Redis in one pipeline (pipelined). It is safe for
// concurrent use.
type IdempotencyStore struct {
	client goredis.UniversalClient
	prefix string
}

// NewIdempotencyStore returns a store whose keys start with prefix (e.g. "rushgate:idem:").
func NewIdempotencyStore(c goredis.UniversalClient, prefix string) *IdempotencyStore {
	return &IdempotencyStore{client: withPipelining(c), prefix: prefix}
}

// beginScript creates the record or takes over one whose lease expired, answering
// {"STARTED", fingerprint}; otherwise it answers {"IN_PROGRESS", fingerprint} or
// {"COMPLETED", fingerprint, response outcome, response body}. Only a request with the same
// fingerprint may take over: another payload is a reused key, whatever the lease says.
//
// KEYS[1] record; ARGV fingerprint, token, lease ms, ttl ms.
var beginScript = newScript(`
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local rec = redis.call('HMGET', KEYS[1], 'status', 'fingerprint', 'lease_until', 'response_outcome', 'response_body')
local status = rec[1]
if not status or (status == 'IN_PROGRESS' and tonumber(rec[3]) <= now and rec[2] == ARGV[1]) then
  redis.call('HSET', KEYS[1], 'status', 'IN_PROGRESS', 'fingerprint', ARGV[1], 'token', ARGV[2],
    'lease_until', string.format('%d', now + tonumber(ARGV[3])))
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
  return {'STARTED', ARGV[1]}
end
if status == 'IN_PROGRESS' then
  return {'IN_PROGRESS', rec[2]}
end
return {'COMPLETED', rec[2], rec[4], rec[5]}
`)

// completeScript stores the response if ARGV[1] still owns the record; 0 means it did not.
//
// KEYS[1] record; ARGV token, response outcome, response body, ttl ms.
var completeScript = newScript(`
if redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 'status', 'COMPLETED', 'response_outcome', ARGV[2], 'response_body', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
`)

// deleteScript removes the record if ARGV[1] still owns it; 0 means it did not.
//
// KEYS[1] record; ARGV token.
var deleteScript = newScript(`
if redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] then
  return 0
end
return redis.call('DEL', KEYS[1])
`)

// Begin starts the request identified by key, or reports what an earlier request with that key
// left behind. See ports.IdempotencyStore.
func (s *IdempotencyStore) Begin(ctx context.Context, key ports.IdempotencyKey, fingerprint string, lease, ttl time.Duration) (ports.BeginResult, error) {
	if err := atLeastOneMillisecond("lease", lease); err != nil {
		return ports.BeginResult{}, err
	}
	if err := atLeastOneMillisecond("ttl", ttl); err != nil {
		return ports.BeginResult{}, err
	}
	token := rand.Text()
	reply, err := beginScript.Run(ctx, s.client, []string{s.recordKey(key)},
		fingerprint, token, lease.Milliseconds(), ttl.Milliseconds()).StringSlice()
	if err != nil {
		// A script sent to a Redis that froze runs once it resumes, and would hold the key
		// IN_PROGRESS for nobody until the lease ends: every retry of the request that was
		// answered 503 would be refused as in progress. Take it back, if so, once Redis answers.
		undoLater(err, lease, func(ctx context.Context) error { return s.Delete(ctx, key, token) })
		return ports.BeginResult{}, unavailable("begin idempotency key", err)
	}
	return parseBeginReply(reply, token)
}

func parseBeginReply(reply []string, token string) (ports.BeginResult, error) {
	if len(reply) < 2 {
		return ports.BeginResult{}, fmt.Errorf("redis: begin idempotency key: unexpected reply %q", reply)
	}
	result := ports.BeginResult{Fingerprint: reply[1]}
	switch reply[0] {
	case "STARTED":
		result.State, result.Token = ports.BeginStarted, token
	case "IN_PROGRESS":
		result.State = ports.BeginInProgress
	case "COMPLETED":
		if len(reply) != 4 {
			return ports.BeginResult{}, fmt.Errorf("redis: begin idempotency key: unexpected reply %q", reply)
		}
		result.State = ports.BeginCompleted
		result.Response = ports.StoredResponse{Outcome: reply[2], Body: []byte(reply[3])}
	default:
		return ports.BeginResult{}, fmt.Errorf("redis: begin idempotency key: unexpected state %q", reply[0])
	}
	return result, nil
}

// Complete stores response for replay if token still owns key; otherwise it does nothing.
func (s *IdempotencyStore) Complete(ctx context.Context, key ports.IdempotencyKey, token string, response ports.StoredResponse, ttl time.Duration) error {
	if err := atLeastOneMillisecond("ttl", ttl); err != nil {
		return err
	}
	err := completeScript.Run(ctx, s.client, []string{s.recordKey(key)},
		token, response.Outcome, response.Body, ttl.Milliseconds()).Err()
	if err != nil {
		return unavailable("complete idempotency key", err)
	}
	return nil
}

// Delete removes key's record if token still owns it; otherwise it does nothing.
func (s *IdempotencyStore) Delete(ctx context.Context, key ports.IdempotencyKey, token string) error {
	if err := deleteScript.Run(ctx, s.client, []string{s.recordKey(key)}, token).Err(); err != nil {
		return unavailable("delete idempotency key", err)
	}
	return nil
}

// recordKey length-prefixes the scope, so no choice of scope and key (both may contain ':')
// can name another pair's record.
func (s *IdempotencyStore) recordKey(key ports.IdempotencyKey) string {
	return s.prefix + strconv.Itoa(len(key.Scope)) + ":" + key.Scope + ":" + key.Key
}

// atLeastOneMillisecond rejects a duration Redis cannot express: PEXPIRE takes whole
// milliseconds and deletes the key at zero.
func atLeastOneMillisecond(name string, d time.Duration) error {
	if d < time.Millisecond {
		return fmt.Errorf("redis: idempotency %s %v: must be at least 1ms", name, d)
	}
	return nil
}
