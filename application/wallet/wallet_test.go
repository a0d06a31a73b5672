package wallet_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/adapters/memory/memorytest"
	"github.com/rushgate/rushgate/adapters/system"
	"github.com/rushgate/rushgate/application/guard"
	"github.com/rushgate/rushgate/application/guard/guardtest"
	appwallet "github.com/rushgate/rushgate/application/wallet"
	"github.com/rushgate/rushgate/domain/commerce"
	"github.com/rushgate/rushgate/domain/commerce/wallet"
	"github.com/rushgate/rushgate/ports"
	"github.com/rushgate/rushgate/test/testkit"
)

// fixture is a wallet service on memory (memorytest.Env).
type fixture struct {
	*memorytest.Env
	svc    *appwallet.Service
	queues *guardtest.Queues
}

// newFixture builds the service on memory in real time, unless opts say otherwise.
func newFixture(t *testing.T, opts ...memorytest.Option) *fixture {
	t.Helper()
	queues := guardtest.NewQueues()
	env := memorytest.New(append([]memorytest.Option{
		memorytest.WithClock(system.Clock{}, system.Sleeper{}),
		memorytest.WithGuard(guard.Config{BaseDelay: time.Millisecond, MaxRetries: 10}, guard.WithObserver(queues)),
	}, opts...)...)
	return &fixture{Env: env, queues: queues, svc: appwallet.NewService(appwallet.Deps{Tx: env.Stores.Tx,
		Wallets: env.Stores.Wallets, Guard: env.Guard, Clock: env.Clock, IDs: system.UUIDs{}}, appwallet.Config{})}
}

func (f *fixture) createUser(t *testing.T, id string, balance int64) {
	t.Helper()
	if _, err := f.svc.CreateUser(context.Background(), appwallet.CreateUserCommand{ID: id, Balance: balance}); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) charge(userID string, amount int64, key string) (guard.Result[appwallet.ChargeResult], error) {
	return f.svc.Charge(context.Background(), appwallet.ChargeCommand{UserID: userID, Amount: amount, IdempotencyKey: key})
}

// assertBalance checks the stored balance and that it equals the sum of the user's ledger.
func (f *fixture) assertBalance(t *testing.T, userID string, want int64, entries int) {
	t.Helper()
	b, err := f.svc.GetBalance(context.Background(), userID)
	if err != nil {
		t.Fatal(err)
	}
	sum, n, err := f.Stores.Wallets.Totals(context.Background(), userID)
	if err != nil {
		t.Fatal(err)
	}
	if b.Balance != want || sum != want || n != entries {
		t.Fatalf("balance %d, ledger sum %d over %d entries; want %d over %d", b.Balance, sum, n, want, entries)
	}
}

func TestCreateUser_OpensTheBalanceAsALedgerEntry(t *testing.T) {
	f := newFixture(t)
	f.createUser(t, "alice", 5000)
	f.assertBalance(t, "alice", 5000, 1)
	for _, tc := range []struct {
		id      string
		balance int64
		code    string
	}{
		{"alice", 1, "USER_EXISTS"},
		{"bob", -1, "VALIDATION_FAILED"},
		{"bob", commerce.MaxAmount + 1, "VALIDATION_FAILED"},
		{"", 1, "VALIDATION_FAILED"},
		{"has space", 1, "VALIDATION_FAILED"},
	} {
		_, err := f.svc.CreateUser(context.Background(), appwallet.CreateUserCommand{ID: tc.id, Balance: tc.balance})
		if guardtest.Code(err) != tc.code {
			t.Errorf("create %q with %d: %v, want %s", tc.id, tc.balance, err, tc.code)
		}
	}
	f.assertBalance(t, "alice", 5000, 1)
	if _, err := f.svc.GetBalance(context.Background(), "bob"); !errors.Is(err, wallet.ErrUserNotFound) {
		t.Fatalf("bob: %v", err)
	}
}

func TestCharge_AddsTheAmountAndAnswersTheNewBalance(t *testing.T) {
	clock := memory.NewClock(memorytest.Start)
	f := newFixture(t, memorytest.WithClock(clock, system.Sleeper{}))
	f.createUser(t, "alice", 500)
	res, err := f.charge("alice", 100, "k1")
	want := appwallet.ChargeResult{UserID: "alice", Balance: 600, ChargedAmount: 100, ChargedAt: clock.Now()}
	if err != nil || res.Outcome != guard.OutcomeDone || res.Value != want || res.Replayed {
		t.Fatalf("charge: %+v, %v", res, err)
	}
	f.assertBalance(t, "alice", 600, 2)
}

func TestCharge_BadAmountsAndUnknownUsersChangeNothing(t *testing.T) {
	f := newFixture(t)
	f.createUser(t, "alice", 700)
	for _, tc := range []struct {
		user   string
		amount int64
		key    string
		code   string
	}{
		{"alice", 0, "k", "INVALID_AMOUNT"},
		{"alice", -5, "k", "INVALID_AMOUNT"},
		{"alice", appwallet.DefaultChargeMax + 1, "k", "INVALID_AMOUNT"},
		{"alice", 10, "", "IDEMPOTENCY_KEY_REQUIRED"},
		{"ghost", 10, "k", "USER_NOT_FOUND"},
		{"", 10, "k", "VALIDATION_FAILED"},
	} {
		if _, err := f.charge(tc.user, tc.amount, tc.key); guardtest.Code(err) != tc.code {
			t.Errorf("charge %q %d: %v, want %s", tc.user, tc.amount, err, tc.code)
		}
	}
	f.assertBalance(t, "alice", 700, 1)
	// The rejected key was dropped: the same key may charge now.
	if _, err := f.charge("alice", 1, "k"); err != nil {
		t.Fatal(err)
	}
	f.assertBalance(t, "alice", 701, 2)
}

func TestCharge_ABalanceBeyondTheMaximumIsRefusedAlone(t *testing.T) {
	f := newFixture(t)
	f.createUser(t, "rich", commerce.MaxAmount-10)
	if _, err := f.charge("rich", 11, "over"); !errors.Is(err, commerce.ErrAmountOverflow) {
		t.Fatalf("overflow: %v", err)
	}
	f.assertBalance(t, "rich", commerce.MaxAmount-10, 1)
	if _, err := f.charge("rich", 10, "fits"); err != nil {
		t.Fatal(err)
	}
	f.assertBalance(t, "rich", commerce.MaxAmount, 2)
}

func TestCharge_TheSameKeyChargesOnceAndAnotherPayloadIsRefused(t *testing.T) {
	f := newFixture(t)
	f.createUser(t, "alice", 0)
	first, err := f.charge("alice", 250, "once")
	if err != nil {
		t.Fatal(err)
	}
	again, err := f.charge("alice", 250, "once")
	if err != nil || !again.Replayed || again.Value != first.Value {
		t.Fatalf("replay: %+v, %v", again, err)
	}
	if _, err := f.charge("alice", 999, "once"); !errors.Is(err, guard.ErrKeyReused) {
		t.Fatalf("other payload: %v", err)
	}
	f.assertBalance(t, "alice", 250, 2)
}

// Charges of one user queue on balance:{userId} and are applied in batches; none is lost and
// the ledger matches.
func TestCharge_StampedeAddsExactlyAndBatches(t *testing.T) {
	f := newFixture(t)
	f.createUser(t, "herd", 1000)
	const n = 200
	errs := make([]error, n)
	testkit.StartTogether(n, func(i int) { _, errs[i] = f.charge("herd", 1000, fmt.Sprintf("k%d", i)) })
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	f.assertBalance(t, "herd", 1000+n*1000, n+1)
	if f.queues.LargestBatch() < 2 {
		t.Fatalf("the largest batch served %d charges: the stampede was never combined", f.queues.LargestBatch())
	}
}

// The charge and its marker commit together: a retry after the lease of the never-completed
// record is answered from the database with the first answer, and the balance moves once.
func TestCharge_ARetryAfterALostCompleteIsAnsweredFromTheDatabase(t *testing.T) {
	clock := memory.NewClock(memorytest.Start)
	var store *guardtest.LostCompletes
	f := newFixture(t, memorytest.WithClock(clock, system.Sleeper{}),
		memorytest.WithIdempotency(func(inner ports.IdempotencyStore) ports.IdempotencyStore {
			store = &guardtest.LostCompletes{IdempotencyStore: inner}
			return store
		}))
	f.createUser(t, "alice", 100)
	first, err := f.charge("alice", 40, "lost")
	// The guard retries a lost Complete in the background, so more than one may be lost by now.
	if err != nil || store.Lost() < 1 {
		t.Fatalf("first: %+v, %v, %d lost", first, err, store.Lost())
	}
	if _, err := f.charge("alice", 40, "lost"); !errors.Is(err, guard.ErrInProgress) {
		t.Fatalf("within the lease: %v", err)
	}
	clock.Advance(31 * time.Second) // the lease of the never-completed record ends
	again, err := f.charge("alice", 40, "lost")
	if err != nil || !again.Replayed || again.Value != first.Value {
		t.Fatalf("retry: %+v, %v; want the replay of %+v", again, err, first.Value)
	}
	f.assertBalance(t, "alice", 140, 2)
}
