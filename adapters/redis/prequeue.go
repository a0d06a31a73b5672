package redis

import (
	"context"
	"fmt"

	"github.com/rushgate/rushgate/ports"
)

var _ ports.PrequeueRoom = (*WaitingRoom)(nil)

// A gated room's meta holds opensAt (ms of the Redis clock) and, once the pre-queue is placed,
// opened. Until then the users who enter before opensAt wait in …{E}:pre by sequence number,
// and those who enter later in …{E}:queue as usual; placing moves the pre-queue into the queue
// at scores -n..-1, below every sequence number (≥ 1), so later arrivals keep their FIFO order
// behind it and every rank is a ZRANK as before. One script places the whole pre-queue: the
// opening is atomic, on one cluster slot, whichever instance runs it first.

// prequeueLua defines prequeueAll(users, early), enterAll's answers while the room is closed:
// {'PREQUEUE', created, wasEmpty} each; a new user joins the pre-queue when early, else the
// back of the queue.
const prequeueLua = `
local function prequeueAll(users, early)
  local inQueue = redis.call('ZMSCORE', queue, unpack(users))
  local inPre = redis.call('ZMSCORE', pre, unpack(users))
  local seq = tonumber(redis.call('HGET', meta, 'seq') or 0)
  local wasEmpty = 0
  if redis.call('ZCARD', queue) + redis.call('ZCARD', pre) + redis.call('ZCARD', admitted) == 0 then wasEmpty = 1 end
  local answers, added, alive, placed = {}, {}, {}, {}
  for i, user in ipairs(users) do
    alive[#alive + 1] = now
    alive[#alive + 1] = user
    if inQueue[i] or inPre[i] or placed[user] then
      answers[i] = {'PREQUEUE', 0, 0}
    else
      seq = seq + 1
      added[#added + 1] = seq
      added[#added + 1] = user
      placed[user] = true
      answers[i] = {'PREQUEUE', 1, wasEmpty}
      wasEmpty = 0
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

// prequeuedScript answers {'OK', pre-queued users by arrival}, {'OPENED'} or {'NOT_DUE'}.
var prequeuedScript = newWaitingScript(`
local gated, opensAt = closed()
if not gated then return {'OPENED'} end
if now < opensAt then return {'NOT_DUE'} end
return {'OK', redis.call('ZRANGE', pre, 0, -1)}
`)

// placeScript places the pre-queue: ARGV's users still pre-queued, in order, then the rest by
// arrival, in chunks of placeChunk (Lua's unpack is bounded). Answers {'OK', placed, 1},
// {'OK', 0, 0} when placed already, or {'NOT_DUE'}.
var placeScript = newWaitingScript(`
local gated, opensAt = closed()
if not gated then return {'OK', 0, 0} end
if now < opensAt then return {'NOT_DUE'} end
local total = redis.call('ZCARD', pre)
local score, chunk, done = -total, {}, {}
local function flush()
  if #chunk == 0 then return end
  local present = redis.call('ZMSCORE', pre, unpack(chunk))
  local adds = {}
  for i, user in ipairs(chunk) do
    if present[i] and not done[user] then
      done[user] = true
      adds[#adds + 1] = score
      adds[#adds + 1] = user
      score = score + 1
    end
  end
  redis.call('ZREM', pre, unpack(chunk))
  if #adds > 0 then redis.call('ZADD', queue, unpack(adds)) end
  chunk = {}
end
for i = 1, #ARGV do
  chunk[#chunk + 1] = ARGV[i]
  if #chunk == ` + placeChunk + ` then flush() end
end
flush()
while true do
  chunk = redis.call('ZRANGE', pre, 0, ` + placeChunk + ` - 1)
  if #chunk == 0 then break end
  flush()
end
redis.call('HSET', meta, 'opened', 1)
return {'OK', score + total, 1}
`)

const placeChunk = "1000"

// openedScript answers {'OK', 1} once the pre-queue is placed (or for a room without one).
var openedScript = newWaitingScript(`
if closed() then return {'OK', 0} end
return {'OK', 1}
`)

// Prequeued answers the pre-queued users by arrival once opensAt has come.
func (w *WaitingRoom) Prequeued(ctx context.Context, eventID string) ([]string, bool, error) {
	state, r, err := w.run(ctx, "read pre-queue", prequeuedScript, eventID)
	switch {
	case err != nil:
		return nil, false, err
	case state == "OPENED":
		return nil, true, nil
	case state == "NOT_DUE":
		return nil, false, ports.ErrPrequeueNotDue
	}
	members, _ := r[0].([]any)
	users := make([]string, len(members))
	for i, m := range members {
		users[i], _ = m.(string)
	}
	return users, false, nil
}

// PlacePrequeue places the pre-queue in order, once, in one script.
func (w *WaitingRoom) PlacePrequeue(ctx context.Context, eventID string, order []string) (int, bool, error) {
	args := make([]any, len(order))
	for i, u := range order {
		args[i] = u
	}
	state, r, err := w.run(ctx, "place pre-queue", placeScript, eventID, args...)
	switch {
	case err != nil:
		return 0, false, err
	case state == "NOT_DUE":
		return 0, false, ports.ErrPrequeueNotDue
	case len(r) != 2:
		return 0, false, fmt.Errorf("redis: place pre-queue: unexpected answer %v", r)
	}
	return toInt(r[0]), toInt(r[1]) == 1, nil
}

// PrequeueOpened reports whether the pre-queue is placed.
func (w *WaitingRoom) PrequeueOpened(ctx context.Context, eventID string) (bool, error) {
	_, r, err := w.run(ctx, "read pre-queue state", openedScript, eventID)
	if err != nil {
		return false, err
	}
	return toInt(r[0]) == 1, nil
}
