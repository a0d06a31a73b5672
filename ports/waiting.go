package ports

import (
	"context"
	"errors"
	"time"

	"github.com/rushgate/rushgate/domain/waiting"
)

// ErrRoomNotOpen means the waiting room of the event was never opened in this store, or the
// store lost it (a Redis flush): the caller opens it again from the event and retries.
var ErrRoomNotOpen = errors.New("waiting room not open")

// ErrNotQueued means the user is neither waiting in nor admitted to the event's room.
var ErrNotQueued = errors.New("user not in the waiting room")

// ErrSoldOut means the event's room was marked sold out (SeatCounter.MarkSoldOut): nobody
// enters, polls a place or claims a token there any more.
var ErrSoldOut = errors.New("waiting room sold out")

// QueuePlace is where a user stands in an event's waiting room.
type QueuePlace struct {
	// Admitted: the user holds a live entry token; Rank is 0 then.
	Admitted bool
	// Rank is the 0-based place among the waiting users, in order of first entry.
	Rank int
	// RemainingSlots is slots minus the tokens alive, never below 0.
	RemainingSlots int
	// ExpiresAt is when an admitted user's token expires.
	ExpiresAt time.Time
	// Created is set by Enter when this call queued the user (a first entry).
	Created bool
	// Prequeue: the room's pre-queue is not placed yet, so the user has no rank.
	Prequeue bool
	// Replaced is set by PushQueue.Connect to the owner of the user's connection that the new
	// one replaced ("" when none, or the same owner).
	Replaced string
}

// Ready reports whether a waiting user may claim a token now: rank < remaining slots.
func (p QueuePlace) Ready() bool { return !p.Admitted && p.Rank < p.RemainingSlots }

// ClaimResult is what Claim did.
type ClaimResult struct {
	// Claimed: the user holds the token below, new (Created) or already held.
	Claimed   bool
	Created   bool
	Token     string
	ExpiresAt time.Time
	// Place is where a user who was not ready stands (Claimed false).
	Place QueuePlace
}

// Reconciled is what one Reconcile pass did.
type Reconciled struct {
	Expired int // tokens past their expiry whose slots it gave back
	Dropped int // waiting users idle past the timeout it removed from the queue
	// WaitErrors are the wait errors (WaitPredictor) of the admissions since the last pass on
	// any instance: each is answered by one pass only, for a metric.
	WaitErrors []time.Duration
}

// RoomStats are an event's waiting-room numbers. Counters (Claims, Expired, Dropped, Released)
// only grow.
type RoomStats struct {
	// Waiting counts the users in the queue: later arrivals while a pre-queue is closed, everyone
	// waiting once it opened.
	Waiting int
	// Prequeued counts the users in a pre-queue that has not opened yet (placed or not), none of
	// them in Waiting: the two together are everyone in line and not admitted.
	Prequeued      int
	Admitted       int
	Slots          int
	RemainingSlots int
	// RemainingSeats is the seat counter, a hint the database overrules.
	RemainingSeats int
	Claims         int64
	Expired        int64
	Dropped        int64
	Released       int64
	// Connected counts push users held by an SSE connection (or in their reconnect grace),
	// across every broker.
	Connected int
	// SoldOut: the room was marked sold out (SeatCounter.MarkSoldOut).
	SoldOut bool
	// Gated: the room has a pre-queue that has not opened yet (PrequeueRoom), so nobody is
	// admitted.
	Gated bool
}

// InLine is everyone in line and not admitted: the queue and the pre-queue.
func (s RoomStats) InLine() int { return s.Waiting + s.Prequeued }

// WaitingRoom is the queue that both admission modes share: per event, the users
// waiting in order of first entry, the admitted users' entry tokens with their expiry, the
// number of slots (users admitted at once), and the remaining-seat counter. It is every view
// below, what an adapter implements and the contract suite checks; callers take the views they
// use.
//
// Admission stops while the seat counter is at 0 or below: remaining slots are 0 then, so no
// claim or promotion admits anyone, checked in the same atomic step that would admit. A room
// marked sold out (SeatCounter.MarkSoldOut) is final: Enter, Position and Claim (and the push
// mode's Connect) answer ErrSoldOut.
//
// Every method acts atomically on one event (each is one Redis script on keys sharing the
// {eventId} hash tag), so concurrent callers on any number of instances never interleave inside
// one. Times are the store's own clock (the Redis server's, or the memory store's Clock).
// Every per-event method but Open returns ErrRoomNotOpen for a room that does not exist.
// Infrastructure failures wrap ErrUnavailable.
type WaitingRoom interface {
	RoomOpener
	PullQueue
	SeatCounter
	RoomAdmin
	RoomReconciler
	PrequeueRoom
	WaitPredictor
}

// WaitPredictor keeps, per waiting user, the first wait estimate the user was given and when
// (the store's clock), and turns it into a wait error when the user is admitted:
// actual wait (admission − then) minus the estimate, signed.
//
// Predict records each user's estimate in seconds unless one is recorded already (the first
// stays). A user not waiting in the line (pre-queued, admitted or gone) is skipped: an estimate
// that arrives after its user's admission or departure predicts no wait. A claim or promotion that admits a user with a recorded estimate takes it and keeps
// the error; a user who leaves the line without admission forgets it. WaitErrors answers the
// errors kept, the latest MaxWaitErrors at most; each also reaches one Reconcile pass.
type WaitPredictor interface {
	Predict(ctx context.Context, eventID string, seconds map[string]int) error
	WaitErrors(ctx context.Context, eventID string) ([]time.Duration, error)
}

// MaxWaitErrors bounds the wait errors a room keeps per event.
const MaxWaitErrors = 10000

// RoomOpener opens rooms: for a new event, and again from the database for a room the store
// lost (every use case that meets ErrRoomNotOpen).
//
// Open makes the event's room exist with slots and the seat counter, unless it already does
// (then nothing changes but an emptied room's expiry, which it takes off: see RoomReconciler),
// and lists the event in RoomIndex.Events. OpenGated does the same for
// a room with a pre-queue that opens at opensAt (PrequeueRoom).
type RoomOpener interface {
	Open(ctx context.Context, eventID string, slots, seats int) error
	OpenGated(ctx context.Context, eventID string, slots, seats int, opensAt time.Time) error
}

// PullQueue is what the pull mode's routes call.
//
// Enter queues the user at the back, after everyone who entered before (FIFO by a per-event
// sequence, never by wall-clock time); a user already waiting keeps the original place, and an
// admitted user is answered Admitted. Either way it records the user's sign of life. A user
// who left (token released or expired, or dropped as idle) enters at the back again.
//
// Position answers the user's place and records a sign of life, unless the last one it recorded
// for the user is younger than signEvery (0: every poll records one; a recorded sign is a write,
// and polls come every few seconds while the idle rule counts in minutes); for an admitted user
// it also extends the token's expiry to now+ttl. A user neither waiting nor admitted is ErrNotQueued,
// unless the room is sold out (ErrSoldOut, whoever asks).
//
// Claim admits the user atomically when rank < remaining slots: it stores token with expiry
// now+ttl, counts a slot taken and removes the user from the queue (Claimed, Created). A user
// already holding a token gets that token back, its expiry extended (Claimed, not Created). A
// user not ready gets Claimed false and the place; a user not queued is ErrNotQueued. Tokens
// alive never exceed slots at any instant.
//
// Release gives an admitted user's slot back and deletes the token, once: it reports whether
// this call freed it. A token whose expiry passes frees its slot exactly once too: expired
// tokens are reconciled before every count of remaining slots, so an expired token never holds
// a slot, and SeatCounter.Verify never accepts it.
//
// Leave takes a waiting or pre-queued user out of the line (leaving a pull queue) and
// forgets the user's wait estimate; everyone behind moves up. A user not in the line (never
// entered, gone, or admitted: an admitted user gives the slot back with Release) is left as is.
type PullQueue interface {
	Enter(ctx context.Context, eventID, userID string) (QueuePlace, error)
	Position(ctx context.Context, eventID, userID string, ttl, signEvery time.Duration) (QueuePlace, error)
	Claim(ctx context.Context, eventID, userID, token string, ttl time.Duration) (ClaimResult, error)
	Release(ctx context.Context, eventID, userID string) (bool, error)
	Leave(ctx context.Context, eventID, userID string) error
}

// SeatCounter is what a seat reservation calls (both modes), and the reconciliation's repair of
// the seat counter.
//
// Verify reports whether token is the user's live entry token for the event, and answers the
// seat counter with it (a reservation needs both; one call).
//
// SeatsLeft answers the remaining-seat counter, and TakeSeat decrements it after a committed
// reservation and answers what it holds then. ResetSeatsLeft sets it to seats only if it still holds from (compare-and-set),
// and reports whether it did: a repair from the database's count, read after from, never
// overwrites the decrement of a reservation that committed meanwhile, so a repair can leave the
// counter low (the database is then asked again) but never high.
//
// MarkSoldOut marks the room sold out, for good (the database said no seat is free, and a
// reservation is never given back): the seat counter becomes 0, the waiting users leave the
// queue and from then on hear ErrSoldOut. Marking twice changes nothing. Open marks a room it
// creates with 0 seats sold out.
type SeatCounter interface {
	Verify(ctx context.Context, eventID, userID, token string) (valid bool, seatsLeft int, err error)
	SeatsLeft(ctx context.Context, eventID string) (int, error)
	TakeSeat(ctx context.Context, eventID string) (int, error)
	ResetSeatsLeft(ctx context.Context, eventID string, from, seats int) (bool, error)
	MarkSoldOut(ctx context.Context, eventID string) error
}

// RoomAdmin is what the operators' routes call, and the reconciliation's report.
//
// SetSlots changes the slots of a live event and answers the remaining slots, which is
// max(0, slots − tokens alive): never a slot leaked, never more users admitted than slots.
//
// ResetSlots sets the slots to slots only if they still are from, and reports whether it did:
// a repair from the database's slots never overwrites a SetSlots that came after its reads.
//
// Stats answers the event's numbers (reconciling expired tokens first).
type RoomAdmin interface {
	SetSlots(ctx context.Context, eventID string, slots int) (int, error)
	ResetSlots(ctx context.Context, eventID string, from, slots int) (bool, error)
	Stats(ctx context.Context, eventID string) (RoomStats, error)
}

// RoomReconciler is what the background reconciliation pass calls.
//
// Reconcile gives back the slots of expired tokens and drops waiting users whose last sign of
// life is older than idle (0: nobody is dropped). An event with nobody waiting, pre-queued or
// admitted leaves RoomIndex.Events until its next Enter, and its room expires retention
// (positive) after the first pass that found it so: unless a user enters its queue or
// pre-queue, connects to it (PushQueue.Connect), its slots change (RoomAdmin.SetSlots) or it is
// opened again (RoomOpener.Open, which lists it again) before, the store forgets the room, counters and wait errors included, and every per-event method
// answers ErrRoomNotOpen, as for a room the store lost. Any of those calls keeps the room for
// good again, until a pass finds it empty anew.
type RoomReconciler interface {
	RoomIndex
	Reconcile(ctx context.Context, eventID string, idle, retention time.Duration) (Reconciled, error)
}

// RoomIndex lists the events with a room in use, without scanning the keyspace: for the
// reconciliation pass and the push dispatchers.
type RoomIndex interface {
	Events(ctx context.Context) ([]string, error)
}

// EventRepository stores events.
//
// Get returns waiting.ErrEventNotFound for an unknown id. SaveSlots writes an event's slots,
// waiting.ErrEventNotFound when there is none.
type EventRepository interface {
	Create(ctx context.Context, e *waiting.Event) error
	Get(ctx context.Context, id string) (*waiting.Event, error)
	SaveSlots(ctx context.Context, id string, slots int) error
}

// SeatRepository stores the seats of events.
//
// Create inserts seats 1..seats of an event, all unreserved, all or none. GetForUpdate must run
// inside TxRunner.InTx and locks the seat's row until the transaction ends; an unknown seat
// (or a seat of another event) is waiting.ErrSeatNotFound. MarkReserved marks a seat reserved.
// List returns up to limit seats of the event by number, after the seat number `after` (0:
// from the first). CountFree counts the event's unreserved seats.
type SeatRepository interface {
	Create(ctx context.Context, eventID string, seats int) error
	GetForUpdate(ctx context.Context, eventID string, number int) (*waiting.Seat, error)
	MarkReserved(ctx context.Context, eventID string, number int) error
	List(ctx context.Context, eventID string, after, limit int) ([]waiting.Seat, error)
	CountFree(ctx context.Context, eventID string) (int, error)
}

// ReservationRepository stores reservations.
//
// Add inserts a reservation under UNIQUE(eventId, seat): a seat already reserved, including by
// a concurrent transaction that committed first, is waiting.ErrSeatAlreadyReserved. Find
// returns the reservation of an event's seat, and false when the seat has none. Count counts an
// event's reservations.
type ReservationRepository interface {
	Add(ctx context.Context, r waiting.Reservation) error
	Find(ctx context.Context, eventID string, seat int) (waiting.Reservation, bool, error)
	Count(ctx context.Context, eventID string) (int, error)
}
