package porttest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/rushgate/rushgate/domain/draw"
	"github.com/rushgate/rushgate/domain/raffle"
	"github.com/rushgate/rushgate/ports"
)

// RaffleBackend is the raffle store set with the TxRunner of its database.
type RaffleBackend struct {
	Tx ports.TxRunner
	ports.RaffleStores
}

// TestRaffleRepositories checks ports.RaffleRepository and ports.RaffleEntryRepository: Create
// and Get round-trip a raffle, its seed included, also through a second instance, and an unknown
// id is raffle.ErrNotFound; the row locks fail outside a transaction; Add inserts a batch of
// entries all or none, refuses an existing pair as raffle.ErrAlreadyEntered (also to the losers
// of a race) and an unknown raffle as raffle.ErrNotFound; Existing finds exactly the entrants
// among the ids asked; a draw's lock
// waits for an entry holding the raffle, so the draw sees that entry; SaveClosing writes over an
// OPEN raffle only and SaveDrawn over a CLOSING one, so of racing draws one writes; UserIDs pages
// through the entrants in id order; Due and ForProduct find what they say.
func TestRaffleRepositories(t *testing.T, open func(t *testing.T) RaffleBackend, caps Capabilities) {
	run(t, open, caps, []testCase[RaffleBackend]{
		{"Raffle/CreateThenGetRoundTripsTheSeed", testRaffleRoundTrip},
		{"Raffle/UnknownIDIsNotFound", testRaffleUnknown},
		{"Raffle/LocksOutsideTxFail", testRaffleLocksOutsideTx},
		{"Raffle/SavesWriteOverTheStatusBeforeOnly", testRaffleSaveDrawnOnce},
		{"Raffle/RacingDrawsOneWrites", testRaffleRacingDraws},
		{"Raffle/DueListsOpenRafflesPastClose", testRaffleDue},
		{"Raffle/ForProductFindsItsRaffles", testRaffleForProduct},
		{"Entry/AddThenExistingGetAndCount", testEntryAddOnce},
		{"Entry/AddWithAnExistingPairInsertsNone", testEntryAddWithExistingPair},
		{"Entry/ConcurrentAddsOfOnePairOneWins", testEntryConcurrentAdds},
		{"Entry/AddToUnknownRaffleIsNotFound", testEntryUnknownRaffle},
		{"Entry/DrawWaitsForAnEntryHoldingTheRaffle", testEntryDrawWaitsForEntry},
	})
}

// newStoredRaffle stores an OPEN raffle closing at closesAt, for productID ("" for none).
func newStoredRaffle(t *testing.T, b RaffleBackend, winners int, closesAt time.Time, productID string) *raffle.Raffle {
	t.Helper()
	seed, err := draw.RandomSeed()
	must(t, err, "seed")
	r, err := raffle.New(randomID(), "contract raffle", winners, closesAt, productID, seed, closesAt.Add(-time.Hour))
	must(t, err, "new raffle")
	must(t, b.Raffles.Create(context.Background(), r), "create raffle")
	return r
}

func testRaffleRoundTrip(t *testing.T, e env[RaffleBackend]) {
	product := randomID()
	created := newStoredRaffle(t, e.impl, 3, now().Add(time.Hour), product)
	for name, b := range map[string]RaffleBackend{"same instance": e.impl, "second instance": e.open(t)} {
		got, err := b.Raffles.Get(context.Background(), created.ID())
		must(t, err, name+": get")
		expectEqual(t, got.Seed(), created.Seed(), name+": seed")
		expectEqual(t, got.SeedHash(), created.SeedHash(), name+": seedHash")
		expectEqual(t, got.Name(), created.Name(), name+": name")
		expectEqual(t, got.Winners(), 3, name+": winners")
		expectEqual(t, got.ProductID(), product, name+": productId")
		expectEqual(t, got.Status(), raffle.StatusOpen, name+": status")
		expectEqual(t, got.ClosesAt().Equal(created.ClosesAt()), true, name+": closesAt")
	}
}

func testRaffleUnknown(t *testing.T, e env[RaffleBackend]) {
	_, err := e.impl.Raffles.Get(context.Background(), randomID())
	expectIs(t, err, raffle.ErrNotFound, "get unknown")
	err = e.impl.Tx.InTx(context.Background(), func(ctx context.Context) error {
		_, err := e.impl.Raffles.GetForDraw(ctx, randomID())
		return err
	})
	expectIs(t, err, raffle.ErrNotFound, "get unknown for draw")
	_, err = e.impl.Entries.Get(context.Background(), randomID(), newUserID())
	expectIs(t, err, raffle.ErrNotEntered, "entry of unknown raffle")
}

func testRaffleLocksOutsideTx(t *testing.T, e env[RaffleBackend]) {
	r := newStoredRaffle(t, e.impl, 1, now().Add(time.Hour), "")
	if _, err := e.impl.Raffles.GetForEntry(context.Background(), r.ID()); err == nil {
		t.Error("GetForEntry outside a transaction succeeded")
	}
	if _, err := e.impl.Raffles.GetForDraw(context.Background(), r.ID()); err == nil {
		t.Error("GetForDraw outside a transaction succeeded")
	}
}

// drawStored runs a draw of the stored raffle as the use case does, at its closesAt: close it
// under its row lock, read its entrants, write the result.
func drawStored(ctx context.Context, b RaffleBackend, id string) error {
	var r *raffle.Raffle
	err := b.Tx.InTx(ctx, func(ctx context.Context) error {
		var err error
		if r, err = b.Raffles.GetForDraw(ctx, id); err != nil {
			return err
		}
		if r.Status() != raffle.StatusOpen {
			return r.Close(r.ClosesAt())
		}
		if err := r.Close(r.ClosesAt()); err != nil {
			return err
		}
		return b.Raffles.SaveClosing(ctx, r)
	})
	if err != nil {
		return err
	}
	users, err := b.Entries.UserIDs(ctx, id, "", 1000000)
	if err != nil {
		return err
	}
	if _, err := r.Draw(users, r.ClosesAt()); err != nil {
		return err
	}
	return b.Raffles.SaveDrawn(ctx, r)
}

func testRaffleSaveDrawnOnce(t *testing.T, e env[RaffleBackend]) {
	ctx := context.Background()
	r := newStoredRaffle(t, e.impl, 2, now().Add(time.Hour), "")
	users := []string{newUserID(), newUserID(), newUserID()}
	for _, u := range users {
		must(t, e.impl.Entries.Add(ctx, raffle.Entry{RaffleID: r.ID(), UserID: u, EnteredAt: now()}), "add entry")
	}
	// A draw of a raffle not closed, or computed from a stale read, must not write.
	stale, err := e.impl.Raffles.Get(ctx, r.ID())
	must(t, err, "get")
	must(t, stale.Close(stale.ClosesAt()), "close the copy")
	if _, err := stale.Draw(users[:1], stale.ClosesAt()); err != nil {
		t.Fatalf("stale draw: %v", err)
	}
	expectIs(t, e.impl.Raffles.SaveDrawn(ctx, stale), raffle.ErrNotDue, "SaveDrawn over an OPEN raffle")
	must(t, drawStored(ctx, e.impl, r.ID()), "draw")
	expectIs(t, e.impl.Raffles.SaveDrawn(ctx, stale), raffle.ErrNotDue, "SaveDrawn over a DRAWN raffle")
	expectIs(t, e.impl.Raffles.SaveClosing(ctx, stale), raffle.ErrNotDue, "SaveClosing over a DRAWN raffle")

	got, err := e.impl.Raffles.Get(ctx, r.ID())
	must(t, err, "get drawn")
	expectEqual(t, got.Status(), raffle.StatusDrawn, "status")
	expectEqual(t, got.Result().Entries, 3, "entries drawn from")
	expectEqual(t, got.Result().CutoffTicket, draw.Order(r.Seed(), users)[1].Ticket, "cutoff")
	expectEqual(t, got.Seed(), r.Seed(), "seed")
}

func testRaffleRacingDraws(t *testing.T, e env[RaffleBackend]) {
	r := newStoredRaffle(t, e.impl, 1, now().Add(time.Hour), "")
	must(t, e.impl.Entries.Add(context.Background(), raffle.Entry{RaffleID: r.ID(), UserID: newUserID(), EnteredAt: now()}), "add entry")
	instances := []RaffleBackend{e.impl, e.open(t), e.open(t), e.open(t)}
	errs := startTogether(len(instances), func(i int) error { return drawStored(context.Background(), instances[i], r.ID()) })
	expectOneWinner(t, errs, raffle.ErrNotDue)
}

func testRaffleDue(t *testing.T, e env[RaffleBackend]) {
	ctx := context.Background()
	at := now().Add(time.Hour)
	due := newStoredRaffle(t, e.impl, 1, at, "")
	later := newStoredRaffle(t, e.impl, 1, at.Add(time.Minute), "")
	drawn := newStoredRaffle(t, e.impl, 1, at, "")
	must(t, drawStored(ctx, e.impl, drawn.ID()), "draw")
	closing := newStoredRaffle(t, e.impl, 1, at.Add(time.Hour), "")
	must(t, closing.Close(closing.ClosesAt()), "close")
	must(t, e.impl.Raffles.SaveClosing(ctx, closing), "save closing")

	ids, err := e.impl.Raffles.Due(ctx, at, 100000)
	must(t, err, "due")
	expectEqual(t, slices.Contains(ids, due.ID()), true, "the raffle at its closesAt is due")
	expectEqual(t, slices.Contains(ids, later.ID()), false, "a raffle closing later is due")
	expectEqual(t, slices.Contains(ids, drawn.ID()), false, "a drawn raffle is due")
	expectEqual(t, slices.Contains(ids, closing.ID()), true, "a closing raffle is due")
	one, err := e.impl.Raffles.Due(ctx, at, 1)
	must(t, err, "due, limit 1")
	expectEqual(t, len(one), 1, "due with limit 1")
}

func testRaffleForProduct(t *testing.T, e env[RaffleBackend]) {
	product := randomID()
	first := newStoredRaffle(t, e.impl, 1, now().Add(time.Hour), product)
	second := newStoredRaffle(t, e.impl, 1, now().Add(time.Hour), product)
	newStoredRaffle(t, e.impl, 1, now().Add(time.Hour), "")
	found, err := e.impl.Raffles.ForProduct(context.Background(), product)
	must(t, err, "for product")
	var ids []string
	for _, r := range found {
		ids = append(ids, r.ID())
	}
	slices.Sort(ids)
	want := []string{first.ID(), second.ID()}
	slices.Sort(want)
	expectEqual(t, slices.Equal(ids, want), true, "the product's raffles")
	none, err := e.impl.Raffles.ForProduct(context.Background(), randomID())
	must(t, err, "for another product")
	expectEqual(t, len(none), 0, "raffles of a product none names")
}

func testEntryAddOnce(t *testing.T, e env[RaffleBackend]) {
	ctx := context.Background()
	r := newStoredRaffle(t, e.impl, 1, now().Add(time.Hour), "")
	first := raffle.Entry{RaffleID: r.ID(), UserID: newUserID(), EnteredAt: now()}
	second := raffle.Entry{RaffleID: r.ID(), UserID: newUserID(), EnteredAt: now().Add(time.Second)}
	must(t, e.impl.Entries.Add(ctx, first, second), "add")

	existing, err := e.impl.Entries.Existing(ctx, r.ID(), []string{first.UserID, newUserID(), second.UserID})
	must(t, err, "existing")
	expectEqual(t, len(existing), 2, "existing entries")
	expectEqual(t, existing[second.UserID].EnteredAt.Equal(second.EnteredAt), true, "second's enteredAt")
	none, err := e.impl.Entries.Existing(ctx, randomID(), []string{first.UserID})
	must(t, err, "existing in another raffle")
	expectEqual(t, len(none), 0, "entries in another raffle")
	got, err := e.impl.Entries.Get(ctx, r.ID(), first.UserID)
	must(t, err, "get")
	expectEqual(t, got.EnteredAt.Equal(first.EnteredAt), true, "stored entry")
	_, err = e.impl.Entries.Get(ctx, r.ID(), newUserID())
	expectIs(t, err, raffle.ErrNotEntered, "another user's entry")

	n, err := e.impl.Entries.Count(ctx, r.ID())
	must(t, err, "count")
	expectEqual(t, n, 2, "count")
	want := []string{first.UserID, second.UserID}
	slices.Sort(want)
	users, err := e.impl.Entries.UserIDs(ctx, r.ID(), "", 10)
	must(t, err, "user ids")
	expectEqual(t, slices.Equal(users, want), true, "user ids in order")
	page, err := e.impl.Entries.UserIDs(ctx, r.ID(), "", 1)
	must(t, err, "first page")
	expectEqual(t, slices.Equal(page, want[:1]), true, "first page")
	page, err = e.impl.Entries.UserIDs(ctx, r.ID(), page[0], 1)
	must(t, err, "second page")
	expectEqual(t, slices.Equal(page, want[1:]), true, "second page")
	page, err = e.impl.Entries.UserIDs(ctx, r.ID(), want[1], 1)
	must(t, err, "past the last")
	expectEqual(t, len(page), 0, "past the last")
}

func testEntryAddWithExistingPair(t *testing.T, e env[RaffleBackend]) {
	ctx := context.Background()
	r := newStoredRaffle(t, e.impl, 1, now().Add(time.Hour), "")
	first := raffle.Entry{RaffleID: r.ID(), UserID: newUserID(), EnteredAt: now()}
	must(t, e.impl.Entries.Add(ctx, first), "add")
	again := first
	again.EnteredAt = first.EnteredAt.Add(time.Minute)
	newcomer := raffle.Entry{RaffleID: r.ID(), UserID: newUserID(), EnteredAt: now()}
	expectIs(t, e.impl.Entries.Add(ctx, newcomer, again), raffle.ErrAlreadyEntered, "add with an existing pair")
	got, err := e.impl.Entries.Get(ctx, r.ID(), first.UserID)
	must(t, err, "get")
	expectEqual(t, got.EnteredAt.Equal(first.EnteredAt), true, "the first entry stays")
	_, err = e.impl.Entries.Get(ctx, r.ID(), newcomer.UserID)
	expectIs(t, err, raffle.ErrNotEntered, "the newcomer of the refused batch")
}

func testEntryConcurrentAdds(t *testing.T, e env[RaffleBackend]) {
	r := newStoredRaffle(t, e.impl, 1, now().Add(time.Hour), "")
	user := newUserID()
	errs := startTogether(8, func(i int) error {
		return e.impl.Entries.Add(context.Background(),
			raffle.Entry{RaffleID: r.ID(), UserID: user, EnteredAt: now().Add(time.Duration(i) * time.Second)})
	})
	expectOneWinner(t, errs, raffle.ErrAlreadyEntered)
	n, err := e.impl.Entries.Count(context.Background(), r.ID())
	must(t, err, "count")
	expectEqual(t, n, 1, "stored entries")
}

func testEntryUnknownRaffle(t *testing.T, e env[RaffleBackend]) {
	err := e.impl.Entries.Add(context.Background(), raffle.Entry{RaffleID: randomID(), UserID: newUserID(), EnteredAt: now()})
	expectIs(t, err, raffle.ErrNotFound, "add to unknown raffle")
}

// testEntryDrawWaitsForEntry: an entry holding the raffle's row (GetForEntry) commits before a
// draw that started meanwhile reads the entrants, so the draw counts it.
func testEntryDrawWaitsForEntry(t *testing.T, e env[RaffleBackend]) {
	r := newStoredRaffle(t, e.impl, 5, now().Add(time.Hour), "")
	user := newUserID()
	drawer := e.open(t)
	held := make(chan struct{})
	drawn := make(chan error, 1)
	entered := e.impl.Tx.InTx(context.Background(), func(ctx context.Context) error {
		if _, err := e.impl.Raffles.GetForEntry(ctx, r.ID()); err != nil {
			return err
		}
		close(held)
		go func() { drawn <- drawStored(context.Background(), drawer, r.ID()) }()
		// Give the draw time to overtake this entry if its lock does not wait for it.
		time.Sleep(200 * time.Millisecond)
		return e.impl.Entries.Add(ctx, raffle.Entry{RaffleID: r.ID(), UserID: user, EnteredAt: now()})
	})
	<-held
	must(t, entered, "entry")
	must(t, <-drawn, "draw")
	got, err := e.impl.Raffles.Get(context.Background(), r.ID())
	must(t, err, "get")
	expectEqual(t, got.Result().Entries, 1, "entries the draw counted")
}
