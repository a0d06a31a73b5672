package raffle_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/domain/draw"
	"github.com/rushgate/rushgate/domain/raffle"
)

var now = time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)

func newRaffle(t *testing.T, winners int) *raffle.Raffle {
	t.Helper()
	seed, err := draw.RandomSeed()
	if err != nil {
		t.Fatal(err)
	}
	r, err := raffle.New("r1", "launch", winners, now.Add(time.Hour), "", seed, now)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestNew_RefusesBadTerms(t *testing.T) {
	seed, _ := draw.RandomSeed()
	for name, build := range map[string]func() error{
		"no winners": func() error { _, err := raffle.New("r", "a", 0, now.Add(time.Hour), "", seed, now); return err },
		"too many": func() error {
			_, err := raffle.New("r", "a", raffle.MaxWinners+1, now.Add(time.Hour), "", seed, now)
			return err
		},
		"closes at once": func() error { _, err := raffle.New("r", "a", 1, now, "", seed, now); return err },
		"no name":        func() error { _, err := raffle.New("r", "", 1, now.Add(time.Hour), "", seed, now); return err },
	} {
		if err := build(); !errors.Is(err, domain.ErrValidation) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// closesAt is kept to the microsecond the databases store, in UTC: the answer to the create
// shows what every later read shows.
func TestNew_KeepsClosesAtToTheMicrosecond(t *testing.T) {
	seed, _ := draw.RandomSeed()
	given := now.Add(time.Hour + 123456789*time.Nanosecond).In(time.FixedZone("KST", 9*3600))
	r, err := raffle.New("r", "a", 1, given, "", seed, now)
	if err != nil {
		t.Fatal(err)
	}
	if want := now.Add(time.Hour + 123456*time.Microsecond); r.ClosesAt() != want {
		t.Fatalf("closesAt %v, want %v", r.ClosesAt(), want)
	}
}

func TestRaffle_EntriesUntilCloseThenOneDraw(t *testing.T) {
	r := newRaffle(t, 2)
	if err := r.CheckEntry(now.Add(59 * time.Minute)); err != nil {
		t.Fatalf("open: %v", err)
	}
	if err := r.CheckEntry(r.ClosesAt()); !errors.Is(err, raffle.ErrClosed) {
		t.Fatalf("at closesAt: %v", err)
	}
	if err := r.Close(now); !errors.Is(err, raffle.ErrNotDue) {
		t.Fatalf("close before closesAt: %v", err)
	}
	if _, err := r.Draw([]string{"a"}, r.ClosesAt()); !errors.Is(err, raffle.ErrNotDue) {
		t.Fatalf("draw before the close: %v", err)
	}
	if _, ok := r.PublishedSeed(); ok {
		t.Fatal("the seed is published before the draw")
	}
	if outcome, ticket := r.OutcomeOf("a"); outcome != raffle.OutcomeEntered || ticket != "" {
		t.Fatalf("before the draw: %s %q", outcome, ticket)
	}

	users := make([]string, 7)
	for i := range users {
		users[i] = fmt.Sprint("user-", i)
	}
	if err := r.Close(r.ClosesAt()); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := r.CheckEntry(now); !errors.Is(err, raffle.ErrClosed) {
		t.Fatalf("an entry into a closing raffle: %v", err)
	}
	won, err := r.Draw(users, r.ClosesAt())
	if err != nil || len(won) != 2 {
		t.Fatalf("draw: %d winners, %v", len(won), err)
	}
	order := draw.Order(r.Seed(), users)
	if won[0] != order[0] || won[1] != order[1] || r.Result().CutoffTicket != order[1].Ticket || r.Result().Entries != 7 {
		t.Fatalf("the winners are not the two smallest tickets: %+v, %+v", won, r.Result())
	}
	for i, e := range order {
		outcome, ticket := r.OutcomeOf(e.UserID)
		if want := map[bool]raffle.Outcome{true: raffle.OutcomeWon, false: raffle.OutcomeLost}[i < 2]; outcome != want || ticket != e.Ticket {
			t.Errorf("%s: %s %s, want %s %s", e.UserID, outcome, ticket, want, e.Ticket)
		}
	}
	if seed, ok := r.PublishedSeed(); !ok || seed != r.Seed().Hex() {
		t.Fatal("the seed is not published after the draw")
	}
	if _, err := r.Draw(users, r.ClosesAt()); !errors.Is(err, raffle.ErrNotDue) {
		t.Fatalf("second draw: %v", err)
	}
	if err := r.Close(r.ClosesAt()); !errors.Is(err, raffle.ErrNotDue) {
		t.Fatalf("closing a drawn raffle: %v", err)
	}
}

func TestPurchaseLimit(t *testing.T) {
	if _, err := raffle.PurchaseLimit(false); !errors.Is(err, raffle.ErrNotWon) {
		t.Errorf("loser: %v", err)
	}
	if limit, err := raffle.PurchaseLimit(true); limit != raffle.UnitsPerWinner || err != nil {
		t.Errorf("winner: %d, %v", limit, err)
	}
}
