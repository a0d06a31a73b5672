package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
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

// departLua applies the disconnect rule to one user whose owner entry was just removed:
// admitted → slot back and token deleted (1), waiting → out of the queue (2).
const departLua = `
local owners, entry = KEYS[6], KEYS[7]
local function depart(user)
  redis.call('HDEL', owners, user)
  redis.call('HDEL', predicted, user)
  if redis.call('ZREM', admitted, user) == 1 then
    redis.call('HDEL', tokens, user)
    redis.call('HINCRBY', meta, 'released', 1)
    return 1
  end
  if redis.call('ZREM', queue, user) + redis.call('ZREM', pre, user) > 0 then
    redis.call('ZREM', seen, user)
    return 2
  end
  return 0
end
local function owns(held, owner) return held and string.sub(held, 1, #owner) == owner end
local function connection(owner) return string.match(owner, '^(.*)|(%d+)|$') end
`

func newPushScript(body string) *goredis.Script { return newWaitingScript(departLua + body) }

// connectScript records the owner, unless a newer connection of the same broker holds the
// user (ports.BrokerQueue), then enters as Enter does (or answers {'SOLD_OUT'}); the reply ends
// with the owner replaced, when another held the user. ARGV the listing generation read and
// listed (unlistedLua), user, owner.
var connectScript = newPushScript(enterLua + `
if soldOut() then return {'SOLD_OUT'} end
local relist = unlisted()
if relist then return relist end
local user, owner = ARGV[3], ARGV[4]
local held = redis.call('HGET', owners, user)
local replaced = false
if held and held ~= owner then
  local heldBroker, heldConn = connection(held)
  local broker, conn = connection(owner)
  replaced = not (heldBroker and heldBroker == broker and tonumber(heldConn) > tonumber(conn))
end
if replaced or not held then redis.call('HSET', owners, user, owner) end
local reply = enterReply({user})
if replaced then reply[4] = held end
return reply
`)

// disconnectScript departs the user if the owner, or an older connection of its broker
// (ports.Covers), holds it; answers {'OK', departure}. ARGV user, owner (or owner prefix).
var disconnectScript = newPushScript(`
local held = redis.call('HGET', owners, ARGV[1])
if not held then return {'OK', 0} end
if not owns(held, ARGV[2]) then
  local heldBroker, heldConn = connection(held)
  local broker, conn = connection(ARGV[2])
  if not (heldBroker and heldBroker == broker and tonumber(heldConn) < tonumber(conn)) then return {'OK', 0} end
end
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

// snapshotScript answers {'OK', remaining, waiting users in order, soldout}, or {'PREQUEUE'}
// while the pre-queue is not placed.
var snapshotScript = newWaitingScript(`
if closed() then return {'PREQUEUE'} end
local sold = 0
if soldOut() then sold = 1 end
return {'OK', remaining(), redis.call('ZRANGE', queue, 0, -1), sold}
`)

// promoteScript promotes the head, then acknowledges the routed entries and reads entries as
// readGroup does, in one call on the event's keys; it answers {'OK', promoted, {reclaimed,
// messages, owners}}. ARGV ttl ms, consumer, count, idle ms, then the routed entries.
var promoteScript = newPushScript(readGroupLua + `
local function promote()
  local left = remaining()
  if left == 0 or closed() then return 0 end
  local head = redis.call('ZRANGE', queue, 0, left - 1)
  local expiresAt = now + tonumber(ARGV[1])
  for _, user in ipairs(head) do
    redis.call('ZREM', queue, user)
    redis.call('ZREM', seen, user)
    redis.call('ZADD', admitted, expiresAt, user)
    redis.call('XADD', entry, '*', 'user', user)
    waited(user)
  end
  redis.call('HINCRBY', meta, 'claims', #head)
  return #head
end
local promoted = promote()
return {'OK', promoted, readGroup(entry, '` + entryGroup + `', ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), {unpack(ARGV, 5)}, owners, meta)}
`)

// issueScript answers {'OK', answers}, one per user: {'NOT_ADMITTED'}, {'HELD', token,
// expiresAt} or {'ISSUED', token, expiresAt}. ARGV ttl ms, then user, new token pairs.
var issueScript = newWaitingScript(`
local expiresAt = now + tonumber(ARGV[1])
local answers = {}
for i = 2, #ARGV, 2 do
  local user, token = ARGV[i], ARGV[i + 1]
  if not redis.call('ZSCORE', admitted, user) then
    answers[#answers + 1] = {'NOT_ADMITTED'}
  else
    redis.call('ZADD', admitted, expiresAt, user)
    local held = redis.call('HGET', tokens, user)
    if held then
      answers[#answers + 1] = {'HELD', held, expiresAt}
    else
      redis.call('HSET', tokens, user, token)
      answers[#answers + 1] = {'ISSUED', token, expiresAt}
    end
  end
end
return {'OK', answers}
`)

// Connect enters the user and makes owner the user's connection.
func (w *WaitingRoom) Connect(ctx context.Context, eventID, userID, owner string) (ports.QueuePlace, error) {
	const op = "connect to waiting room"
	state, r, err := w.runListed(ctx, op, connectScript, eventID, []any{notListed, notListed, userID, owner})
	if err != nil {
		return ports.QueuePlace{}, err
	}
	var replaced string
	if len(r) == 3 {
		replaced, _ = r[2].(string)
		r = r[:2]
	}
	places, err := enterAnswers(op, state, r, 1)
	if err != nil {
		return ports.QueuePlace{}, err
	}
	places[0].Replaced = replaced
	return places[0], nil
}

// TellReplaced appends a Replaced message to the dispatch stream of owner's broker; NOMKSTREAM
// leaves a broker without one (never read, or reaped) untold.
func (w *WaitingRoom) TellReplaced(ctx context.Context, eventID, userID, owner string) error {
	err := w.client.XAdd(ctx, &goredis.XAddArgs{Stream: w.dispatchKey(ports.OwnerBroker(owner)), NoMkStream: true,
		Values: []any{"event", eventID, "user", userID, "replaced", owner}}).Err()
	if err != nil && !errors.Is(err, goredis.Nil) {
		return unavailable("tell the replaced connection's broker", err)
	}
	return nil
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
	state, r, err := w.run(ctx, "read waiting line", snapshotScript, eventID)
	if err != nil {
		return ports.QueueSnapshot{}, err
	}
	if state == "PREQUEUE" {
		return ports.QueueSnapshot{Prequeue: true}, nil
	}
	members, _ := r[1].([]any)
	snap := ports.QueueSnapshot{RemainingSlots: toInt(r[0]), Waiting: make([]string, len(members)), SoldOut: toInt(r[2]) == 1}
	for i, m := range members {
		snap.Waiting[i], _ = m.(string)
	}
	return snap, nil
}

// Promote moves the head into the admitted set and the entry stream, then acknowledges and
// reads entries as ReadEntries does: one script on the event's keys.
func (w *WaitingRoom) Promote(ctx context.Context, eventID string, ttl time.Duration, read ports.EntryRead) (int, []ports.Promotion, error) {
	_, r, err := w.run(ctx, "promote waiting users", promoteScript, eventID, append([]any{ttl.Milliseconds()}, entryArgs(read)...)...)
	if err != nil {
		return 0, nil, err
	}
	answer, _ := r[1].([]any)
	msgs, reclaimed, err := groupMessages(answer)
	if err != nil {
		return 0, nil, err
	}
	return toInt(r[0]), entries(eventID, msgs, reclaimed), nil
}

// readGroupLua defines readGroup(stream, group, consumer, count, idle, done, owners, roomMeta),
// which acknowledges and deletes the messages done, then reclaims (XAUTOCLAIM, when idle, in ms,
// is positive) and reads new messages (XREADGROUP, without waiting) of stream for group and
// consumer, up to count in all (none when 0), creating the group at the stream's start on first
// use. A stream it creates for an event's room (roomMeta, the room's meta, given) takes the
// room's TTL, if it has one (WaitingRoom), so an expiring room leaves no key behind. It answers
// {reclaimed, {id, fields}..., owners}: with owners, a hash of the same event's connection
// owners, owners is each message's user's owner (false when none), read in the same call.
// Deleted messages an XAUTOCLAIM meets are skipped (Redis 7 lists them apart).
const readGroupLua = `
local function readGroup(stream, group, consumer, count, idle, done, ownersKey, roomMeta)
  if #done > 0 then
    redis.call('XACK', stream, group, unpack(done))
    redis.call('XDEL', stream, unpack(done))
  end
  local msgs, reclaimed = {}, 0
  if count <= 0 then return {0, msgs, {}} end
  local function collect(list)
    for _, m in ipairs(list) do
      if m and m[2] then msgs[#msgs + 1] = m end
    end
  end
  local function nogroup(reply)
    if type(reply) == 'table' and reply.err then
      if string.find(reply.err, 'NOGROUP') then
        redis.call('XGROUP', 'CREATE', stream, group, '0', 'MKSTREAM')
        local ttl = roomMeta and redis.call('PTTL', roomMeta) or -1
        if ttl > 0 then redis.call('PEXPIRE', stream, ttl) end
        return true
      end
      error(reply.err)
    end
    return false
  end
  if idle > 0 then
    local claimed = redis.pcall('XAUTOCLAIM', stream, group, consumer, idle, '0-0', 'COUNT', count)
    if not nogroup(claimed) then collect(claimed[2]) end
    reclaimed = #msgs
  end
  if #msgs < count then
    local fresh = redis.pcall('XREADGROUP', 'GROUP', group, consumer, 'COUNT', count - #msgs, 'STREAMS', stream, '>')
    if nogroup(fresh) then
      fresh = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', count - #msgs, 'STREAMS', stream, '>')
    end
    if fresh then collect(fresh[1][2]) end
  end
  local owners = {}
  if ownersKey then
    for i, m in ipairs(msgs) do
      local user = false
      for f = 1, #m[2], 2 do
        if m[2][f] == 'user' then user = m[2][f + 1] end
      end
      owners[i] = user and redis.call('HGET', ownersKey, user)
    end
  end
  return {reclaimed, msgs, owners}
end
`

// readGroupScript runs readGroup on stream KEYS[1] (and owners hash KEYS[2] and room meta
// KEYS[3] of an entry stream, when given). ARGV group, consumer, count, idle ms, then the
// messages done.
var readGroupScript = newScript(readGroupLua + `
return readGroup(KEYS[1], ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), {unpack(ARGV, 5)}, KEYS[2], KEYS[3])
`)

// ackScript acknowledges and deletes messages of stream KEYS[1] for group ARGV[1]: ARGV after
// the first. One script, so no message is left acknowledged but not deleted; in chunks, since
// Lua unpacks at most about 8,000 values at once and a broker whose acknowledgements failed
// for a while has more.
var ackScript = newScript(`
for first = 2, #ARGV, ` + strconv.Itoa(ackChunk) + ` do
  local last = math.min(first + ` + strconv.Itoa(ackChunk-1) + `, #ARGV)
  redis.call('XACK', KEYS[1], ARGV[1], unpack(ARGV, first, last))
  redis.call('XDEL', KEYS[1], unpack(ARGV, first, last))
end
return 1
`)

// ackChunk is how many messages one XACK and XDEL of ackScript name.
const ackChunk = 1000

// readGroup runs readGroupScript: acknowledges done, then reclaims and reads up to count
// messages; owners, when not "", is the owners hash whose entries the answer carries.
func (w *WaitingRoom) readGroup(ctx context.Context, stream, owners, group, consumer string, done []string, count int, reclaimIdle time.Duration) ([]groupMessage, int, error) {
	keys := []string{stream}
	if owners != "" {
		keys = append(keys, owners)
	}
	args := make([]any, 0, 4+len(done))
	args = append(args, group, consumer, count, reclaimIdle.Milliseconds())
	for _, id := range done {
		args = append(args, id)
	}
	reply, err := readGroupScript.Run(ctx, w.client, keys, args...).Slice()
	if err != nil {
		return nil, 0, err
	}
	return groupMessages(reply)
}

// groupMessage is a stream message readGroup answered, with its user's owner when asked.
type groupMessage struct {
	goredis.XMessage
	owner string
}

// groupMessages reads readGroup's answer {reclaimed, messages, owners}: the messages and how
// many of the first were reclaimed.
func groupMessages(reply []any) ([]groupMessage, int, error) {
	if len(reply) != 3 {
		return nil, 0, fmt.Errorf("read group: %d parts in the answer", len(reply))
	}
	raw, _ := reply[1].([]any)
	owners, _ := reply[2].([]any)
	msgs := make([]groupMessage, 0, len(raw))
	for i, m := range raw {
		parts, _ := m.([]any)
		if len(parts) != 2 {
			continue
		}
		id, _ := parts[0].(string)
		fields, _ := parts[1].([]any)
		values := make(map[string]any, len(fields)/2)
		for f := 0; f+1 < len(fields); f += 2 {
			name, _ := fields[f].(string)
			values[name] = fields[f+1]
		}
		msg := groupMessage{XMessage: goredis.XMessage{ID: id, Values: values}}
		if i < len(owners) {
			msg.owner, _ = owners[i].(string)
		}
		msgs = append(msgs, msg)
	}
	return msgs, toInt(reply[0]), nil
}

// entryArgs are readGroup's ARGV after the group for read.
func entryArgs(read ports.EntryRead) []any {
	args := make([]any, 0, 3+len(read.Routed))
	args = append(args, read.Consumer, read.Count, read.ReclaimIdle.Milliseconds())
	for _, id := range read.Routed {
		args = append(args, id)
	}
	return args
}

// ReadEntries acknowledges the routed entries, reclaims entries idle past read.ReclaimIdle,
// then reads new ones with their users' owners: one script on the event's keys.
func (w *WaitingRoom) ReadEntries(ctx context.Context, eventID string, read ports.EntryRead) ([]ports.Promotion, error) {
	keys := w.keys(eventID)
	reply, err := readGroupScript.Run(ctx, w.client, []string{keys[6], keys[5], keys[0]}, append([]any{entryGroup}, entryArgs(read)...)...).Slice()
	if err != nil {
		return nil, unavailable("read entry stream", err)
	}
	msgs, reclaimed, err := groupMessages(reply)
	if err != nil {
		return nil, err
	}
	return entries(eventID, msgs, reclaimed), nil
}

// entries reads entry messages of eventID, the first reclaimed of which were reclaimed.
func entries(eventID string, msgs []groupMessage, reclaimed int) []ports.Promotion {
	out := make([]ports.Promotion, 0, len(msgs))
	for i, m := range msgs {
		user, _ := m.Values["user"].(string)
		// An entry's id is "<ms of the Redis clock at XADD>-<seq>": the promotion's time.
		at, _, _ := strings.Cut(m.ID, "-")
		out = append(out, ports.Promotion{MessageID: m.ID, EventID: eventID, UserID: user, Owner: m.owner,
			PromotedAt: fromMillis(at), Reclaimed: i < reclaimed})
	}
	return out
}

func isNoGroup(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "NOGROUP") }

// Dispatch appends each promotion with an owner to its broker's dispatch stream: one pipeline
// (on a cluster, one per node, sent at once).
func (w *WaitingRoom) Dispatch(ctx context.Context, promotions []ports.Promotion) error {
	_, err := w.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for _, pr := range promotions {
			if pr.Owner != "" {
				p.XAdd(ctx, &goredis.XAddArgs{Stream: w.dispatchKey(ports.OwnerBroker(pr.Owner)),
					Values: []any{"event", pr.EventID, "user", pr.UserID, "at", pr.PromotedAt.UnixMilli()}})
			}
		}
		return nil
	})
	if err != nil {
		return unavailable("dispatch promotions", err)
	}
	return nil
}

// ReadDispatch reclaims the broker's messages unacknowledged past retryAfter and reads new ones
// in one script, when retryAfter is positive; only when there are none, or with retryAfter 0,
// does it wait, up to block, on a blocking read: a broker whose deliveries succeed reads a batch
// in that one round trip.
func (w *WaitingRoom) ReadDispatch(ctx context.Context, brokerID string, count int, block, retryAfter time.Duration) ([]ports.Promotion, error) {
	stream := w.dispatchKey(brokerID)
	if retryAfter > 0 {
		msgs, reclaimed, err := w.readGroup(ctx, stream, "", dispatchGroup, brokerID, nil, count, retryAfter)
		if err != nil {
			return nil, unavailable("read dispatch stream", err)
		}
		if len(msgs) > 0 || block <= 0 {
			return promotions(msgs, reclaimed), nil
		}
	}
	args := &goredis.XReadGroupArgs{Group: dispatchGroup, Consumer: brokerID, Streams: []string{stream, ">"},
		Count: int64(count), Block: block}
	if block <= 0 {
		args.Block = -1 // go-redis sends BLOCK 0, wait forever, for 0
	}
	streams, err := w.client.XReadGroup(ctx, args).Result()
	if isNoGroup(err) {
		// The broker's first read: the group starts at the stream's beginning, so nothing
		// dispatched before is skipped.
		err = w.client.XGroupCreateMkStream(ctx, stream, dispatchGroup, "0").Err()
		if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
			return nil, unavailable("create dispatch group", err)
		}
		streams, err = w.client.XReadGroup(ctx, args).Result()
	}
	if err != nil && !errors.Is(err, goredis.Nil) {
		return nil, unavailable("read dispatch stream", err)
	}
	var msgs []groupMessage
	for _, s := range streams {
		for _, m := range s.Messages {
			msgs = append(msgs, groupMessage{XMessage: m})
		}
	}
	return promotions(msgs, 0), nil
}

// promotions reads dispatch messages, the first reclaimed of which were reclaimed.
func promotions(msgs []groupMessage, reclaimed int) []ports.Promotion {
	out := make([]ports.Promotion, 0, len(msgs))
	for i, m := range msgs {
		event, _ := m.Values["event"].(string)
		user, _ := m.Values["user"].(string)
		p := ports.Promotion{MessageID: m.ID, EventID: event, UserID: user, Reclaimed: i < reclaimed}
		if replaced, ok := m.Values["replaced"].(string); ok {
			p.Owner, p.Replaced = replaced, true
		} else {
			p.PromotedAt = fromMillis(m.Values["at"])
		}
		out = append(out, p)
	}
	return out
}

// ackArgs are ackScript's keys and ARGV for ack.
func (w *WaitingRoom) ackArgs(ack ports.DispatchAck) ([]string, []any) {
	args := make([]any, 0, 1+len(ack.MessageIDs))
	args = append(args, dispatchGroup)
	for _, id := range ack.MessageIDs {
		args = append(args, id)
	}
	return []string{w.dispatchKey(ack.BrokerID)}, args
}

// AckDispatch acknowledges and deletes dispatch messages: one script on the stream.
func (w *WaitingRoom) AckDispatch(ctx context.Context, brokerID string, messageIDs []string) error {
	if len(messageIDs) == 0 {
		return nil
	}
	keys, args := w.ackArgs(ports.DispatchAck{BrokerID: brokerID, MessageIDs: messageIDs})
	if err := ackScript.Run(ctx, w.client, keys, args...).Err(); err != nil {
		return unavailable("acknowledge dispatch", err)
	}
	return nil
}

// Issue gives each admitted user of the grants the token already issued, or the grant's, in one
// script on the event's keys; with messages to acknowledge, it sends that script and ackScript
// on the broker's dispatch stream in one pipeline (on a cluster, one per node, sent at once:
// each script stays in its own hash slot).
func (w *WaitingRoom) Issue(ctx context.Context, eventID string, grants []ports.TokenGrant, ttl time.Duration, ack ports.DispatchAck) ([]ports.ClaimResult, error) {
	args := make([]any, 0, 1+2*len(grants))
	args = append(args, ttl.Milliseconds())
	for _, g := range grants {
		args = append(args, g.UserID, g.Token)
	}
	var issued *goredis.Cmd
	if len(ack.MessageIDs) == 0 {
		issued = issueScript.Run(ctx, w.client, w.keys(eventID), args...)
	} else {
		ackKeys, ackArgs := w.ackArgs(ack)
		var acked *goredis.Cmd
		_, _ = w.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
			issued = issueScript.EvalSha(ctx, p, w.keys(eventID), args...)
			acked = ackScript.EvalSha(ctx, p, ackKeys, ackArgs...)
			return nil
		})
		// A Redis that lost its scripts (a restart) runs them once more, with their bodies.
		if isNoScript(issued.Err()) {
			issued = issueScript.Run(ctx, w.client, w.keys(eventID), args...)
		}
		if isNoScript(acked.Err()) {
			acked = ackScript.Run(ctx, w.client, ackKeys, ackArgs...)
		}
		if err := acked.Err(); err != nil {
			return nil, unavailable("acknowledge dispatch", err)
		}
	}
	reply, err := issued.Slice()
	if err != nil {
		return nil, unavailable("issue entry tokens", err)
	}
	_, r, err := stateOf("issue entry tokens", reply)
	if err != nil {
		return nil, err
	}
	answers, _ := r[0].([]any)
	if len(answers) != len(grants) {
		return nil, fmt.Errorf("redis: issue entry tokens: %d answers for %d grants", len(answers), len(grants))
	}
	results := make([]ports.ClaimResult, len(grants))
	for i, a := range answers {
		parts, _ := a.([]any)
		if len(parts) != 3 {
			continue // NOT_ADMITTED
		}
		state, _ := parts[0].(string)
		held, _ := parts[1].(string)
		results[i] = ports.ClaimResult{Claimed: true, Created: state == "ISSUED", Token: held, ExpiresAt: fromMillis(parts[2])}
	}
	return results, nil
}

func isNoScript(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") }

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
	var done []string
	for {
		// Pending messages of the dead consumer (any idle time: its heartbeat is gone), then
		// the ones it never read; each read acknowledges the batch before.
		msgs, reclaimed, err := w.readGroup(ctx, stream, "", dispatchGroup, reaper, done, reapBatch, time.Millisecond)
		if err != nil {
			return freed, unavailable("reclaim dispatch stream", err)
		}
		if len(msgs) == 0 {
			break
		}
		done = done[:0]
		for _, p := range promotions(msgs, reclaimed) {
			departed, err := w.Disconnect(ctx, p.EventID, p.UserID, prefix)
			if err != nil && !errors.Is(err, ports.ErrRoomNotOpen) {
				return freed, err
			}
			if departed == ports.Released {
				freed++
			}
			done = append(done, p.MessageID)
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
