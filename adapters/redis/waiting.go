package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rushgate/rushgate/ports"
)

var _ ports.WaitingRoom = (*WaitingRoom)(nil)

// WaitingRoomKeyPrefix starts the keys of the waiting rooms NewCoordination keeps.
const WaitingRoomKeyPrefix = "rushgate:wr:"

// WaitingRoom is a ports.WaitingRoom (and a ports.PushQueue, push.go) on Redis. Each event's
// state lives in eleven keys that share the hash tag {eventId}, so every script touches one
// cluster slot:
//
//	…{E}:meta      hash  slots, seats (the seat counter), seq (the last entry's sequence
//	                     number), claims, expired, dropped, released, soldout (1 once
//	                     marked sold out)
//	…{E}:queue     zset  waiting user → entry sequence number (FIFO, ties impossible)
//	…{E}:seen      zset  waiting user → last sign of life, ms of the Redis clock
//	…{E}:admitted  zset  admitted user → token expiry, ms of the Redis clock
//	…{E}:tokens    hash  admitted user → token
//	…{E}:owners    hash  push mode: user → the SSE connection holding the user
//	…{E}:entry     stream push mode: the promoted users, read by the dispatchers' group
//	…{E}:pre       zset  a gated room's pre-queued users → entry sequence number (prequeue.go)
//	…{E}:predicted hash  waiting user → "ms:seconds", the first wait estimate and when
//	…{E}:waits     list  the latest wait errors in ms (newest first, ports.MaxWaitErrors)
//	…{E}:waitsnew  list  wait errors no Reconcile has answered yet
//
// Slots taken are ZCARD(admitted), so there is no counter to drift: a token's slot comes back
// when its member leaves the admitted set, which happens once, atomically, whether the user
// returned it (Release) or its expiry passed (every script first moves the expired members out,
// before counting remaining slots, and Reconcile does so on the workers' tick). Keyspace
// notifications are not used: they are fire-and-forget (lost while no subscriber is connected),
// must be enabled on the server, and on a cluster arrive only on the node that expired the key.
//
// The index of events in use, …listed, is a sorted set kept outside the scripts (it lives in
// another slot, so it is a separate command), whose score is the room's listing generation
// (meta's listing). The passes (Reconcile, the dispatchers) find rooms only through it, and a
// Redis restarted from an append-only file cut anywhere (appendfsync everysec loses the last
// second's writes) must still list every room in use, so the index entry is always written
// BEFORE the room's keys that need it: a cut can leave an entry without a room (the passes open
// that room again from the database), never a room in use without its entry.
//
// The script of the Reconcile call that finds a room empty increments its generation and gives
// each of its keys the same expiry, the retention ahead (ports.RoomReconciler); Reconcile then
// takes the event out of the index only if its score is below that generation. A room with a
// TTL is thus one the index may have dropped: the scripts that put it back in use (Enter,
// Connect, SetSlots, Open: unlistedLua) answer UNLISTED with its generation instead of writing,
// and the call lists the event at that generation (listLua) and runs again, passing the
// generation it read and the score it listed; the script then takes every key's TTL off and
// takes the score as the room's generation, unless a Reconcile found the room empty meanwhile
// (the generation moved on: the call lists it again, maxListings times at most). An entry listed
// at the generation it read
// is never taken out by a Reconcile that read the room before, so no concurrent pass unlists a
// room in use either. A room without a TTL costs these scripts one PTTL and nothing else; an
// emptied room's first use costs two round trips more. The other scripts either only change
// keys that exist (and keep their TTL) or act on users, of whom an expiring room has none.
//
// Enter, Position and Predict calls on one event are combined: the calls that arrive while
// combinedInFlight script calls of the event are in flight go out together in the next
// (combine.go).
type WaitingRoom struct {
	client      goredis.UniversalClient
	prefix      string
	entries     *combiner[string, string, ports.QueuePlace] // event → entering users
	positions   *combiner[positionKey, string, polledPlace] // event, token TTL and sign step → polling users
	predictions *combiner[string, map[string]int, struct{}] // event → first wait estimates
	// listings holds, by event, the listing an Enter made of a room a pass had emptied, for the
	// event's next entry script (enterAll) to pass; the script that uses it spends it.
	listings sync.Map
}

// listing is a room's listing generation a call read and the score it listed the event at
// (unlistedLua's ARGV[1] and ARGV[2]).
type listing struct{ read, listed int }

// notYetListed is the listing of a call that has not listed its room.
var notYetListed = listing{read: notListed, listed: notListed}

// positionKey groups Position calls that one script call can serve.
type positionKey struct {
	eventID        string
	ttl, signEvery time.Duration
}

// NewWaitingRoom returns a store whose keys start with prefix (e.g. WaitingRoomKeyPrefix).
func NewWaitingRoom(c goredis.UniversalClient, prefix string) *WaitingRoom {
	w := &WaitingRoom{client: c, prefix: prefix}
	// A call waiting behind slow script calls answers within one call timeout of its arrival.
	timeout := callTimeoutOf(c)
	w.entries = newCombiner(combinedInFlight, timeout, w.enterAll)
	w.positions = newCombiner(combinedInFlight, timeout, w.positionsOf)
	w.predictions = newCombiner(combinedInFlight, timeout, w.predictAll)
	return w
}

// keys are an event's keys in the order every script takes them.
func (w *WaitingRoom) keys(eventID string) []string {
	base := w.prefix + "{" + eventID + "}:"
	return []string{base + "meta", base + "queue", base + "seen", base + "admitted", base + "tokens",
		base + "owners", base + "entry", base + "pre", base + "predicted", base + "waits", base + "waitsnew"}
}

func (w *WaitingRoom) indexKey() string { return w.prefix + "listed" }

// scriptPrelude is shared by every per-event script: it names the keys, reads the Redis clock,
// answers NO_ROOM for a room that does not exist, and moves the expired tokens out (at most
// pruneLimit per call, so a script stays short; the rest follow on the next call, and until
// then remaining slots are under-, never over-counted). remaining() is 0 while the seat counter
// is at 0 or below, so the step that would admit is the one that refuses (ports.WaitingRoom).
var scriptPrelude = unlistedLua + `
local meta, queue, seen, admitted, tokens = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
if redis.call('EXISTS', meta) == 0 then return {'NO_ROOM'} end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
-- A number passed to redis.call is formatted for each argument (snprintf); a crowd's signs of
-- life share this one text.
local nowText = tostring(now)
local expired = redis.call('ZRANGEBYSCORE', admitted, '-inf', now, 'LIMIT', 0, 1000)
if #expired > 0 then
  redis.call('ZREM', admitted, unpack(expired))
  redis.call('HDEL', tokens, unpack(expired))
  redis.call('HINCRBY', meta, 'expired', #expired)
end
local function remaining()
  local m = redis.call('HMGET', meta, 'slots', 'seats')
  if tonumber(m[2]) <= 0 then return 0 end
  local r = tonumber(m[1]) - redis.call('ZCARD', admitted)
  if r < 0 then return 0 end
  return r
end
local pre = KEYS[8]
local function closed()
  local gate = redis.call('HMGET', meta, 'opensAt', 'opened')
  return gate[1] and not gate[2], tonumber(gate[1])
end
local function soldOut() return redis.call('HEXISTS', meta, 'soldout') == 1 end
local predicted, waits, waitsNew = KEYS[9], KEYS[10], KEYS[11]
local function waited(user)
  local p = redis.call('HGET', predicted, user)
  if not p then return end
  redis.call('HDEL', predicted, user)
  local at, seconds = string.match(p, '^(%d+):(%d+)$')
  local err = now - tonumber(at) - tonumber(seconds) * 1000
  redis.call('LPUSH', waits, err)
  redis.call('LTRIM', waits, 0, ` + strconv.Itoa(ports.MaxWaitErrors-1) + `)
  redis.call('RPUSH', waitsNew, err)
  redis.call('LTRIM', waitsNew, -` + strconv.Itoa(ports.MaxWaitErrors) + `, -1)
end
`

func newWaitingScript(body string) *goredis.Script { return newScript(scriptPrelude + body) }

// unlistedLua defines unlisted(), the check every script that puts a room back in use runs
// before it writes: nil when the room may be used (it has no TTL, so it is listed; or it is the
// generation ARGV[1] the caller read, and the caller listed it as ARGV[2]: then every key's TTL
// goes, all of them got the same one, and the room takes ARGV[2] as its generation), else the
// reply {'UNLISTED', generation} that sends the caller to list it (see WaitingRoom).
const unlistedLua = `
local function unlisted()
  if redis.call('PTTL', KEYS[1]) < 0 then return nil end
  local generation = tonumber(redis.call('HGET', KEYS[1], 'listing') or 0)
  if generation ~= tonumber(ARGV[1]) then return {'UNLISTED', generation} end
  for _, key in ipairs(KEYS) do redis.call('PERSIST', key) end
  redis.call('HSET', KEYS[1], 'listing', ARGV[2])
  return nil
end
`

// openScript creates the room unless it exists, sold out when it has no seat, or answers
// {'UNLISTED', generation} until the caller listed it. KEYS the room's; ARGV the listing
// generation read and listed (unlistedLua), slots, seats, and the pre-queue's opensAt in ms of
// the Redis clock for a gated room. A new room is listed before it is created, at generation 0:
// it takes the index's score as its generation.
var openScript = newScript(unlistedLua + `
if redis.call('EXISTS', KEYS[1]) == 0 then
  if tonumber(ARGV[1]) == ` + strconv.Itoa(notListed) + ` then return {'UNLISTED', 0} end
  redis.call('HSET', KEYS[1], 'slots', ARGV[3], 'seats', ARGV[4], 'listing', ARGV[2])
  if tonumber(ARGV[4]) <= 0 then redis.call('HSET', KEYS[1], 'soldout', 1) end
  if ARGV[5] then redis.call('HSET', KEYS[1], 'opensAt', ARGV[5]) end
  return {'OK'}
end
-- The event is listed again, so an emptied room is in use again.
return unlisted() or {'OK'}
`)

// notListed is the listing generation a call passes before a script answered UNLISTED: no
// room has it.
const notListed = -1

// listScript lists the event ARGV[1] in the index (KEYS[1]) at generation ARGV[2] unless it is
// listed at a higher one, and answers the score it has.
var listScript = newScript(`
redis.call('ZADD', KEYS[1], 'GT', ARGV[2], ARGV[1])
return tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]))
`)

// unlistScript takes the event ARGV[1] out of the index (KEYS[1]) if it is listed below the
// generation ARGV[2] its emptied room took.
var unlistScript = newScript(`
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if score and tonumber(score) < tonumber(ARGV[2]) then redis.call('ZREM', KEYS[1], ARGV[1]) end
return 0
`)

// enterLua defines enterAll(users), which enters users in order and answers what that many
// single entries in a row would: a state, 'OK' or 'PREQUEUE' while the room is closed
// (prequeueAll), and one integer a user, which keeps the reply and the server's reading of it
// small: -expiresAt for an admitted user, else rank×2 + created (created in the pre-queue).
// The script that calls it has run unlisted() first. Its writes cost a handful of commands per
// call, not per user: the users are looked up with ZMSCORE, and the new entries and signs of
// life are written with one ZADD each; only a user already waiting costs a ZRANK of its own.
// Entering never admits anyone, so the remaining slots (left) hold for the whole call; a new
// entry's sequence number is the highest, so its rank is the line's length before it.
const enterLua = prequeueLua + `
local left = remaining()
local function enterAll(users)
  local gated, opensAt = closed()
  if gated then return 'PREQUEUE', prequeueAll(users, now < opensAt) end
  local expiries = redis.call('ZMSCORE', admitted, unpack(users))
  local queued = redis.call('ZMSCORE', queue, unpack(users))
  local waiting = redis.call('ZCARD', queue)
  local seq = tonumber(redis.call('HGET', meta, 'seq') or 0)
  local answers, added, alive, placed = {}, {}, {}, {}
  for i, user in ipairs(users) do
    if expiries[i] then
      answers[i] = -tonumber(expiries[i])
    else
      alive[#alive + 1] = nowText
      alive[#alive + 1] = user
      if placed[user] then
        answers[i] = placed[user] * 2
      elseif queued[i] then
        answers[i] = redis.call('ZRANK', queue, user) * 2
      else
        seq = seq + 1
        added[#added + 1] = seq
        added[#added + 1] = user
        placed[user] = waiting
        answers[i] = waiting * 2 + 1
        waiting = waiting + 1
      end
    end
  end
  if #added > 0 then
    redis.call('ZADD', queue, unpack(added))
    redis.call('HSET', meta, 'seq', seq)
  end
  if #alive > 0 then redis.call('ZADD', seen, unpack(alive)) end
  return 'OK', answers
end
local function enterReply(users)
  local state, answers = enterAll(users)
  return {state, left, answers}
end
`

// enterScript enters the users in order; answers enterAll's {state, remaining, {integer per
// user}}, {'UNLISTED', generation} or {'SOLD_OUT'}. ARGV the listing generation read and listed
// (unlistedLua), then the users.
var enterScript = newWaitingScript(`if soldOut() then return {'SOLD_OUT'} end
` + enterLua + `local relist = unlisted()
if relist then return relist end
return enterReply({unpack(ARGV, 3)})`)

// positionScript answers {'OK', remaining, expiresAt, {place per user}}: a user's place is
// their rank while waiting, placeEntered once admitted (their token refreshed to expire at
// expiresAt) and placeNotQueued otherwise. It records the sign of life of the waiting users
// whose last one is at least ARGV[2] ms old, and refreshes the admitted users' tokens, one ZADD
// each; a sold-out room answers {'SOLD_OUT'}. ARGV ttl ms, sign step ms, then the users. One
// integer a user keeps the reply, which the server reads per batch, small. Moving a member of
// seen to a new score costs Redis about as much as the rest of a poll, hence the step.
var positionScript = newWaitingScript(`
if soldOut() then return {'SOLD_OUT'} end
local expiresAt = now + tonumber(ARGV[1])
local signedBefore = now - tonumber(ARGV[2])
local users = {unpack(ARGV, 3)}
local left = remaining()
local gated = closed()
local expiries = redis.call('ZMSCORE', admitted, unpack(users))
local signed = redis.call('ZMSCORE', seen, unpack(users))
local places, refreshed, alive = {}, {}, {}
for i, user in ipairs(users) do
  if expiries[i] then
    refreshed[#refreshed + 1] = expiresAt
    refreshed[#refreshed + 1] = user
    places[i] = ` + strconv.Itoa(placeEntered) + `
  else
    local rank = redis.call('ZRANK', queue, user)
    if gated and (rank or redis.call('ZSCORE', pre, user)) then rank = ` + strconv.Itoa(placePrequeue) + ` end
    if rank then
      if not signed[i] or tonumber(signed[i]) <= signedBefore then
        alive[#alive + 1] = nowText
        alive[#alive + 1] = user
      end
      places[i] = rank
    else
      places[i] = ` + strconv.Itoa(placeNotQueued) + `
    end
  end
end
if #refreshed > 0 then redis.call('ZADD', admitted, 'XX', unpack(refreshed)) end
if #alive > 0 then redis.call('ZADD', seen, unpack(alive)) end
return {'OK', left, expiresAt, places}
`)

// The places positionScript answers for a user who is not waiting, or has no rank yet.
const (
	placeEntered   = -1
	placeNotQueued = -2
	placePrequeue  = -3
)

// claimScript answers {'HELD', token, expiresAt}, {'CLAIMED', token, expiresAt},
// {'NOT_READY', rank, remaining}, {'NOT_QUEUED'} or {'SOLD_OUT'}. ARGV user, new token, ttl ms.
var claimScript = newWaitingScript(`
if soldOut() then return {'SOLD_OUT'} end
local user = ARGV[1]
local expiresAt = now + tonumber(ARGV[3])
local held = redis.call('HGET', tokens, user)
if held then
  redis.call('ZADD', admitted, expiresAt, user)
  return {'HELD', held, expiresAt}
end
local rank = redis.call('ZRANK', queue, user)
if closed() and (rank or redis.call('ZSCORE', pre, user)) then return {'PREQUEUE'} end
if not rank then return {'NOT_QUEUED'} end
local left = remaining()
if rank >= left then return {'NOT_READY', rank, left} end
redis.call('HSET', tokens, user, ARGV[2])
redis.call('ZADD', admitted, expiresAt, user)
redis.call('ZREM', queue, user)
redis.call('ZREM', seen, user)
redis.call('HINCRBY', meta, 'claims', 1)
waited(user)
return {'CLAIMED', ARGV[2], expiresAt}
`)

// returnScript answers {'OK', freed}. ARGV user.
var returnScript = newWaitingScript(`
if redis.call('ZREM', admitted, ARGV[1]) == 0 then return {'OK', 0} end
redis.call('HDEL', tokens, ARGV[1])
redis.call('HINCRBY', meta, 'released', 1)
return {'OK', 1}
`)

// leaveScript takes a waiting or pre-queued user out of the line, with the wait estimate.
// ARGV user.
var leaveScript = newWaitingScript(`
redis.call('ZREM', queue, ARGV[1])
redis.call('ZREM', pre, ARGV[1])
redis.call('ZREM', seen, ARGV[1])
redis.call('HDEL', predicted, ARGV[1])
return {'OK'}
`)

// verifyScript answers {'OK', valid, seats}: valid is 1 when the user's token equals ARGV[2]
// and has not expired (the prelude removed it otherwise). ARGV user, token.
var verifyScript = newWaitingScript(`
local seats = tonumber(redis.call('HGET', meta, 'seats'))
if redis.call('HGET', tokens, ARGV[1]) == ARGV[2] then return {'OK', 1, seats} end
return {'OK', 0, seats}
`)

// reconcileScript answers {'OK', expired, dropped, empty, wait errors not answered before,
// listing generation}. An empty room's keys expire at once retention ahead, unless an earlier
// pass set their expiry, and its generation moves on, so the index entries listed before are
// the ones Reconcile takes out (see WaitingRoom). ARGV idle ms (0: drop nobody), retention ms.
var reconcileScript = newWaitingScript(`
local dropped = 0
local idle = tonumber(ARGV[1])
if idle > 0 then
  local gone = redis.call('ZRANGEBYSCORE', seen, '-inf', now - idle, 'LIMIT', 0, 1000)
  if #gone > 0 then
    redis.call('ZREM', queue, unpack(gone))
    redis.call('ZREM', pre, unpack(gone))
    redis.call('ZREM', seen, unpack(gone))
    redis.call('HDEL', predicted, unpack(gone))
    redis.call('HINCRBY', meta, 'dropped', #gone)
    dropped = #gone
  end
end
local empty = 0
if redis.call('ZCARD', queue) == 0 and redis.call('ZCARD', pre) == 0 and redis.call('ZCARD', admitted) == 0 then empty = 1 end
local fresh = redis.call('LRANGE', waitsNew, 0, -1)
redis.call('DEL', waitsNew)
if empty == 1 and redis.call('PTTL', meta) < 0 then
  local expiresAt = now + tonumber(ARGV[2])
  for _, key in ipairs(KEYS) do redis.call('PEXPIREAT', key, expiresAt) end
end
local listing = 0
if empty == 1 then listing = redis.call('HINCRBY', meta, 'listing', 1) end
return {'OK', #expired, dropped, empty, fresh, listing}
`)

// slotsScript answers {'OK', remaining} or {'UNLISTED', generation}. ARGV the listing
// generation read and listed (unlistedLua), slots.
var slotsScript = newWaitingScript(`
local relist = unlisted()
if relist then return relist end
redis.call('HSET', meta, 'slots', ARGV[3])
return {'OK', remaining()}
`)

// resetSlotsScript answers {'OK', 1} after setting the slots to ARGV[2] if they were ARGV[1],
// else {'OK', 0}.
var resetSlotsScript = newWaitingScript(`
if tonumber(redis.call('HGET', meta, 'slots')) ~= tonumber(ARGV[1]) then return {'OK', 0} end
redis.call('HSET', meta, 'slots', ARGV[2])
return {'OK', 1}
`)

// statsScript answers {'OK', waiting, admitted, slots, remaining, seats, claims, expired,
// dropped, released, connected, prequeued, soldout, gated}. Users placed while the room is still
// closed (scores ≤ 0) count as pre-queued.
var statsScript = newWaitingScript(`
local m = redis.call('HMGET', meta, 'slots', 'seats', 'claims', 'expired', 'dropped', 'released', 'soldout')
local placed, gated = 0, 0
if closed() then placed, gated = redis.call('ZCOUNT', queue, '-inf', 0), 1 end
return {'OK', redis.call('ZCARD', queue) - placed, redis.call('ZCARD', admitted), tonumber(m[1]), remaining(),
  tonumber(m[2]), tonumber(m[3] or 0), tonumber(m[4] or 0), tonumber(m[5] or 0), tonumber(m[6] or 0),
  redis.call('HLEN', KEYS[6]), redis.call('ZCARD', pre) + placed, tonumber(m[7] or 0), gated}
`)

// seatsScript answers {'OK', seats} after adding ARGV[1] to the counter.
var seatsScript = newWaitingScript(`
return {'OK', redis.call('HINCRBY', meta, 'seats', ARGV[1])}
`)

// soldOutScript marks the room sold out: the seat counter at 0, the waiting line emptied.
var soldOutScript = newWaitingScript(`
redis.call('HSET', meta, 'soldout', 1, 'seats', 0)
redis.call('DEL', queue, seen, predicted)
return {'OK'}
`)

// predictScript records each waiting user's first estimate: ARGV user, seconds pairs.
var predictScript = newWaitingScript(`
for i = 1, #ARGV, 2 do
  if redis.call('ZSCORE', queue, ARGV[i]) then redis.call('HSETNX', predicted, ARGV[i], now .. ':' .. ARGV[i + 1]) end
end
return {'OK'}
`)

// waitsScript answers {'OK', the wait errors kept}.
var waitsScript = newWaitingScript(`return {'OK', redis.call('LRANGE', waits, 0, -1)}`)

// resetSeatsScript answers {'OK', 1} after setting the counter to ARGV[2] if it held ARGV[1],
// else {'OK', 0}.
var resetSeatsScript = newWaitingScript(`
if tonumber(redis.call('HGET', meta, 'seats')) ~= tonumber(ARGV[1]) then return {'OK', 0} end
redis.call('HSET', meta, 'seats', ARGV[2])
return {'OK', 1}
`)

// run runs script for eventID and returns its reply after the state word, or
// ports.ErrRoomNotOpen / ports.ErrNotQueued.
func (w *WaitingRoom) run(ctx context.Context, op string, script *goredis.Script, eventID string, args ...any) (string, []any, error) {
	reply, err := script.Run(ctx, w.client, w.keys(eventID), args...).Slice()
	if err != nil {
		return "", nil, unavailable(op, err)
	}
	return stateOf(op, reply)
}

// stateOf splits one answer into its state word and the rest, or ports.ErrRoomNotOpen /
// ports.ErrNotQueued.
func stateOf(op string, reply []any) (string, []any, error) {
	if len(reply) == 0 {
		return "", nil, fmt.Errorf("redis: %s: empty reply", op)
	}
	state, _ := reply[0].(string)
	switch state {
	case "NO_ROOM":
		return "", nil, ports.ErrRoomNotOpen
	case "NOT_QUEUED":
		return "", nil, ports.ErrNotQueued
	case "SOLD_OUT":
		return "", nil, ports.ErrSoldOut
	}
	return state, reply[1:], nil
}

// Open lists the event, then creates the room unless it exists. See ports.WaitingRoom.
func (w *WaitingRoom) Open(ctx context.Context, eventID string, slots, seats int) error {
	return w.open(ctx, eventID, slots, seats)
}

// OpenGated lists the event, then creates the room with a pre-queue opening at opensAt unless
// it exists.
func (w *WaitingRoom) OpenGated(ctx context.Context, eventID string, slots, seats int, opensAt time.Time) error {
	return w.open(ctx, eventID, slots, seats, opensAt.UnixMilli())
}

func (w *WaitingRoom) open(ctx context.Context, eventID string, args ...any) error {
	_, _, err := w.runListed(ctx, "open waiting room", openScript, eventID, append([]any{notListed, notListed}, args...))
	return err
}

// maxListings bounds how many times one call lists its room: each time again means a
// reconciliation pass found the room empty between the call's listing and its next script run.
// Two take one such pass in stride and bound the call to five Redis calls (script, listing,
// script, listing, script), each within its call timeout; a room emptied again after that
// answers ErrUnavailable, and the client tries again.
const maxListings = 2

// runListed runs a script that puts the room back in use (unlistedLua): args start with two
// places for the listing generation read and listed. While the script answers UNLISTED it lists
// the event at the generation answered, then runs it again.
func (w *WaitingRoom) runListed(ctx context.Context, op string, script *goredis.Script, eventID string, args []any) (string, []any, error) {
	for listings := 0; ; listings++ {
		state, r, err := w.run(ctx, op, script, eventID, args...)
		if err != nil || state != "UNLISTED" {
			return state, r, err
		}
		if listings == maxListings {
			return "", nil, errEmptiedOver(op)
		}
		l, err := w.list(ctx, eventID, toInt(r[0]))
		if err != nil {
			return "", nil, err
		}
		args[0], args[1] = l.read, l.listed
	}
}

// list lists eventID in the index at the listing generation read (listScript).
func (w *WaitingRoom) list(ctx context.Context, eventID string, read int) (listing, error) {
	listed, err := listScript.Run(ctx, w.client, []string{w.indexKey()}, eventID, read).Int()
	if err != nil {
		return listing{}, unavailable("list waiting room", err)
	}
	return listing{read: read, listed: listed}, nil
}

func errEmptiedOver(op string) error {
	return unavailable(op, fmt.Errorf("room emptied by %d reconciliation passes in a row", maxListings))
}

// errUnlisted answers the entries of a batch whose room a pass had emptied and unlisted: each
// lists the event and enters again (Enter), outside the batch, whose calls are bounded by one
// call timeout from their arrival: on a Redis slower than a third of it the batch could not
// also list the event and run its script again.
type errUnlisted struct{ generation int }

func (e errUnlisted) Error() string {
	return fmt.Sprintf("redis: waiting room unlisted, at listing generation %d", e.generation)
}

// Enter queues the user at the back unless already waiting or admitted. An entry into a room a
// pass had emptied lists the event first, then enters again.
func (w *WaitingRoom) Enter(ctx context.Context, eventID, userID string) (ports.QueuePlace, error) {
	for listings := 0; ; listings++ {
		place, err := w.entries.do(ctx, eventID, userID)
		var unlisted errUnlisted
		if !errors.As(err, &unlisted) {
			return place, err
		}
		if listings == maxListings {
			return ports.QueuePlace{}, errEmptiedOver("enter waiting room")
		}
		l, err := w.list(ctx, eventID, unlisted.generation)
		if err != nil {
			return ports.QueuePlace{}, err
		}
		w.listings.Store(eventID, l)
	}
}

// enterAll runs enterScript for users and returns their places in order, or errUnlisted.
func (w *WaitingRoom) enterAll(ctx context.Context, eventID string, users []string) ([]ports.QueuePlace, error) {
	const op = "enter waiting room"
	l := notYetListed
	if stored, ok := w.listings.Load(eventID); ok {
		l = stored.(listing)
	}
	argv := make([]any, 2+len(users))
	argv[0], argv[1] = l.read, l.listed
	for i, user := range users {
		argv[2+i] = user
	}
	state, r, err := w.run(ctx, op, enterScript, eventID, argv...)
	if err != nil {
		return nil, err
	}
	if state == "UNLISTED" {
		return nil, errUnlisted{generation: toInt(r[0])}
	}
	if l != notYetListed {
		w.listings.CompareAndDelete(eventID, l) // the room is in use again
	}
	return enterAnswers(op, state, r, len(users))
}

// enterAnswers reads enterLua's reply after its state word: the remaining slots, then one
// integer a user.
func enterAnswers(op, state string, r []any, users int) ([]ports.QueuePlace, error) {
	var codes []any
	if len(r) == 2 {
		codes, _ = r[1].([]any)
	}
	if len(codes) != users {
		return nil, fmt.Errorf("redis: %s: %d answers for %d users", op, len(codes), users)
	}
	remaining := toInt(r[0])
	places := make([]ports.QueuePlace, len(codes))
	for i, c := range codes {
		code := toInt(c)
		switch {
		case state == "PREQUEUE":
			places[i] = ports.QueuePlace{Prequeue: true, Created: code == 1}
		case code < 0:
			places[i] = ports.QueuePlace{Admitted: true, RemainingSlots: remaining, ExpiresAt: fromMillis(int64(-code))}
		default:
			places[i] = ports.QueuePlace{Rank: code >> 1, RemainingSlots: remaining, Created: code&1 != 0}
		}
	}
	return places, nil
}

// Position answers the user's place, refreshing an admitted user's token.
func (w *WaitingRoom) Position(ctx context.Context, eventID, userID string, ttl, signEvery time.Duration) (ports.QueuePlace, error) {
	answer, err := w.positions.do(ctx, positionKey{eventID: eventID, ttl: ttl, signEvery: signEvery}, userID)
	if err != nil {
		return ports.QueuePlace{}, err
	}
	if !answer.queued {
		return ports.QueuePlace{}, ports.ErrNotQueued
	}
	return answer.place, nil
}

// polledPlace is one user's answer of a combined position call: their place, unless they are
// neither waiting nor admitted.
type polledPlace struct {
	place  ports.QueuePlace
	queued bool
}

// positionsOf runs positionScript for users, polling the event with the token TTL and sign
// step of k, and returns their answers in order.
func (w *WaitingRoom) positionsOf(ctx context.Context, k positionKey, users []string) ([]polledPlace, error) {
	const op = "read queue position"
	argv := make([]any, 0, 2+len(users))
	argv = append(argv, k.ttl.Milliseconds(), k.signEvery.Milliseconds())
	for _, user := range users {
		argv = append(argv, user)
	}
	_, r, err := w.run(ctx, op, positionScript, k.eventID, argv...)
	if err != nil {
		return nil, err
	}
	places, _ := r[2].([]any)
	if len(places) != len(users) {
		return nil, fmt.Errorf("redis: %s: %d answers for %d users", op, len(places), len(users))
	}
	remaining, expiresAt := toInt(r[0]), fromMillis(r[1])
	answers := make([]polledPlace, len(places))
	for i, place := range places {
		switch rank := toInt(place); rank {
		case placeNotQueued:
		case placeEntered:
			answers[i] = polledPlace{place: ports.QueuePlace{Admitted: true, RemainingSlots: remaining, ExpiresAt: expiresAt}, queued: true}
		case placePrequeue:
			answers[i] = polledPlace{place: ports.QueuePlace{Prequeue: true}, queued: true}
		default:
			answers[i] = polledPlace{place: ports.QueuePlace{Rank: rank, RemainingSlots: remaining}, queued: true}
		}
	}
	return answers, nil
}

// Claim admits the user when rank < remaining slots.
func (w *WaitingRoom) Claim(ctx context.Context, eventID, userID, token string, ttl time.Duration) (ports.ClaimResult, error) {
	state, r, err := w.run(ctx, "claim entry token", claimScript, eventID, userID, token, ttl.Milliseconds())
	if err != nil {
		return ports.ClaimResult{}, err
	}
	switch state {
	case "PREQUEUE":
		return ports.ClaimResult{Place: ports.QueuePlace{Prequeue: true}}, nil
	case "NOT_READY":
		return ports.ClaimResult{Place: ports.QueuePlace{Rank: toInt(r[0]), RemainingSlots: toInt(r[1])}}, nil
	case "HELD", "CLAIMED":
		held, _ := r[0].(string)
		return ports.ClaimResult{Claimed: true, Created: state == "CLAIMED", Token: held, ExpiresAt: fromMillis(r[1])}, nil
	}
	return ports.ClaimResult{}, fmt.Errorf("redis: claim entry token: unexpected state %q", state)
}

// Release frees the user's slot once.
func (w *WaitingRoom) Release(ctx context.Context, eventID, userID string) (bool, error) {
	_, r, err := w.run(ctx, "release entry token", returnScript, eventID, userID)
	if err != nil {
		return false, err
	}
	return toInt(r[0]) == 1, nil
}

// Leave takes a waiting or pre-queued user out of the line. See ports.PullQueue.
func (w *WaitingRoom) Leave(ctx context.Context, eventID, userID string) error {
	_, _, err := w.run(ctx, "leave waiting room", leaveScript, eventID, userID)
	return err
}

// Verify reports whether token is the user's live token, and the seat counter.
func (w *WaitingRoom) Verify(ctx context.Context, eventID, userID, token string) (valid bool, seatsLeft int, err error) {
	_, r, err := w.run(ctx, "verify entry token", verifyScript, eventID, userID, token)
	if err != nil {
		return false, 0, err
	}
	return toInt(r[0]) == 1, toInt(r[1]), nil
}

// Reconcile frees expired tokens' slots and drops idle waiting users; an empty room's event
// leaves the index, unless listed again since, and its keys expire after retention (see
// WaitingRoom).
func (w *WaitingRoom) Reconcile(ctx context.Context, eventID string, idle, retention time.Duration) (ports.Reconciled, error) {
	_, r, err := w.run(ctx, "reconcile waiting room", reconcileScript, eventID, idle.Milliseconds(), retention.Milliseconds())
	if err != nil {
		return ports.Reconciled{}, err
	}
	done := ports.Reconciled{Expired: toInt(r[0]), Dropped: toInt(r[1]), WaitErrors: millisOf(r[3])}
	if toInt(r[2]) == 0 {
		return done, nil
	}
	if err := unlistScript.Run(ctx, w.client, []string{w.indexKey()}, eventID, r[4]).Err(); err != nil {
		return done, unavailable("unlist waiting room", err)
	}
	return done, nil
}

// SetSlots changes the slots and answers the remaining ones.
func (w *WaitingRoom) SetSlots(ctx context.Context, eventID string, slots int) (int, error) {
	_, r, err := w.runListed(ctx, "set slots", slotsScript, eventID, []any{notListed, notListed, slots})
	if err != nil {
		return 0, err
	}
	return toInt(r[0]), nil
}

// ResetSlots sets the slots to slots if they still are from.
func (w *WaitingRoom) ResetSlots(ctx context.Context, eventID string, from, slots int) (bool, error) {
	_, r, err := w.run(ctx, "reset slots", resetSlotsScript, eventID, from, slots)
	if err != nil {
		return false, err
	}
	return toInt(r[0]) == 1, nil
}

// Stats answers the room's numbers.
func (w *WaitingRoom) Stats(ctx context.Context, eventID string) (ports.RoomStats, error) {
	_, r, err := w.run(ctx, "read waiting room stats", statsScript, eventID)
	if err != nil {
		return ports.RoomStats{}, err
	}
	return ports.RoomStats{
		Waiting: toInt(r[0]), Admitted: toInt(r[1]), Slots: toInt(r[2]), RemainingSlots: toInt(r[3]),
		RemainingSeats: toInt(r[4]), Claims: int64(toInt(r[5])), Expired: int64(toInt(r[6])),
		Dropped: int64(toInt(r[7])), Released: int64(toInt(r[8])), Connected: toInt(r[9]), Prequeued: toInt(r[10]),
		SoldOut: toInt(r[11]) == 1, Gated: toInt(r[12]) == 1,
	}, nil
}

// Events lists the events in use.
func (w *WaitingRoom) Events(ctx context.Context) ([]string, error) {
	events, err := w.client.ZRange(ctx, w.indexKey(), 0, -1).Result()
	if err != nil {
		return nil, unavailable("list waiting rooms", err)
	}
	return events, nil
}

// SeatsLeft answers the seat counter.
func (w *WaitingRoom) SeatsLeft(ctx context.Context, eventID string) (int, error) {
	_, r, err := w.run(ctx, "read seat counter", seatsScript, eventID, 0)
	if err != nil {
		return 0, err
	}
	return toInt(r[0]), nil
}

// TakeSeat decrements the seat counter and answers it.
func (w *WaitingRoom) TakeSeat(ctx context.Context, eventID string) (int, error) {
	_, r, err := w.run(ctx, "take seat", seatsScript, eventID, -1)
	if err != nil {
		return 0, err
	}
	return toInt(r[0]), nil
}

// MarkSoldOut marks the room sold out for good. See ports.SeatCounter.
func (w *WaitingRoom) MarkSoldOut(ctx context.Context, eventID string) error {
	_, _, err := w.run(ctx, "mark sold out", soldOutScript, eventID)
	return err
}

// ResetSeatsLeft sets the seat counter to seats if it still holds from.
func (w *WaitingRoom) ResetSeatsLeft(ctx context.Context, eventID string, from, seats int) (bool, error) {
	_, r, err := w.run(ctx, "reset seat counter", resetSeatsScript, eventID, from, seats)
	if err != nil {
		return false, err
	}
	return toInt(r[0]) == 1, nil
}

// Predict records each waiting user's first wait estimate. See ports.WaitPredictor.
func (w *WaitingRoom) Predict(ctx context.Context, eventID string, seconds map[string]int) error {
	if len(seconds) == 0 {
		return nil
	}
	_, err := w.predictions.do(ctx, eventID, seconds)
	return err
}

// predictAll records the estimates of every Predict call in batch in one script call: a pull
// crowd's first polls each bring one, which alone cost a round trip per poll.
func (w *WaitingRoom) predictAll(ctx context.Context, eventID string, batch []map[string]int) ([]struct{}, error) {
	var argv []any
	for _, seconds := range batch {
		for user, s := range seconds {
			argv = append(argv, user, s)
		}
	}
	if _, _, err := w.run(ctx, "record wait estimates", predictScript, eventID, argv...); err != nil {
		return nil, err
	}
	return make([]struct{}, len(batch)), nil
}

// WaitErrors answers the wait errors kept.
func (w *WaitingRoom) WaitErrors(ctx context.Context, eventID string) ([]time.Duration, error) {
	_, r, err := w.run(ctx, "read wait errors", waitsScript, eventID)
	if err != nil {
		return nil, err
	}
	return millisOf(r[0]), nil
}

// millisOf reads a list of durations in ms.
func millisOf(v any) []time.Duration {
	items, _ := v.([]any)
	out := make([]time.Duration, len(items))
	for i, item := range items {
		out[i] = time.Duration(toInt(item)) * time.Millisecond
	}
	return out
}

// toInt reads an integer of a script's reply (Lua numbers arrive as int64).
func toInt(v any) int {
	switch n := v.(type) {
	case int64:
		return int(n)
	case string:
		i, _ := strconv.Atoi(n)
		return i
	}
	return 0
}

// fromMillis reads a Redis-clock time in ms (a ZSCORE arrives as a string).
func fromMillis(v any) time.Time {
	ms := int64(toInt(v))
	return time.UnixMilli(ms).UTC()
}
