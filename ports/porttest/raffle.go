package porttest

import (
	"context"
	"fmt"
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
// id is raffle.ErrNotFound; the draw's row lock fails outside a transaction; AddWhileOpen stores
// the users who have no entry and returns exactly them (one of racing statements for one user,
// none of them failing, also with overlapping batches) and any entries it answers for the
// users who had one are theirs, stores nothing for a raffle closed by
// time or status, or unknown; Existing finds exactly the entrants among the ids asked; a draw's
// lock waits for an entry statement holding the raffle, so the draw sees that entry, and an
// entry statement that waited for a draw's close stores nothing; SaveClosing writes over an
// OPEN raffle only and SaveDrawn over a CLOSING one, so of racing draws one writes; UserIDs
// pages through the entrants in id order; Due and ForProduct find what they say.
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
		{"Entry/AddSkipsTheEnteredAndStoresTheRest", testEntryAddWithExistingPair},
		{"Entry/ConcurrentAddsStoreEachUserOnce", testEntryConcurrentAdds},
		{"Entry/AddToAClosedOrUnknownRaffleStoresNothing", testEntryClosedOrUnknownRaffle},
		{"Entry/DrawWaitsForAnEntryHoldingTheRaffle", testEntryDrawWaitsForEntry},
		{"Entry/AnEntryWaitingForTheCloseStoresNothing", testEntryWaitingForTheClose},
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

// enterRaffle stores the users' entries at at and returns those it stored, sorted. Each entry it
// answers for a user who had one must be that user's stored entry.
func enterRaffle(ctx context.Context, t *testing.T, b RaffleBackend, raffleID string, at time.Time, users ...string) []string {
	t.Helper()
	stored, entered, err := b.Entries.AddWhileOpen(ctx, raffleID, at, users)
	must(t, err, "add entries")
	for userID, answered := range entered {
		expectEqual(t, slices.Contains(users, userID) && !slices.Contains(stored, userID), true,
			"an entry answered for a user of the batch it did not store: "+userID)
		had, err := b.Entries.Get(ctx, raffleID, userID)
		must(t, err, "get an answered entry")
		expectEqual(t, answered.RaffleID == had.RaffleID && answered.UserID == had.UserID && answered.EnteredAt.Equal(had.EnteredAt),
			true, "the entry answered for "+userID+" is the stored one")
	}
	slices.Sort(stored)
	return stored
}

// sorted is users sorted, for comparing with what enterRaffle returns.
func sorted(users ...string) []string {
	users = slices.Clone(users)
	slices.Sort(users)
	return users
}

func testRaffleLocksOutsideTx(t *testing.T, e env[RaffleBackend]) {
	r := newStoredRaffle(t, e.impl, 1, now().Add(time.Hour), "")
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
	enterRaffle(ctx, t, e.impl, r.ID(), now(), users...)
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
	enterRaffle(context.Background(), t, e.impl, r.ID(), now(), newUserID())
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
	expectEqual(t, slices.Equal(enterRaffle(ctx, t, e.impl, r.ID(), first.EnteredAt, first.UserID), []string{first.UserID}), true, "stored first")
	expectEqual(t, slices.Equal(enterRaffle(ctx, t, e.impl, r.ID(), second.EnteredAt, second.UserID), []string{second.UserID}), true,
		"stored second")

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
	want := sorted(first.UserID, second.UserID)
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
	first, at := newUserID(), now()
	enterRaffle(ctx, t, e.impl, r.ID(), at, first)
	newcomers := []string{newUserID(), newUserID()}
	// The batch names the entered user and a newcomer twice.
	stored := enterRaffle(ctx, t, e.impl, r.ID(), at.Add(time.Minute), newcomers[0], first, newcomers[1], newcomers[0])
	expectEqual(t, slices.Equal(stored, sorted(newcomers...)), true, "stored of a batch with an entered user")
	got, err := e.impl.Entries.Get(ctx, r.ID(), first)
	must(t, err, "get")
	expectEqual(t, got.EnteredAt.Equal(at), true, "the first entry stays")
	n, err := e.impl.Entries.Count(ctx, r.ID())
	must(t, err, "count")
	expectEqual(t, n, 3, "stored entries")
	expectEqual(t, len(enterRaffle(ctx, t, e.impl, r.ID(), at.Add(2*time.Minute), first, newcomers[1])), 0, "stored of a batch of the entered")
}

// testEntryConcurrentAdds: statements racing to enter one user, and batches overlapping in
// every order, each from its own instance: every user is stored by exactly one of them, and
// none fails (no deadlock between overlapping batches, no duplicate error).
func testEntryConcurrentAdds(t *testing.T, e env[RaffleBackend]) {
	r := newStoredRaffle(t, e.impl, 1, now().Add(time.Hour), "")
	users := []string{newUserID(), newUserID(), newUserID(), newUserID()}
	const racers = 8
	instances := make([]RaffleBackend, racers)
	for i := range instances {
		instances[i] = e.open(t)
	}
	stored := make([][]string, racers)
	errs := startTogether(racers, func(i int) error {
		batch := slices.Clone(users)
		if i%2 == 1 {
			slices.Reverse(batch)
		}
		batch = batch[i%3:] // overlapping batches of different sizes
		var err error
		stored[i], _, err = instances[i].Entries.AddWhileOpen(context.Background(), r.ID(), now(), batch)
		return err
	})
	storedBy := map[string]int{}
	for i, err := range errs {
		must(t, err, "racing add")
		for _, u := range stored[i] {
			storedBy[u]++
		}
	}
	for _, u := range users {
		expectEqual(t, storedBy[u], 1, "statements that stored "+u)
	}
	n, err := e.impl.Entries.Count(context.Background(), r.ID())
	must(t, err, "count")
	expectEqual(t, n, len(users), "stored entries")
}

func testEntryClosedOrUnknownRaffle(t *testing.T, e env[RaffleBackend]) {
	ctx := context.Background()
	closesAt := now().Add(time.Hour)
	r := newStoredRaffle(t, e.impl, 1, closesAt, "")
	expectEqual(t, len(enterRaffle(ctx, t, e.impl, r.ID(), closesAt, newUserID())), 0, "stored at closesAt")
	expectEqual(t, len(enterRaffle(ctx, t, e.impl, r.ID(), closesAt.Add(time.Second), newUserID())), 0, "stored after closesAt")
	closing := newStoredRaffle(t, e.impl, 1, closesAt, "")
	must(t, closing.Close(closesAt), "close")
	must(t, e.impl.Raffles.SaveClosing(ctx, closing), "save closing")
	expectEqual(t, len(enterRaffle(ctx, t, e.impl, closing.ID(), now(), newUserID())), 0, "stored in a closing raffle before closesAt")
	for _, id := range []string{r.ID(), closing.ID()} {
		n, err := e.impl.Entries.Count(ctx, id)
		must(t, err, "count")
		expectEqual(t, n, 0, "entries of a closed raffle")
	}
	expectEqual(t, len(enterRaffle(ctx, t, e.impl, randomID(), now(), newUserID())), 0, "stored in an unknown raffle")
}

// testEntryDrawWaitsForEntry: an entry statement holding the raffle's row (its transaction not
// ended) commits before a draw that started meanwhile reads the entrants, so the draw counts it.
func testEntryDrawWaitsForEntry(t *testing.T, e env[RaffleBackend]) {
	r := newStoredRaffle(t, e.impl, 5, now().Add(time.Hour), "")
	user := newUserID()
	drawer := e.open(t)
	drawn := make(chan error, 1)
	entered := e.impl.Tx.InTx(context.Background(), func(ctx context.Context) error {
		stored, _, err := e.impl.Entries.AddWhileOpen(ctx, r.ID(), now(), []string{user})
		if err != nil || len(stored) != 1 {
			return fmt.Errorf("entry stored %v: %w", stored, err)
		}
		go func() { drawn <- drawStored(context.Background(), drawer, r.ID()) }()
		// Give the draw time to overtake this entry if its lock does not wait for it.
		time.Sleep(200 * time.Millisecond)
		return nil
	})
	must(t, entered, "entry")
	must(t, <-drawn, "draw")
	got, err := e.impl.Raffles.Get(context.Background(), r.ID())
	must(t, err, "get")
	expectEqual(t, got.Result().Entries, 1, "entries the draw counted")
}

// testEntryWaitingForTheClose: an entry statement sent while a draw's close holds the raffle's
// row (its transaction not ended) waits for it and then stores nothing, though the time it
// enters at is before closesAt; the draw counts no entry.
func testEntryWaitingForTheClose(t *testing.T, e env[RaffleBackend]) {
	closesAt := now().Add(time.Hour)
	r := newStoredRaffle(t, e.impl, 5, closesAt, "")
	entrant := e.open(t)
	type result struct {
		stored []string
		err    error
	}
	entered := make(chan result, 1)
	closed := e.impl.Tx.InTx(context.Background(), func(ctx context.Context) error {
		locked, err := e.impl.Raffles.GetForDraw(ctx, r.ID())
		if err != nil {
			return err
		}
		if err := locked.Close(closesAt); err != nil {
			return err
		}
		if err := e.impl.Raffles.SaveClosing(ctx, locked); err != nil {
			return err
		}
		go func() {
			stored, _, err := entrant.Entries.AddWhileOpen(context.Background(), r.ID(), now(), []string{newUserID()})
			entered <- result{stored, err}
		}()
		// Give the entry time to overtake the close if its lock does not wait for it.
		time.Sleep(200 * time.Millisecond)
		return nil
	})
	must(t, closed, "close")
	got := <-entered
	must(t, got.err, "entry")
	expectEqual(t, len(got.stored), 0, "entries stored after waiting for the close")
	must(t, drawStored(context.Background(), e.impl, r.ID()), "draw")
	drawn, err := e.impl.Raffles.Get(context.Background(), r.ID())
	must(t, err, "get")
	expectEqual(t, drawn.Result().Entries, 0, "entries the draw counted")
}
