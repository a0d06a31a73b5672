package redis

import (
	"context"
	"errors"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rushgate/rushgate/ports"
)

var _ ports.PushQueue = (*WaitingRoom)(nil)

// Stream layout of the push mode, and why it keeps to Redis Cluster:
//
//   - the entry stream is one per event, …{E}:entry, inside the event's hash tag: the promotion
//     script removes users from …{E}:queue and appends them to the stream atomically, which a
//     single global ENTRY stream (another slot) could not do in one script on a cluster;
//   - a dispatch stream is one per broker, …dispatch:{brokerID}, in the broker's own hash tag:
//     routing is one XADD there and one XACK on the entry stream, each a single-key command, so
//     no command spans two slots. Routing is at least once (a dispatcher that dies between the
//     two re-routes the message); Issue answers the same token again, so a repeat is harmless.
//   - heartbeats are one key per broker, …broker:{brokerID}, with the heartbeat timeout as TTL,
//     and …brokers lists the brokers that ever heartbeat, so dead ones are found without SCAN.
const (
	entryGroup    = "dispatchers"
	dispatchGroup = "broker"
	// reaper is the consumer a dispatcher reclaims a dead broker's messages as.
	reaper = "reaper"
)

func (w *WaitingRoom) dispatchKey(brokerID string) string {
	return w.prefix + "dispatch:{" + brokerID + "}"
}
func (w *WaitingRoom) aliveKey(brokerID string) string { return w.prefix + "broker:{" + brokerID + "}" }
func (w *WaitingRoom) brokersKey() string              { return w.prefix + "brokers" }

// departLua applies the seed's disconnect rule to one user whose owner entry was just removed:
// admitted → slot back and token deleted (1), waiting → out of the queue (2).
const departLua = `
local owners, entry = KEYS[6], KEYS[7]
local function depart(user)
  redis.call('HDEL', owners, user)
  if redis.call('ZREM', admitted, user) == 1 then
    redis.call('HDEL', tokens, user)
    redis.call('HINCRBY', meta, 'released', 1)
    return 1
  end
  if redis.call('ZREM', queue, user) == 1 then
    redis.call('ZREM', seen, user)
    return 2
  end
  return 0
end
local function owns(held, owner) return held and string.sub(held, 1, #owner) == owner end
`

func newPushScript(body string) *goredis.Script { return newWaitingScript(departLua + body) }

// connectScript records the owner, then enters as Enter does. ARGV user, owner.
var connectScript = newPushScript(enterLua + `
redis.call('HSET', owners, ARGV[1], ARGV[2])
return enterAll({ARGV[1]})[1]
`)

// disconnectScript answers {'OK', departure}. ARGV user, owner (or owner prefix).
var disconnectScript = newPushScript(`
if not owns(redis.call('HGET', owners, ARGV[1]), ARGV[2]) then return {'OK', 0} end
return {'OK', depart(ARGV[1])}
`)

// reapScript departs every user whose owner starts with ARGV[1]; answers {'OK', released}.
var reapScript = newPushScript(`
local freed = 0
local all = redis.call('HGETALL', owners)
for i = 1, #all, 2 do
  if owns(all[i + 1], ARGV[1]) and depart(all[i]) == 1 then freed = freed + 1 end
end
return {'OK', freed}
`)

// snapshotScript answers {'OK', remaining, waiting users in order}.
var snapshotScript = newWaitingScript(`return {'OK', remaining(), redis.call('ZRANGE', queue, 0, -1)}`)

// promoteScript answers {'OK', promoted}. ARGV ttl ms.
var promoteScript = newPushScript(`
local left = remaining()
if left == 0 then return {'OK', 0} end
local head = redis.call('ZRANGE', queue, 0, left - 1)
local expiresAt = now + tonumber(ARGV[1])
for _, user in ipairs(head) do
  redis.call('ZREM', queue, user)
  redis.call('ZREM', seen, user)
  redis.call('ZADD', admitted, expiresAt, user)
  redis.call('XADD', entry, '*', 'user', user)
end
redis.call('HINCRBY', meta, 'claims', #head)
return {'OK', #head}
`)

// issueScript answers {'NOT_ADMITTED'}, {'HELD', token, expiresAt} or {'ISSUED', token,
// expiresAt}. ARGV user, new token, ttl ms.
var issueScript = newWaitingScript(`
local user = ARGV[1]
if not redis.call('ZSCORE', admitted, user) then return {'NOT_ADMITTED'} end
local expiresAt = now + tonumber(ARGV[3])
redis.call('ZADD', admitted, expiresAt, user)
local held = redis.call('HGET', tokens, user)
if held then return {'HELD', held, expiresAt} end
redis.call('HSET', tokens, user, ARGV[2])
return {'ISSUED', ARGV[2], expiresAt}
`)

// Connect enters the user and makes owner the user's connection.
func (w *WaitingRoom) Connect(ctx context.Context, eventID, userID, owner string) (ports.QueuePlace, error) {
	state, r, err := w.run(ctx, "connect to waiting room", connectScript, eventID, userID, owner)
	if err != nil {
		return ports.QueuePlace{}, err
	}
	return w.entered(ctx, eventID, state, r)
}

// Disconnect applies the disconnect rule if owner still holds the user.
func (w *WaitingRoom) Disconnect(ctx context.Context, eventID, userID, owner string) (ports.Departure, error) {
	_, r, err := w.run(ctx, "disconnect from waiting room", disconnectScript, eventID, userID, owner)
	if err != nil {
		return ports.Stayed, err
	}
	return ports.Departure(toInt(r[0])), nil
}

// Snapshot answers the waiting line in one script.
func (w *WaitingRoom) Snapshot(ctx context.Context, eventID string) (ports.QueueSnapshot, error) {
	_, r, err := w.run(ctx, "read waiting line", snapshotScript, eventID)
	if err != nil {
		return ports.QueueSnapshot{}, err
	}
	members, _ := r[1].([]any)
	snap := ports.QueueSnapshot{RemainingSlots: toInt(r[0]), Waiting: make([]string, len(members))}
	for i, m := range members {
		snap.Waiting[i], _ = m.(string)
	}
	return snap, nil
}

// Promote moves the head into the admitted set and the entry stream.
func (w *WaitingRoom) Promote(ctx context.Context, eventID string, ttl time.Duration) (int, error) {
	_, r, err := w.run(ctx, "promote waiting users", promoteScript, eventID, ttl.Milliseconds())
	if err != nil {
		return 0, err
	}
	return toInt(r[0]), nil
}

// ReadEntries reclaims entries idle past reclaimIdle, then reads new ones.
func (w *WaitingRoom) ReadEntries(ctx context.Context, eventID, consumer string, count int, reclaimIdle time.Duration) ([]ports.Promotion, error) {
	stream := w.keys(eventID)[6]
	msgs, reclaimed, err := w.readGroup(ctx, stream, entryGroup, consumer, count, reclaimIdle, 0)
	if err != nil {
		return nil, unavailable("read entry stream", err)
	}
	out := make([]ports.Promotion, 0, len(msgs))
	for i, m := range msgs {
		user, _ := m.Values["user"].(string)
		// An entry's id is "<ms of the Redis clock at XADD>-<seq>": the promotion's time.
		at, _, _ := strings.Cut(m.ID, "-")
		out = append(out, ports.Promotion{MessageID: m.ID, EventID: eventID, UserID: user, PromotedAt: fromMillis(at),
			Reclaimed: i < reclaimed})
	}
	return out, nil
}

// readGroup reclaims (XAUTOCLAIM) up to count messages idle past reclaimIdle when it is
// positive, then reads new ones (XREADGROUP, waiting up to block when positive), creating the
// group at the stream's start on first use. The first reclaimed messages are the reclaimed ones.
func (w *WaitingRoom) readGroup(ctx context.Context, stream, group, consumer string, count int, reclaimIdle, block time.Duration) (msgs []goredis.XMessage, reclaimed int, err error) {
	if reclaimIdle > 0 {
		claimed, _, err := w.client.XAutoClaim(ctx, &goredis.XAutoClaimArgs{
			Stream: stream, Group: group, Consumer: consumer, MinIdle: reclaimIdle, Start: "0-0", Count: int64(count),
		}).Result()
		if err != nil && !isNoGroup(err) {
			return nil, 0, err
		}
		msgs = append(msgs, claimed...)
		reclaimed = len(msgs)
		if len(msgs) >= count {
			return msgs, reclaimed, nil
		}
	}
	args := &goredis.XReadGroupArgs{Group: group, Consumer: consumer, Streams: []string{stream, ">"},
		Count: int64(count - len(msgs)), Block: -1}
	if block > 0 && len(msgs) == 0 {
		args.Block = block
	}
	streams, err := w.client.XReadGroup(ctx, args).Result()
	if isNoGroup(err) {
		if err := w.client.XGroupCreateMkStream(ctx, stream, group, "0").Err(); err != nil && !strings.Contains(err.Error(), "BUSYGROUP") {
			return nil, 0, err
		}
		streams, err = w.client.XReadGroup(ctx, args).Result()
	}
	if err != nil && !errors.Is(err, goredis.Nil) {
		return nil, 0, err
	}
	for _, s := range streams {
		msgs = append(msgs, s.Messages...)
	}
	return msgs, reclaimed, nil
}

func isNoGroup(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "NOGROUP") }

// AckEntry acknowledges and deletes an entry message.
func (w *WaitingRoom) AckEntry(ctx context.Context, eventID, messageID string) error {
	return w.ack(ctx, "acknowledge entry", w.keys(eventID)[6], entryGroup, messageID)
}

// ack acknowledges and deletes a message, in one transaction on the stream's key.
func (w *WaitingRoom) ack(ctx context.Context, op, stream, group, messageID string) error {
	_, err := w.client.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		p.XAck(ctx, stream, group, messageID)
		p.XDel(ctx, stream, messageID)
		return nil
	})
	if err != nil {
		return unavailable(op, err)
	}
	return nil
}

// Owner answers the user's connection owner.
func (w *WaitingRoom) Owner(ctx context.Context, eventID, userID string) (string, error) {
	owner, err := w.client.HGet(ctx, w.keys(eventID)[5], userID).Result()
	if errors.Is(err, goredis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", unavailable("read connection owner", err)
	}
	return owner, nil
}

// Dispatch appends the promotion to the broker's dispatch stream.
func (w *WaitingRoom) Dispatch(ctx context.Context, brokerID string, p ports.Promotion) error {
	err := w.client.XAdd(ctx, &goredis.XAddArgs{Stream: w.dispatchKey(brokerID),
		Values: []any{"event", p.EventID, "user", p.UserID, "at", p.PromotedAt.UnixMilli()}}).Err()
	if err != nil {
		return unavailable("dispatch promotion", err)
	}
	return nil
}

// ReadDispatch retries the broker's unacknowledged messages, then reads new ones.
func (w *WaitingRoom) ReadDispatch(ctx context.Context, brokerID string, count int, block, retryAfter time.Duration) ([]ports.Promotion, error) {
	msgs, reclaimed, err := w.readGroup(ctx, w.dispatchKey(brokerID), dispatchGroup, brokerID, count, retryAfter, block)
	if err != nil {
		return nil, unavailable("read dispatch stream", err)
	}
	return promotions(msgs, reclaimed), nil
}

// promotions reads dispatch messages, the first reclaimed of which were reclaimed.
func promotions(msgs []goredis.XMessage, reclaimed int) []ports.Promotion {
	out := make([]ports.Promotion, 0, len(msgs))
	for i, m := range msgs {
		event, _ := m.Values["event"].(string)
		user, _ := m.Values["user"].(string)
		out = append(out, ports.Promotion{MessageID: m.ID, EventID: event, UserID: user, PromotedAt: fromMillis(m.Values["at"]),
			Reclaimed: i < reclaimed})
	}
	return out
}

// AckDispatch acknowledges and deletes a dispatch message.
func (w *WaitingRoom) AckDispatch(ctx context.Context, brokerID, messageID string) error {
	return w.ack(ctx, "acknowledge dispatch", w.dispatchKey(brokerID), dispatchGroup, messageID)
}

// Issue gives the admitted user the token already issued, or token.
func (w *WaitingRoom) Issue(ctx context.Context, eventID, userID, token string, ttl time.Duration) (ports.ClaimResult, error) {
	state, r, err := w.run(ctx, "issue entry token", issueScript, eventID, userID, token, ttl.Milliseconds())
	if err != nil || state == "NOT_ADMITTED" {
		return ports.ClaimResult{}, err
	}
	held, _ := r[0].(string)
	return ports.ClaimResult{Claimed: true, Created: state == "ISSUED", Token: held, ExpiresAt: fromMillis(r[1])}, nil
}

// Heartbeat marks the broker alive for ttl and lists it among the brokers; the key's previous
// value (SET … GET) tells whether the last heartbeat was still alive.
func (w *WaitingRoom) Heartbeat(ctx context.Context, brokerID string, ttl time.Duration) (bool, error) {
	var previous *goredis.StatusCmd
	var listed *goredis.IntCmd
	// Each command's own error is checked: the pipeline's is the first one, redis.Nil included.
	_, _ = w.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		previous = p.SetArgs(ctx, w.aliveKey(brokerID), 1, goredis.SetArgs{TTL: ttl, Get: true})
		listed = p.SAdd(ctx, w.brokersKey(), brokerID)
		return nil
	})
	for _, err := range []error{previous.Err(), listed.Err()} {
		if err != nil && !errors.Is(err, goredis.Nil) {
			return false, unavailable("broker heartbeat", err)
		}
	}
	return previous.Err() == nil, nil
}

// DeadBrokers lists the brokers whose heartbeat key expired.
func (w *WaitingRoom) DeadBrokers(ctx context.Context) ([]string, error) {
	brokers, err := w.client.SMembers(ctx, w.brokersKey()).Result()
	if err != nil {
		return nil, unavailable("list brokers", err)
	}
	alive := make([]*goredis.IntCmd, len(brokers))
	_, err = w.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, b := range brokers {
			alive[i] = p.Exists(ctx, w.aliveKey(b))
		}
		return nil
	})
	if err != nil {
		return nil, unavailable("check brokers", err)
	}
	var dead []string
	for i, b := range brokers {
		if alive[i].Val() == 0 {
			dead = append(dead, b)
		}
	}
	return dead, nil
}

// reapBatch bounds one read of a dead broker's dispatch stream.
const reapBatch = 500

// ReapBroker reclaims a dead broker's messages and users and forgets it.
func (w *WaitingRoom) ReapBroker(ctx context.Context, brokerID string, events []string) (int, error) {
	prefix := brokerID + "|"
	freed := 0
	stream := w.dispatchKey(brokerID)
	for {
		// Pending messages of the dead consumer (any idle time: its heartbeat is gone), then
		// the ones it never read.
		msgs, reclaimed, err := w.readGroup(ctx, stream, dispatchGroup, reaper, reapBatch, time.Millisecond, 0)
		if err != nil {
			return freed, unavailable("reclaim dispatch stream", err)
		}
		if len(msgs) == 0 {
			break
		}
		for _, p := range promotions(msgs, reclaimed) {
			departed, err := w.Disconnect(ctx, p.EventID, p.UserID, prefix)
			if err != nil && !errors.Is(err, ports.ErrRoomNotOpen) {
				return freed, err
			}
			if departed == ports.Released {
				freed++
			}
			if err := w.AckDispatch(ctx, brokerID, p.MessageID); err != nil {
				return freed, err
			}
		}
	}
	for _, eventID := range events {
		_, r, err := w.run(ctx, "reap broker", reapScript, eventID, prefix)
		if errors.Is(err, ports.ErrRoomNotOpen) {
			continue
		}
		if err != nil {
			return freed, err
		}
		freed += toInt(r[0])
	}
	if err := w.client.Del(ctx, stream).Err(); err != nil {
		return freed, unavailable("delete dispatch stream", err)
	}
	if err := w.client.SRem(ctx, w.brokersKey(), brokerID).Err(); err != nil {
		return freed, unavailable("forget broker", err)
	}
	return freed, nil
}
