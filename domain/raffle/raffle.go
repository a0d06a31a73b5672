// Package raffle is the verifiable raffle: entries until closesAt, one draw in which the
// `winners` smallest tickets win, and the permission to buy the raffle's product that winning
// gives. The draw's fairness rests on package draw's commitment.
package raffle

import (
	"errors"
	"time"

	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/domain/draw"
)

// Bounds of a raffle.
const (
	MaxNameLength = 200
	MinWinners    = 1
	MaxWinners    = 1000000
)

// Status is where a raffle is in its life.
type Status string

const (
	// StatusOpen takes entries until closesAt; the draw has not run.
	StatusOpen Status = "OPEN"
	// StatusClosing takes no entries: they are fixed, and the draw is under way. Clients see
	// OPEN until it is DRAWN.
	StatusClosing Status = "CLOSING"
	// StatusDrawn is final: the winners are fixed and the seed is published.
	StatusDrawn Status = "DRAWN"
)

var (
	ErrNotFound   = domain.NewError(domain.KindNotFound, "RAFFLE_NOT_FOUND", "raffle not found")
	ErrClosed     = domain.NewError(domain.KindConflict, "RAFFLE_CLOSED", "the raffle no longer takes entries")
	ErrNotEntered = domain.NewError(domain.KindNotFound, "NOT_ENTERED", "user has not entered this raffle")
	ErrNotWon     = domain.NewError(domain.KindForbidden, "RAFFLE_NOT_WON", "only a winner of this product's raffle may buy it")
)

// Raffle is the aggregate: its terms, its secret seed and, once drawn, the result.
type Raffle struct {
	id        string
	name      string
	winners   int
	closesAt  time.Time
	productID string // empty: the raffle restricts no purchase
	seed      draw.Seed
	status    Status
	result    Result
	createdAt time.Time
}

// Result is what a draw fixed: how many entries it drew from and the largest winning ticket
// (empty when nobody entered).
type Result struct {
	Entries      int
	CutoffTicket string
	DrawnAt      time.Time
}

// New validates and creates an OPEN raffle with a fresh seed.
func New(id, name string, winners int, closesAt time.Time, productID string, seed draw.Seed, now time.Time) (*Raffle, error) {
	if err := domain.ValidateText("name", name, MaxNameLength); err != nil {
		return nil, err
	}
	if winners < MinWinners || winners > MaxWinners {
		return nil, domain.Invalid("winners", "must be between %d and %d", MinWinners, MaxWinners)
	}
	if err := domain.ValidateInstant("closesAt", closesAt); err != nil {
		return nil, err
	}
	// Kept to the microsecond, the databases' resolution, so every answer shows the one stored.
	closesAt = closesAt.UTC().Truncate(time.Microsecond)
	if !closesAt.After(now) {
		return nil, domain.Invalid("closesAt", "must be in the future")
	}
	return &Raffle{id: id, name: name, winners: winners, closesAt: closesAt, productID: productID, seed: seed,
		status: StatusOpen, createdAt: now}, nil
}

// Rebuild restores a raffle from storage without re-validating; adapters only.
func Rebuild(id, name string, winners int, closesAt time.Time, productID string, seed draw.Seed, status Status,
	result Result, createdAt time.Time) *Raffle {
	return &Raffle{id: id, name: name, winners: winners, closesAt: closesAt, productID: productID, seed: seed,
		status: status, result: result, createdAt: createdAt}
}

func (r *Raffle) ID() string           { return r.id }
func (r *Raffle) Name() string         { return r.name }
func (r *Raffle) Winners() int         { return r.winners }
func (r *Raffle) ClosesAt() time.Time  { return r.closesAt }
func (r *Raffle) ProductID() string    { return r.productID }
func (r *Raffle) Status() Status       { return r.status }
func (r *Raffle) Result() Result       { return r.result }
func (r *Raffle) CreatedAt() time.Time { return r.createdAt }
func (r *Raffle) SeedHash() string     { return r.seed.Hash() }

// Seed is the secret, for storage: publish it only through PublishedSeed.
func (r *Raffle) Seed() draw.Seed { return r.seed }

// PublishedSeed is the seed in hex once the draw has run, and false before.
func (r *Raffle) PublishedSeed() (string, bool) {
	if r.status != StatusDrawn {
		return "", false
	}
	return r.seed.Hex(), true
}

// CheckEntry refuses an entry at now unless the raffle is open and closesAt has not come.
func (r *Raffle) CheckEntry(now time.Time) error {
	if r.status != StatusOpen || !now.Before(r.closesAt) {
		return ErrClosed
	}
	return nil
}

// Due reports whether the draw should run at now: open and closesAt has come, or closing.
func (r *Raffle) Due(now time.Time) bool {
	return r.status == StatusClosing || (r.status == StatusOpen && !now.Before(r.closesAt))
}

// Close ends the entries of a raffle whose closesAt has come, so that its entrants are fixed
// for the draw; a raffle closing already stays so. Any other raffle is ErrNotDue.
func (r *Raffle) Close(now time.Time) error {
	if !r.Due(now) {
		return ErrNotDue
	}
	r.status = StatusClosing
	return nil
}

// Draw runs the draw of a closing raffle over the users who entered: the winners smallest
// tickets win. It marks the raffle DRAWN and returns the winners in draw order; a raffle not
// closing is ErrNotDue and left as it was.
func (r *Raffle) Draw(userIDs []string, now time.Time) ([]draw.Entrant, error) {
	if r.status != StatusClosing {
		return nil, ErrNotDue
	}
	order := draw.Order(r.seed, userIDs)
	won := order[:min(r.winners, len(order))]
	r.status = StatusDrawn
	r.result = Result{Entries: len(userIDs), DrawnAt: now}
	if len(won) > 0 {
		r.result.CutoffTicket = won[len(won)-1].Ticket
	}
	return won, nil
}

// ErrNotDue is a close or a draw asked of a raffle that is drawn already, still before closesAt
// (close), or not closed (draw); only the draw worker meets it, and it skips the raffle.
var ErrNotDue = errors.New("raffle: drawn already or not closed yet")

// Outcome is a user's standing in the raffle.
type Outcome string

const (
	OutcomeEntered Outcome = "entered"
	OutcomeWon     Outcome = "won"
	OutcomeLost    Outcome = "lost"
)

// OutcomeOf is userID's standing: entered before the draw; after it, won when the user's ticket
// is at most the cutoff, with the ticket that anyone holding the seed can recompute.
func (r *Raffle) OutcomeOf(userID string) (Outcome, string) {
	if r.status != StatusDrawn {
		return OutcomeEntered, ""
	}
	ticket := r.seed.Ticket(userID)
	if r.result.CutoffTicket != "" && ticket <= r.result.CutoffTicket {
		return OutcomeWon, ticket
	}
	return OutcomeLost, ticket
}

// Entry is one user's entry in a raffle; UNIQUE (RaffleID, UserID).
type Entry struct {
	RaffleID  string
	UserID    string
	EnteredAt time.Time
}

// UnitsPerWinner is how many units of a raffle's product its winner may buy in all: those in
// the cart and those in orders not cancelled together, so a winner who ordered it has none left.
const UnitsPerWinner = 1

// PurchaseLimit is how many units in all a user may buy of a product that raffles restrict,
// given whether the user won any of them: a winner UnitsPerWinner, anyone else none, ErrNotWon.
func PurchaseLimit(won bool) (int, error) {
	if !won {
		return 0, ErrNotWon
	}
	return UnitsPerWinner, nil
}
