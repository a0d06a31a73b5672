package waiting

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rushgate/rushgate/application/guard"
	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/domain/waiting"
	"github.com/rushgate/rushgate/ports"
)

// The seat lock's policy: a request waits up to
// SeatLockWait for the lock, whose lease is SeatLockTTL, then answers SEAT_BEING_SELECTED.
const (
	SeatLockWait = 3 * time.Second
	SeatLockTTL  = 5 * time.Second
)

// ReserveCommand asks for a seat for UserID, who presents Token (the Entry-Token header).
type ReserveCommand struct {
	EventID string
	SeatID  string
	UserID  string
	Token   string
}

// ReservationView is a reservation as clients see it.
type ReservationView struct {
	ID         string
	EventID    string
	SeatID     string
	UserID     string
	ReservedAt time.Time
}

// reserveInput is one reservation waiting in the seat's lane.
type reserveInput struct {
	eventID string
	seat    int
	userID  string
}

// Reserve books a seat (both modes): the entry token of this user and event is
// required (waiting.ErrTokenRequired); a sold-out event fails fast (waiting.ErrSoldOut); then,
// under the lock seat:{eventId}:{seatId} (waiting.ErrSeatBeingSelected after 3 s), one
// transaction locks the seat's row, inserts the reservation and marks the seat reserved
// (waiting.ErrSeatAlreadyReserved, waiting.ErrSeatNotFound); the seat counter is decremented
// after the commit. A commit whose outcome is unknown is answered by the seat's stored
// reservation (committedAfterAll).
func (s *Service) Reserve(ctx context.Context, cmd ReserveCommand) (ReservationView, error) {
	if err := domain.ValidateUserID("userId", cmd.UserID); err != nil {
		return ReservationView{}, err
	}
	budget := guard.NewBudget(s.cfg.Timeout)
	e, err := s.rooms.event(ctx, budget, cmd.EventID)
	if err != nil {
		return ReservationView{}, err
	}
	seatsLeft, err := s.checkToken(ctx, budget, e, cmd.UserID, cmd.Token)
	if err != nil {
		return ReservationView{}, err
	}
	number, err := waiting.SeatNumber(cmd.SeatID)
	if err != nil || number > e.Seats() {
		return ReservationView{}, waiting.ErrSeatNotFound
	}
	// The whole check, its Redis calls included, runs within what the request has left.
	readCtx, spent := budget.Spend(ctx)
	err = s.rejectSoldOut(readCtx, e, seatsLeft)
	spent()
	if err != nil {
		return ReservationView{}, err
	}
	return s.reserves.Do(ctx, "seat:"+e.ID()+":"+cmd.SeatID, budget, reserveInput{eventID: e.ID(), seat: number, userID: cmd.UserID})
}

// checkToken refuses a missing token, or one that is not this user's live token of this
// event; it answers the seat counter, read in the same call. Opening the room again, if the
// store lost it, spends budget.
func (s *Service) checkToken(ctx context.Context, budget *guard.Budget, e *waiting.Event, userID, token string) (int, error) {
	if token == "" {
		return 0, waiting.ErrTokenRequired
	}
	valid, seatsLeft := false, 0
	err := s.rooms.inRoom(ctx, budget, e.ID(), func() error {
		var err error
		valid, seatsLeft, err = s.d.Room.Verify(ctx, e.ID(), userID, token)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("verify entry token: %w", err)
	}
	if !valid {
		return 0, waiting.ErrTokenRequired
	}
	return seatsLeft, nil
}

// rejectSoldOut answers SOLD_OUT without the lock when the seat counter (left) is at 0 and
// the database agrees (settleSeats).
func (s *Service) rejectSoldOut(ctx context.Context, e *waiting.Event, left int) error {
	if _, sold := s.soldOut.Load(e.ID()); sold {
		return waiting.ErrSoldOut
	}
	if left > 0 {
		return nil
	}
	sold, err := s.settleSeats(ctx, nil, e.ID(), left)
	if err != nil {
		return err
	}
	if sold {
		return waiting.ErrSoldOut
	}
	return nil
}

// repairSeatCounter settles the seat counter against the database (settleSeats).
func (s *Service) repairSeatCounter(ctx context.Context, budget *guard.Budget, eventID string) error {
	left, err := s.d.Room.SeatsLeft(ctx, eventID)
	if err != nil {
		return err
	}
	_, err = s.settleSeats(ctx, budget, eventID, left)
	return err
}

// settleSeats sets the seat counter, which held left, to the database's count of free seats:
// the database wins over a counter a failed decrement left high or an earlier repair left low
// (a counter at 0 holds admission back; a repair lets it resume). The counter is reset only if
// it still holds left, so a reservation's decrement is never overwritten. With no seat free the
// room is marked sold out instead, for good: no route gives a reserved seat back, so its
// waiting users are told and nobody waits for a seat that does not exist. It reports whether
// the event is sold out. Its database reads, the count and those that open a lost room, spend
// budget (nil: ctx bounds them).
func (s *Service) settleSeats(ctx context.Context, budget *guard.Budget, eventID string, left int) (bool, error) {
	readCtx, spent := budget.Spend(ctx)
	free, err := s.d.Seats.CountFree(readCtx, eventID)
	spent()
	if err != nil {
		return false, fmt.Errorf("count free seats: %w", err)
	}
	if free == 0 {
		err := s.rooms.inRoom(ctx, budget, eventID, func() error { return s.d.Room.MarkSoldOut(ctx, eventID) })
		if err != nil {
			return false, fmt.Errorf("mark sold out: %w", err)
		}
		s.soldOut.Store(eventID, struct{}{})
		s.predicted.forgetEvent(eventID)
		return true, nil
	}
	if free != left {
		if _, err := s.d.Room.ResetSeatsLeft(ctx, eventID, left, free); err != nil {
			return false, fmt.Errorf("repair seat counter: %w", err)
		}
	}
	return false, nil
}

// reserveBatch serves the reservations of one seat queued behind its lock in one transaction:
// the seat's row FOR UPDATE once; the first request takes a free seat, every other hears
// SEAT_ALREADY_RESERVED. The UNIQUE(event, seat) index still decides any race the lock missed.
// After the commit the seat counter is decremented; a failed decrement leaves the counter high,
// which only costs a lock round, and the reconciliation pass repairs it. The decrement that
// reaches 0 has already stopped admission (in the store, atomically); the database then says
// whether the event is sold out (settleSeats), or the reconciliation pass does if that fails.
func (s *Service) reserveBatch(ctx context.Context, batch []reserveInput) ([]guard.Answer[ReservationView], error) {
	first := batch[0]
	answers := make([]guard.Answer[ReservationView], len(batch))
	reserved := false
	err := s.d.Tx.InTx(ctx, func(ctx context.Context) error {
		clear(answers)
		reserved = false
		seat, err := s.d.Seats.GetForUpdate(ctx, first.eventID, first.seat)
		if errors.Is(err, waiting.ErrSeatNotFound) {
			for i := range answers {
				answers[i].Err = waiting.ErrSeatNotFound
			}
			return nil
		}
		if err != nil {
			return err
		}
		now := s.d.Clock.Now()
		for i, in := range batch {
			r, err := seat.Reserve(s.d.IDs.NewID(), in.userID, now)
			if err != nil {
				answers[i].Err = err
				continue
			}
			if err := s.d.Reservations.Add(ctx, r); err != nil {
				return err
			}
			if err := s.d.Seats.MarkReserved(ctx, r.EventID, r.SeatNumber); err != nil {
				return err
			}
			reserved = true
			answers[i].Value = ReservationView{ID: r.ID, EventID: r.EventID, SeatID: seat.ID(), UserID: r.UserID, ReservedAt: r.ReservedAt}
		}
		return nil
	})
	if errors.Is(err, ports.ErrCommitOutcomeUnknown) && reserved {
		err = s.committedAfterAll(ctx, first, answers, err)
	}
	if err != nil {
		return nil, err
	}
	if reserved {
		// The seat is taken whatever the callers do now, so their cancellation cuts neither step
		// short; the settling, which the answers wait for, still ends with the batch's deadline.
		committed := context.WithoutCancel(ctx)
		if left, err := s.takeSeat(committed, first.eventID); err == nil && left <= 0 {
			settleCtx, cancel := committed, context.CancelFunc(func() {})
			if deadline, ok := ctx.Deadline(); ok {
				settleCtx, cancel = context.WithDeadline(committed, deadline)
			}
			_, _ = s.settleSeats(settleCtx, nil, first.eventID, left)
			cancel()
		}
	}
	return answers, nil
}

// committedAfterAll answers a batch whose COMMIT's outcome is unknown (its connection was lost
// during it, lost): the seat's stored reservation, read within the batch's deadline, is the
// batch's own when the transaction committed after all, and then nil is returned and the
// answers stand. Otherwise, or when the read fails too, lost is returned: the client hears 503
// and may try again, finding the seat reserved if the transaction did commit later.
func (s *Service) committedAfterAll(ctx context.Context, first reserveInput, answers []guard.Answer[ReservationView], lost error) error {
	stored, found, err := s.d.Reservations.Find(ctx, first.eventID, first.seat)
	if err != nil || !found {
		return lost
	}
	for _, a := range answers {
		if a.Err == nil && a.Value.ID == stored.ID {
			return nil
		}
	}
	return lost
}

// seatCountTimeout bounds the decrement of the seat counter after a reservation committed: it
// takes a millisecond, and a Redis that stalls must not hold the committed answer for a whole
// call timeout on top of the steps before it (the bound on a stalled dependency counts every
// step of a request).
const seatCountTimeout = 250 * time.Millisecond

// takeSeat decrements the seat counter within seatCountTimeout. One that fails leaves the
// counter high, which costs the next requests only a lock round, and the reconciliation pass
// repairs it.
func (s *Service) takeSeat(ctx context.Context, eventID string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, seatCountTimeout)
	defer cancel()
	return s.d.Room.TakeSeat(ctx, eventID)
}
