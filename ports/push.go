package ports

import (
	"context"
	"strconv"
	"strings"
	"time"
)

// Promotion is one promoted user: a message of an event's entry stream, or of the dispatch
// stream of the broker holding the user's connection. MessageID is the stream's id of it;
// PromotedAt is when the promotion script ran (the store's clock), to measure delivery lag.
// Reclaimed is true when the message had been read before and left unacknowledged past the
// reader's idle bound (a reader that stalled or died, or a delivery that failed), false on its
// first read. Owner is the user's connection owner when an entry message was read ("" when
// none): where the admission is routed; dispatch messages leave it empty, but for Replaced.
//
// Replaced marks a dispatch message that is no promotion: the user's connection Owner, held by
// the broker reading it, was replaced by a newer connection on another broker
// (BrokerQueue.TellReplaced), and the broker ends it.
type Promotion struct {
	MessageID  string
	EventID    string
	UserID     string
	Owner      string
	PromotedAt time.Time
	Reclaimed  bool
	Replaced   bool
}

// EntryRead is a read of an event's entry stream by a dispatcher (DispatchQueue.ReadEntries):
// Routed are entry messages it read earlier and dispatched, acknowledged first; then up to Count
// entries are read for Consumer, those left unacknowledged for ReclaimIdle first (when
// positive).
type EntryRead struct {
	Consumer    string
	Routed      []string
	Count       int
	ReclaimIdle time.Duration
}

// DispatchAck names dispatch messages of BrokerID's stream to acknowledge and delete: ones it
// delivered.
type DispatchAck struct {
	BrokerID   string
	MessageIDs []string
}

// TokenGrant asks for an admitted user's entry token: Token, unless one is issued already.
type TokenGrant struct {
	UserID string
	Token  string
}

// OwnerBroker is the broker id of a connection owner "<brokerID>|<connectionID>|".
func OwnerBroker(owner string) string {
	brokerID, _, _ := strings.Cut(owner, "|")
	return brokerID
}

// Supersedes reports whether the connection owner takes the user from held: always, but from an
// owner of the same broker with a higher connection number (a broker numbers its connections in
// the order it registers them), whose Connect came first.
func Supersedes(owner, held string) bool {
	broker, conn, okOwner := splitOwner(owner)
	heldBroker, heldConn, okHeld := splitOwner(held)
	return !okOwner || !okHeld || broker != heldBroker || conn >= heldConn
}

// Covers reports whether the departure of owner (a connection, or an owner prefix) applies the
// disconnect rules to a user held by held: held is owner, starts with the prefix, or is a
// connection of owner's broker with a lower number. That one the broker replaced by owner
// before owner's Connect, and left without a Disconnect of its own (it could reach the store
// before owner's Connect and take the user from owner): owner's departure stands for it, when
// owner's Connect never reached the store.
func Covers(owner, held string) bool {
	if strings.HasPrefix(held, owner) {
		return true
	}
	broker, conn, okOwner := splitOwner(owner)
	heldBroker, heldConn, okHeld := splitOwner(held)
	return okOwner && okHeld && broker == heldBroker && heldConn < conn
}

// splitOwner reads "<brokerID>|<connectionID>|".
func splitOwner(owner string) (broker string, conn uint64, ok bool) {
	broker, rest, found := strings.Cut(owner, "|")
	number, end, found2 := strings.Cut(rest, "|")
	if !found || !found2 || end != "" {
		return "", 0, false
	}
	conn, err := strconv.ParseUint(number, 10, 64)
	return broker, conn, err == nil
}

// QueueSnapshot is an event's waiting line at one instant: Waiting in order (a user's index is
// the rank) and the remaining slots; SoldOut when the room was marked sold out.
type QueueSnapshot struct {
	Waiting        []string
	RemainingSlots int
	// Prequeue: the pre-queue is not placed yet (PrequeueRoom); Waiting is empty then.
	Prequeue bool
	SoldOut  bool
}

// Departure is what Disconnect did.
type Departure int

// Departures.
const (
	// Stayed: the user's connection is owned by another (newer) connection, or nothing was held.
	Stayed Departure = iota
	// Released: the user was admitted (promoted, token issued or not); the slot came back and
	// the token was deleted.
	Released
	// Removed: the user was waiting and left the queue.
	Removed
)

// PushQueue is the push admission mode on the very queue of WaitingRoom: the same
// waiting users, slots and entry tokens, plus which broker connection holds each user, the
// per-event entry stream the dispatchers consume as one consumer group, the per-broker dispatch
// streams and the brokers' heartbeats. A broker and a dispatcher each see the part they call:
// BrokerQueue and DispatchQueue. PushQueue is both: what an adapter implements and the contract
// suite checks.
//
// An owner names one SSE connection: "<brokerID>|<connectionID>|". Owner prefixes of the form
// "<brokerID>|" name every connection of a broker.
//
// Infrastructure failures wrap ErrUnavailable; an event's room that does not exist is
// ErrRoomNotOpen.
type PushQueue interface {
	BrokerQueue
	DispatchQueue
}

// BrokerQueue is what a broker, holding its instance's SSE connections, calls.
//
// Connect enters the user as WaitingRoom.Enter does (same place if already waiting, Admitted if
// admitted) and makes owner the user's connection, replacing an older one (a reconnect, or a
// second tab), whose owner it answers as QueuePlace.Replaced; but a connection of the same
// broker with a higher number (Supersedes) keeps the user, so that of two joins of one user
// racing on one broker, the one registered last holds the user whichever Connect ran last.
//
// TellReplaced tells the broker of owner, a connection Connect replaced, by a message on its
// dispatch stream (Promotion.Replaced), so that it ends that connection. A broker whose stream
// does not exist (it never read it, or it was reaped) is not told: the message would outlive
// any reader.
//
// Disconnect applies the disconnect rules to a user whose connection owner still is owner (or, for
// an owner prefix, starts with it), or an older connection of owner's broker (Covers):
// admitted → slot back and token deleted (Released); waiting → out of the queue (Removed). A
// user reconnected meanwhile is left alone (Stayed).
//
// Snapshot answers the waiting line in one store call (O(queue)), for broadcasting positions.
//
// Issue gives each admitted user of the grants an entry token: the one already issued (the
// same admission again) or the grant's, with the expiry extended to now+ttl. It answers one
// result per grant, in order; Claimed is false for a user no longer admitted (released or
// expired). In the same store call (on Redis, one pipeline) it acknowledges and deletes ack's
// dispatch messages, delivered earlier, so that a broker's delivery of a batch costs two store
// calls, this one and the ReadDispatch that brought it. An error may leave the grants issued or
// the messages acknowledged; both are safe to repeat.
//
// Heartbeat records that brokerID is alive for ttl and answers whether its previous heartbeat
// was still alive (renewed): false on the broker's first heartbeat, and false once the broker's
// heartbeat has lapsed, which tells a broker that stalled past ttl that
// DispatchQueue.DeadBrokers may have listed it and DispatchQueue.ReapBroker may have taken its
// users.
//
// ReadDispatch reads brokerID's dispatch stream: when retryAfter is positive, the messages it
// read and did not acknowledge for retryAfter (a delivery that failed), then new ones; only
// when there are none does it wait, up to block, for a new one. With retryAfter 0 it is one
// store call (a blocking read), the common case of a broker whose deliveries succeeded.
// AckDispatch acknowledges and deletes messages on their own (a broker idle or moving on).
type BrokerQueue interface {
	Connect(ctx context.Context, eventID, userID, owner string) (QueuePlace, error)
	TellReplaced(ctx context.Context, eventID, userID, owner string) error
	Disconnect(ctx context.Context, eventID, userID, owner string) (Departure, error)
	Snapshot(ctx context.Context, eventID string) (QueueSnapshot, error)
	Issue(ctx context.Context, eventID string, grants []TokenGrant, ttl time.Duration, ack DispatchAck) ([]ClaimResult, error)
	Heartbeat(ctx context.Context, brokerID string, ttl time.Duration) (renewed bool, err error)
	ReadDispatch(ctx context.Context, brokerID string, count int, block, retryAfter time.Duration) ([]Promotion, error)
	AckDispatch(ctx context.Context, brokerID string, messageIDs []string) error
	// Predict is WaitPredictor.Predict: the first wait estimates the positions gave.
	Predict(ctx context.Context, eventID string, seconds map[string]int) error
}

// DispatchQueue is what a dispatcher, promoting users and routing their admissions to the
// brokers holding them, calls.
//
// Promote atomically moves up to the remaining slots' worth of users from the head into the
// admitted set (token pending, expiry now+ttl, one claim counted each) and appends each to the
// event's entry stream, in order. A user is promoted once: only a waiting user can be. Then, in
// the same store call, it does what ReadEntries does with read, and answers the entries read:
// a dispatcher's tick costs two store calls, this one and Dispatch, whatever its size up to
// read.Count.
//
// ReadEntries first acknowledges and deletes read.Routed (entry messages of an earlier read
// that were dispatched), then reads up to read.Count entry messages (none when 0) for
// read.Consumer, in one store call: first those another consumer read but did not acknowledge
// for read.ReclaimIdle (a dispatcher that died), then new ones, each with its user's connection
// owner at the time of the read.
//
// Dispatch appends each promotion that has an Owner to the dispatch stream of the owner's
// broker (BrokerQueue.ReadDispatch), in one store call; promotions without one are skipped
// (their users already left, and their slots came back then).
//
// DeadBrokers lists the brokers that heartbeat once and stopped. ReapBroker reclaims a dead
// broker's unacknowledged and unread dispatch messages (XAUTOCLAIM on Redis), applies
// Disconnect with the broker's owner prefix to their users and to every user of events it still
// owns, and forgets the broker. It answers the slots it gave back.
type DispatchQueue interface {
	Promote(ctx context.Context, eventID string, ttl time.Duration, read EntryRead) (int, []Promotion, error)
	ReadEntries(ctx context.Context, eventID string, read EntryRead) ([]Promotion, error)
	Dispatch(ctx context.Context, promotions []Promotion) error
	DeadBrokers(ctx context.Context) ([]string, error)
	ReapBroker(ctx context.Context, brokerID string, events []string) (int, error)
}
