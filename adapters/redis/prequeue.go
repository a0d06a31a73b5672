package redis

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rushgate/rushgate/ports"
)

var _ ports.PrequeueRoom = (*WaitingRoom)(nil)

// A gated room's meta holds opensAt (ms of the Redis clock) and, once the pre-queue is open,
// opened. Until then the users who enter before opensAt wait in …{E}:pre by sequence number,
// and those who enter later in …{E}:queue as usual. Placing moves the pre-queue into the queue
// in steps of at most placeChunk users, each its own short script (pipelined, so many steps
// cost one round trip while other clients' commands run between them): the first step records
// the pre-queue's size as placeTotal, and the k-th user placed gets score -placeTotal+k-1
// (meta's placed counts them), below every sequence number (≥ 1), so later arrivals keep their
// FIFO order behind it and every rank is a ZRANK as before. The pre-queue only shrinks after
// opensAt, so placeTotal bounds the scores at -1. Nobody has a rank until the opening script
// sets opened. Every script keeps to the event's keys, on one cluster slot.

// prequeueLua defines prequeueAll(users, early), enterAll's answers while the room is closed:
// created (1 or 0) for each user (enterLua); a new user joins the pre-queue when early, else
// the back of the queue.
const prequeueLua = `
local function prequeueAll(users, early)
  local inQueue = redis.call('ZMSCORE', queue, unpack(users))
  local inPre = redis.call('ZMSCORE', pre, unpack(users))
  local seq = tonumber(redis.call('HGET', meta, 'seq') or 0)
  local answers, added, alive, placed = {}, {}, {}, {}
  for i, user in ipairs(users) do
    alive[#alive + 1] = nowText
    alive[#alive + 1] = user
    if inQueue[i] or inPre[i] or placed[user] then
      answers[i] = 0
    else
      seq = seq + 1
      added[#added + 1] = seq
      added[#added + 1] = user
      placed[user] = true
      answers[i] = 1
    end
  end
  if #added > 0 then
    local into = queue
    if early then into = pre end
    redis.call('ZADD', into, unpack(added))
    redis.call('HSET', meta, 'seq', seq)
  end
  redis.call('ZADD', seen, unpack(alive))
  return answers
end
`

// prequeuedScript answers {'OK', page}, {'OK'} once open, or {'NOT_DUE'}: the page is up to
// ARGV[2] pre-queued users with their sequence numbers, after sequence number ARGV[1], by
// arrival.
// Paging by sequence number misses nobody while others leave or are placed.
var prequeuedScript = newWaitingScript(`
local gated, opensAt = closed()
if not gated then return {'OK'} end
if now < opensAt then return {'NOT_DUE'} end
return {'OK', redis.call('ZRANGE', pre, '(' .. ARGV[1], '+inf', 'BYSCORE', 'LIMIT', 0, tonumber(ARGV[2]), 'WITHSCORES')}
`)

// placeLua defines place(users): the users still pre-queued, in order, join the queue behind
// those placed already; it answers how many it placed.
const placeLua = `
local function place(users)
  if #users == 0 then return 0 end
  local m = redis.call('HMGET', meta, 'placeTotal', 'placed')
  local total, placed = tonumber(m[1]), tonumber(m[2] or 0)
  if not total then
    total = redis.call('ZCARD', pre)
    redis.call('HSET', meta, 'placeTotal', total)
  end
  local present = redis.call('ZMSCORE', pre, unpack(users))
  local adds, moved, done = {}, {}, {}
  for i, user in ipairs(users) do
    if present[i] and not done[user] then
      done[user] = true
      adds[#adds + 1] = placed - total
      adds[#adds + 1] = user
      moved[#moved + 1] = user
      placed = placed + 1
    end
  end
  if #moved == 0 then return 0 end
  redis.call('ZREM', pre, unpack(moved))
  redis.call('ZADD', queue, unpack(adds))
  redis.call('HSET', meta, 'placed', placed)
  return #moved
end
`

// placeScript places ARGV's users (at most placeChunk): {'OK', placed} or {'NOT_DUE'}.
var placeScript = newWaitingScript(placeLua + `
local gated, opensAt = closed()
if not gated then return {'OK', 0} end
if now < opensAt then return {'NOT_DUE'} end
return {'OK', place(ARGV)}
`)

// openPrequeueScript places up to placeChunk users still pre-queued by arrival and opens the
// room once none is left: {'OPENED', placed}, {'MORE', placed} (call again), {'OPEN'} (open
// already) or {'NOT_DUE'}.
var openPrequeueScript = newWaitingScript(placeLua + `
local gated, opensAt = closed()
if not gated then return {'OPEN'} end
if now < opensAt then return {'NOT_DUE'} end
local placed = place(redis.call('ZRANGE', pre, 0, ` + strconv.Itoa(placeChunk) + ` - 1))
if redis.call('ZCARD', pre) > 0 then return {'MORE', placed} end
redis.call('HSET', meta, 'opened', 1)
redis.call('HDEL', meta, 'placeTotal', 'placed')
return {'OPENED', placed}
`)

// placeChunk bounds the users of one placing script; placePipeline, the scripts of one round
// trip; prequeuePage, the users of one page of the pre-queue read.
const (
	placeChunk    = 1000
	placePipeline = 20
	prequeuePage  = 10000
)

// openedScript answers {'OK', 1} once the pre-queue is open (or for a room without one).
var openedScript = newWaitingScript(`
if closed() then return {'OK', 0} end
return {'OK', 1}
`)

// Prequeued answers the users still pre-queued by arrival once opensAt has come, a page at a
// time.
func (w *WaitingRoom) Prequeued(ctx context.Context, eventID string) ([]string, bool, error) {
	var users []string
	after := "0"
	for {
		state, r, err := w.run(ctx, "read pre-queue", prequeuedScript, eventID, after, prequeuePage)
		switch {
		case err != nil:
			return nil, false, err
		case state == "NOT_DUE":
			return nil, false, ports.ErrPrequeueNotDue
		case len(r) == 0:
			return nil, true, nil
		}
		page, _ := r[0].([]any)
		for i := 0; i+1 < len(page); i += 2 {
			user, _ := page[i].(string)
			users = append(users, user)
			after, _ = page[i+1].(string)
		}
		if len(page) < 2*prequeuePage {
			return users, false, nil
		}
	}
}

// PlacePrequeue places next in steps of placeChunk users, placePipeline steps a round trip.
func (w *WaitingRoom) PlacePrequeue(ctx context.Context, eventID string, next []string) (int, error) {
	placed := 0
	for len(next) > 0 {
		batch := next[:min(len(next), placeChunk*placePipeline)]
		next = next[len(batch):]
		n, err := w.placeBatch(ctx, eventID, batch)
		placed += n
		if err != nil {
			return placed, err
		}
	}
	return placed, nil
}

// placeBatch runs one pipeline of placing scripts. A script missing from the script cache
// sends the pipeline again with the scripts' text: placing a user twice places them once.
func (w *WaitingRoom) placeBatch(ctx context.Context, eventID string, users []string) (int, error) {
	keys := w.keys(eventID)
	send := func(withText bool) ([]*goredis.Cmd, error) {
		pipe := w.client.Pipeline()
		var cmds []*goredis.Cmd
		for chunk := range slices.Chunk(users, placeChunk) {
			args := make([]any, len(chunk))
			for i, u := range chunk {
				args[i] = u
			}
			if withText {
				cmds = append(cmds, placeScript.Eval(ctx, pipe, keys, args...))
			} else {
				cmds = append(cmds, placeScript.EvalSha(ctx, pipe, keys, args...))
			}
		}
		_, err := pipe.Exec(ctx)
		return cmds, err
	}
	cmds, err := send(false)
	if err != nil && goredis.HasErrorPrefix(err, "NOSCRIPT") {
		cmds, err = send(true)
	}
	if err != nil {
		return 0, unavailable("place pre-queue", err)
	}
	placed := 0
	for _, cmd := range cmds {
		reply, err := cmd.Slice()
		if err != nil {
			return placed, unavailable("place pre-queue", err)
		}
		state, r, err := stateOf("place pre-queue", reply)
		switch {
		case err != nil:
			return placed, err
		case state == "NOT_DUE":
			return placed, ports.ErrPrequeueNotDue
		case len(r) != 1:
			return placed, fmt.Errorf("redis: place pre-queue: unexpected answer %v", reply)
		}
		placed += toInt(r[0])
	}
	return placed, nil
}

// OpenPrequeue places whoever is left by arrival, placeChunk users a script, and opens the room.
func (w *WaitingRoom) OpenPrequeue(ctx context.Context, eventID string) (int, bool, error) {
	placed := 0
	for {
		state, r, err := w.run(ctx, "open pre-queue", openPrequeueScript, eventID)
		switch {
		case err != nil:
			return placed, false, err
		case state == "NOT_DUE":
			return placed, false, ports.ErrPrequeueNotDue
		case state == "OPEN":
			return placed, false, nil
		case len(r) != 1:
			return placed, false, fmt.Errorf("redis: open pre-queue: unexpected answer %v", r)
		}
		placed += toInt(r[0])
		if state == "OPENED" {
			return placed, true, nil
		}
	}
}

// PrequeueOpened reports whether the pre-queue is open.
func (w *WaitingRoom) PrequeueOpened(ctx context.Context, eventID string) (bool, error) {
	_, r, err := w.run(ctx, "read pre-queue state", openedScript, eventID)
	if err != nil {
		return false, err
	}
	return toInt(r[0]) == 1, nil
}
