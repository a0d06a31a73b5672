// Package raffle holds the raffle use cases: create, enter (idempotent per user), read the
// result and one's own standing, the draw at closesAt, and the purchase permission a raffle for
// a product gives its winners. It depends on ports only.
package raffle

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/rushgate/rushgate/application/guard/combine"
	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/domain/draw"
	"github.com/rushgate/rushgate/domain/raffle"
	"github.com/rushgate/rushgate/ports"
)

// DefaultDrawInterval is how often the draw worker looks for raffles past closesAt.
const DefaultDrawInterval = time.Second

// enterBatchSize bounds how many entries of one raffle one statement stores, and enterInFlight
// how many such statements of one raffle an instance runs at once. Two rather than four: each
// statement pays for its commit and its share lock on the raffle's row whatever its size, so
// fewer, larger batches gave Postgres 14% more entries/s at concurrency 64 (three A/B pairs of
// raffle-entry; MariaDB unchanged); one was slower than either.
const (
	enterBatchSize = 128
	enterInFlight  = 2
)

// drawBatch bounds how many due raffles one round of the worker draws.
const drawBatch = 100

// Deps are the ports the raffle use cases run on.
type Deps struct {
	Tx      ports.TxRunner
	Raffles ports.RaffleRepository
	Entries ports.RaffleEntryRepository
	// Products is read to refuse a raffle for a product that does not exist.
	Products ports.ProductRepository
	Clock    ports.Clock
	IDs      ports.IDGenerator
	// DrawHold holds each draw this long between ordering the entrants and writing the result,
	// so that a fault test can kill the instance mid-draw; zero (no hold) outside such tests.
	DrawHold time.Duration
	// Timeout, the database's timeout, bounds each call as a whole: an entry from its arrival
	// (its wait for a batch and the batch's reads and writes), a view's two reads (Get and
	// Standing read the raffle, then its count or the user's entry) together, and a create's
	// read of the product it names and its insert together. Each store call is
	// bounded by the store alone, so a slow database would otherwise hold a call for their sum.
	// Zero: only the stores' own timeouts.
	Timeout time.Duration
}

// Service runs the raffle use cases.
type Service struct {
	tx       ports.TxRunner
	raffles  ports.RaffleRepository
	entries  ports.RaffleEntryRepository
	products ports.ProductRepository
	clock    ports.Clock
	ids      ports.IDGenerator
	drawHold time.Duration
	timeout  time.Duration
	terms    *raffleCache
	entering *combine.Combiner[string, string, entered] // by raffle id
}

var _ ports.PurchasePermissions = (*Service)(nil)

// NewService wires the raffle use cases to their ports.
func NewService(d Deps) *Service {
	s := &Service{tx: d.Tx, raffles: d.Raffles, entries: d.Entries, products: d.Products, clock: d.Clock, ids: d.IDs, drawHold: d.DrawHold,
		timeout: d.Timeout, terms: &raffleCache{raffles: d.Raffles, byID: map[string]*raffle.Raffle{}}}
	// Entry statements hold the raffle's row in share mode, so batches of one raffle run side by
	// side.
	s.entering = combine.New(combine.Config[string, string]{MaxBatch: enterBatchSize, InFlight: enterInFlight,
		Timeout: d.Timeout}, s.enterBatch)
	return s
}

// maxCachedRaffles bounds how many raffles an instance keeps for its entries; past it the cache
// starts over.
const maxCachedRaffles = 1024

// raffleCache keeps each raffle entries were sent to as first read, so a batch of entries reads
// no raffle: what an entry needs of it, that it exists and its closesAt, never changes, and a
// status it shows closed is final (an OPEN one may be stale, and the entry statement checks).
type raffleCache struct {
	raffles ports.RaffleRepository
	mu      sync.Mutex
	byID    map[string]*raffle.Raffle
}

// get returns the raffle, read once, or raffle.ErrNotFound (not kept: nothing is).
func (c *raffleCache) get(ctx context.Context, id string) (*raffle.Raffle, error) {
	c.mu.Lock()
	r, ok := c.byID[id]
	c.mu.Unlock()
	if ok {
		return r, nil
	}
	r, err := c.raffles.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.byID) >= maxCachedRaffles {
		clear(c.byID)
	}
	c.byID[id] = r
	return r, nil
}

// View is a raffle as anyone sees it: Seed and CutoffTicket are nil until the draw has run.
type View struct {
	ID           string
	Name         string
	Winners      int
	ClosesAt     time.Time
	Status       string
	Entries      int
	SeedHash     string
	Seed         *string
	CutoffTicket *string
}

func viewOf(r *raffle.Raffle, entries int) View {
	v := View{ID: r.ID(), Name: r.Name(), Winners: r.Winners(), ClosesAt: r.ClosesAt(), Status: string(r.Status()),
		Entries: entries, SeedHash: r.SeedHash()}
	if r.Status() == raffle.StatusClosing {
		// Entries are fixed, the draw is under way: to clients it is still open, not drawn.
		v.Status = string(raffle.StatusOpen)
	}
	if seed, ok := r.PublishedSeed(); ok {
		v.Seed = &seed
		if cutoff := r.Result().CutoffTicket; cutoff != "" {
			v.CutoffTicket = &cutoff
		}
	}
	return v
}

// CreateCommand creates a raffle; ProductID is empty for a raffle that restricts no purchase.
type CreateCommand struct {
	Name      string
	Winners   int
	ClosesAt  time.Time
	ProductID string
}

// Create validates and stores a new OPEN raffle with a fresh secret seed, of which only the
// hash is shown. A product it names must exist (catalog.ErrProductNotFound); products are never
// deleted, so one read settles it.
func (s *Service) Create(ctx context.Context, cmd CreateCommand) (View, error) {
	ctx, cancel := s.boundStoreCalls(ctx)
	defer cancel()
	if cmd.ProductID != "" {
		if err := domain.ValidateUUID("productId", cmd.ProductID); err != nil {
			return View{}, err
		}
		if _, _, err := s.products.Get(ctx, cmd.ProductID); err != nil {
			return View{}, fmt.Errorf("raffle product: %w", err)
		}
	}
	seed, err := draw.RandomSeed()
	if err != nil {
		return View{}, fmt.Errorf("create raffle: %w", err)
	}
	r, err := raffle.New(s.ids.NewID(), cmd.Name, cmd.Winners, cmd.ClosesAt, cmd.ProductID, seed, s.clock.Now())
	if err != nil {
		return View{}, err
	}
	if err := s.raffles.Create(ctx, r); err != nil {
		return View{}, fmt.Errorf("create raffle: %w", err)
	}
	return viewOf(r, 0), nil
}

// Get returns a raffle with its entry count: counted while it is open, as drawn after.
func (s *Service) Get(ctx context.Context, raffleID string) (View, error) {
	if err := validateRaffleID(raffleID); err != nil {
		return View{}, err
	}
	ctx, cancel := s.boundStoreCalls(ctx)
	defer cancel()
	r, err := s.raffles.Get(ctx, raffleID)
	if err != nil {
		return View{}, err
	}
	if r.Status() == raffle.StatusDrawn {
		return viewOf(r, r.Result().Entries), nil
	}
	n, err := s.entries.Count(ctx, raffleID)
	if err != nil {
		return View{}, fmt.Errorf("count entries: %w", err)
	}
	return viewOf(r, n), nil
}

// EntryView is a stored entry.
type EntryView struct {
	RaffleID  string
	UserID    string
	EnteredAt time.Time
}

// Enter enters the user in the raffle, once: created is false when the user had entered
// already, and the answer is that entry, open or not. A new entry at or after closesAt is
// raffle.ErrClosed; an unknown raffle raffle.ErrNotFound. Concurrent entries of one raffle on
// this instance are combined: one statement stores each batch (enterBatch).
func (s *Service) Enter(ctx context.Context, raffleID, userID string) (view EntryView, created bool, err error) {
	if err := validateRaffleID(raffleID); err != nil {
		return EntryView{}, false, err
	}
	if err := domain.ValidateUserID("userId", userID); err != nil {
		return EntryView{}, false, err
	}
	got, err := s.entering.Do(ctx, raffleID, userID)
	if err != nil {
		return EntryView{}, false, err
	}
	return EntryView(got.entry), got.created, nil
}

// entered is one entry's answer from a batch.
type entered struct {
	entry   raffle.Entry
	created bool
}

// enterBatch enters a batch of users in one raffle: one statement stores the entries of those
// who have none while the raffle is open (the store, not this instance's clock or copy of the
// raffle, decides the close against a concurrent draw), and one read answers the others with
// their stored entry (those the store did not answer already), or raffle.ErrClosed when they
// have none. A user twice in the batch gets the same entry twice, created once.
func (s *Service) enterBatch(ctx context.Context, raffleID string, userIDs []string) ([]combine.Answer[entered], error) {
	answers := make([]combine.Answer[entered], len(userIDs))
	r, err := s.terms.get(ctx, raffleID)
	if errors.Is(err, raffle.ErrNotFound) {
		for i := range answers {
			answers[i].Err = raffle.ErrNotFound
		}
		return answers, nil
	}
	if err != nil {
		return nil, err
	}
	now := s.clock.Now()
	var stored []string
	var existing map[string]raffle.Entry
	// The copy's closesAt is the stored one, and a raffle it shows closed is closed for good:
	// such a batch only reads.
	if r.CheckEntry(now) == nil {
		if stored, existing, err = s.entries.AddWhileOpen(ctx, raffleID, now, userIDs); err != nil {
			return nil, fmt.Errorf("store entries: %w", err)
		}
	}
	fresh := make(map[string]bool, len(stored))
	for _, userID := range stored {
		fresh[userID] = true
	}
	var others []string
	for _, userID := range userIDs {
		if _, ok := existing[userID]; !ok && !fresh[userID] {
			others = append(others, userID)
		}
	}
	if existing == nil {
		existing = map[string]raffle.Entry{}
	}
	if len(others) > 0 {
		read, err := s.entries.Existing(ctx, raffleID, others)
		if err != nil {
			return nil, fmt.Errorf("read entries: %w", err)
		}
		maps.Copy(existing, read)
	}
	for i, userID := range userIDs {
		e, ok := existing[userID]
		switch {
		case fresh[userID]:
			e = raffle.Entry{RaffleID: raffleID, UserID: userID, EnteredAt: now}
			answers[i].Value = entered{entry: e, created: true}
			// The user's next call in this batch answers the same entry, not created again.
			fresh[userID], existing[userID] = false, e
		case ok:
			answers[i].Value = entered{entry: e}
		default:
			answers[i].Err = raffle.ErrClosed
		}
	}
	return answers, nil
}

// boundStoreCalls bounds the store calls of one call made with the returned context (a view's
// two reads, a create's product read and insert) by Deps.Timeout together.
func (s *Service) boundStoreCalls(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.timeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.timeout)
}

// StandingView is a user's standing: Ticket is nil until the draw has run.
type StandingView struct {
	Status string
	Ticket *string
}

// Standing returns the user's standing in the raffle, or raffle.ErrNotEntered.
func (s *Service) Standing(ctx context.Context, raffleID, userID string) (StandingView, error) {
	if err := validateRaffleID(raffleID); err != nil {
		return StandingView{}, err
	}
	ctx, cancel := s.boundStoreCalls(ctx)
	defer cancel()
	r, err := s.raffles.Get(ctx, raffleID)
	if err != nil {
		return StandingView{}, err
	}
	if _, err := s.entries.Get(ctx, raffleID, userID); err != nil {
		return StandingView{}, err
	}
	outcome, ticket := r.OutcomeOf(userID)
	v := StandingView{Status: string(outcome)}
	if ticket != "" {
		v.Ticket = &ticket
	}
	return v, nil
}

// DrawDue draws every raffle past its closesAt, each once, and returns how many it drew. Any
// number of instances may run it at once: each draw locks its raffle and writes only over an
// OPEN one, so a raffle another instance drew is skipped.
func (s *Service) DrawDue(ctx context.Context) (int, error) {
	due, err := s.raffles.Due(ctx, s.clock.Now(), drawBatch)
	if err != nil {
		return 0, fmt.Errorf("find due raffles: %w", err)
	}
	drawn := 0
	var errs []error
	for _, id := range due {
		ok, err := s.Draw(ctx, id)
		if err != nil {
			errs = append(errs, fmt.Errorf("draw raffle %s: %w", id, err))
		}
		if ok {
			drawn++
		}
	}
	return drawn, errors.Join(errs...)
}

// Draw runs raffleID's draw if it is due, in three steps so that no transaction grows with the
// raffle: close it (a short transaction under its row lock, which waits for the entries in
// flight and after which the entries are fixed), read the entrants page by page and order them
// by ticket, then write the result over the still CLOSING raffle in one conditional statement.
// It reports false, changing nothing, when the raffle is drawn already or not closed yet. A
// crash before the result is written leaves the raffle CLOSING (shown OPEN, its seed unshown),
// to be drawn by the next round, to the same result: the seed and the entries are fixed.
func (s *Service) Draw(ctx context.Context, raffleID string) (bool, error) {
	r, err := s.close(ctx, raffleID)
	if errors.Is(err, raffle.ErrNotDue) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	userIDs, err := s.entrants(ctx, raffleID)
	if err != nil {
		return false, err
	}
	if _, err := r.Draw(userIDs, s.clock.Now()); err != nil {
		return false, err
	}
	if s.drawHold > 0 {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(s.drawHold):
		}
	}
	err = s.raffles.SaveDrawn(ctx, r)
	if errors.Is(err, raffle.ErrNotDue) {
		return false, nil
	}
	return err == nil, err
}

// close returns the raffle CLOSING: closed now under its row lock, or closed already by an
// earlier draw that did not finish. raffle.ErrNotDue when it is drawn or before closesAt.
func (s *Service) close(ctx context.Context, raffleID string) (*raffle.Raffle, error) {
	var closing *raffle.Raffle
	err := s.tx.InTx(ctx, func(ctx context.Context) error {
		r, err := s.raffles.GetForDraw(ctx, raffleID)
		if err != nil {
			return err
		}
		wasOpen := r.Status() == raffle.StatusOpen
		if err := r.Close(s.clock.Now()); err != nil {
			return err
		}
		if wasOpen {
			if err := s.raffles.SaveClosing(ctx, r); err != nil {
				return err
			}
		}
		closing = r
		return nil
	})
	return closing, err
}

// entrantsPage bounds one read of a raffle's entrants.
const entrantsPage = 10000

// entrants reads every entrant of a closed raffle, a page per statement.
func (s *Service) entrants(ctx context.Context, raffleID string) ([]string, error) {
	var all []string
	for after := ""; ; {
		page, err := s.entries.UserIDs(ctx, raffleID, after, entrantsPage)
		if err != nil {
			return nil, fmt.Errorf("read entrants: %w", err)
		}
		all = append(all, page...)
		if len(page) < entrantsPage {
			return all, nil
		}
		after = page[len(page)-1]
	}
}

// PurchaseLimit is the permission a raffle for a product gives (ports.PurchasePermissions): a
// product no raffle names is anyone's to buy, in any number; otherwise only a winner of one of
// its raffles may buy it, raffle.UnitsPerWinner in all.
func (s *Service) PurchaseLimit(ctx context.Context, userID, productID string) (int, bool, error) {
	raffles, err := s.raffles.ForProduct(ctx, productID)
	if err != nil {
		return 0, false, fmt.Errorf("find the product's raffles: %w", err)
	}
	if len(raffles) == 0 {
		return 0, false, nil
	}
	won := false
	for _, r := range raffles {
		if won, err = s.won(ctx, r, userID); err != nil || won {
			break
		}
	}
	if err != nil {
		return 0, false, err
	}
	limit, err := raffle.PurchaseLimit(won)
	return limit, true, err
}

// won reports whether userID entered r and won it.
func (s *Service) won(ctx context.Context, r *raffle.Raffle, userID string) (bool, error) {
	if r.Status() != raffle.StatusDrawn {
		return false, nil
	}
	if _, err := s.entries.Get(ctx, r.ID(), userID); errors.Is(err, raffle.ErrNotEntered) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("read entry: %w", err)
	}
	outcome, _ := r.OutcomeOf(userID)
	return outcome == raffle.OutcomeWon, nil
}

func validateRaffleID(id string) error { return domain.ValidateUUID("raffleId", id) }
