package raffle_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/adapters/system"
	appraffle "github.com/rushgate/rushgate/application/raffle"
	"github.com/rushgate/rushgate/domain/commerce/catalog"
	"github.com/rushgate/rushgate/domain/draw"
	"github.com/rushgate/rushgate/domain/raffle"
	"github.com/rushgate/rushgate/ports"
	"github.com/rushgate/rushgate/test/testkit"
)

// fixture is one database and clock shared by every instance of the service a test starts, as
// several servers share one database.
type fixture struct {
	db    *memory.Database
	clock *memory.Clock
}

func newFixture() fixture {
	return fixture{db: memory.NewDatabase(), clock: memory.NewClock(time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC))}
}

// instance is a service on the fixture's database, its raffle repository wrapped by wrap when
// given.
func (f fixture) instance(wrap func(ports.RaffleRepository) ports.RaffleRepository) *appraffle.Service {
	stores := memory.NewRaffleStores(f.db)
	if wrap != nil {
		stores.Raffles = wrap(stores.Raffles)
	}
	return appraffle.NewService(appraffle.Deps{Tx: f.db, Raffles: stores.Raffles, Entries: stores.Entries,
		Products: memory.NewCommerceStores(f.db).Products, Clock: f.clock, IDs: system.UUIDs{}})
}

// product stores a product for raffles to name and returns its id.
func (f fixture) product(t *testing.T) string {
	t.Helper()
	id := uuid.NewString()
	p, err := catalog.NewProduct(id, "limited sneaker", 1000, f.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	stock, err := catalog.NewStock(id, 10)
	if err != nil {
		t.Fatal(err)
	}
	if err := memory.NewCommerceStores(f.db).Products.Create(context.Background(), p, stock); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestCreate_RefusesAProductThatDoesNotExist: a raffle is the permission to buy its product, so
// one naming no stored product is refused as PRODUCT_NOT_FOUND and nothing is stored.
func TestCreate_RefusesAProductThatDoesNotExist(t *testing.T) {
	f := newFixture()
	svc := f.instance(nil)
	_, err := svc.Create(context.Background(), appraffle.CreateCommand{Name: "ghost", Winners: 1,
		ClosesAt: f.clock.Now().Add(time.Hour), ProductID: uuid.NewString()})
	if !errors.Is(err, catalog.ErrProductNotFound) {
		t.Fatalf("create for an unknown product: %v, want catalog.ErrProductNotFound", err)
	}
	if due, err := memory.NewRaffleStores(f.db).Raffles.Due(context.Background(), f.clock.Now().Add(2*time.Hour), 10); err != nil || len(due) != 0 {
		t.Fatalf("raffles stored: %v, %v", due, err)
	}
	f.create(t, svc, 1, f.product(t))
}

func (f fixture) create(t *testing.T, svc *appraffle.Service, winners int, productID string) appraffle.View {
	t.Helper()
	v, err := svc.Create(context.Background(), appraffle.CreateCommand{Name: "launch", Winners: winners,
		ClosesAt: f.clock.Now().Add(time.Hour), ProductID: productID})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestEnter_StampedeAcrossTheCloseAndTheDraw: users enter, several times each, from several
// instances while the clock passes closesAt and instances race to draw. Every entry answered
// 201 or 200 is drawn from, each user once; every later one is RAFFLE_CLOSED; one instance
// draws; exactly `winners` win.
func TestEnter_StampedeAcrossTheCloseAndTheDraw(t *testing.T) {
	f := newFixture()
	instances := []*appraffle.Service{f.instance(nil), f.instance(nil), f.instance(nil)}
	const users, tries, winners = 200, 3, 7
	v := f.create(t, instances[0], winners, "")

	var (
		mu       sync.Mutex
		accepted = map[string]bool{}
		created  = map[string]int{}
		answered atomic.Int32
		closing  sync.Once
		draws    atomic.Int32
		wg       sync.WaitGroup
	)
	// Once a quarter of the entries are in, the clock passes closesAt and every instance draws,
	// racing the rest.
	closeAndDraw := func() {
		f.clock.Advance(time.Hour)
		for _, svc := range instances {
			wg.Go(func() {
				drawn, err := svc.DrawDue(context.Background())
				if err != nil {
					t.Error(err)
				}
				draws.Add(int32(drawn))
			})
		}
	}
	for u := range users {
		for try := range tries {
			wg.Go(func() {
				user := fmt.Sprint("user-", u)
				entry, isNew, err := instances[(u+try)%len(instances)].Enter(context.Background(), v.ID, user)
				if answered.Add(1) == users*tries/4 {
					closing.Do(closeAndDraw)
				}
				mu.Lock()
				defer mu.Unlock()
				switch {
				case errors.Is(err, raffle.ErrClosed):
				case err != nil:
					t.Errorf("%s: %v", user, err)
				default:
					accepted[entry.UserID] = true
					if isNew {
						created[entry.UserID]++
					}
				}
			})
		}
	}
	wg.Wait()
	if _, err := instances[0].DrawDue(context.Background()); err != nil {
		t.Fatal(err)
	}

	if draws.Load() != 1 {
		t.Fatalf("%d instances drew the raffle", draws.Load())
	}
	for user, n := range created {
		if n != 1 {
			t.Errorf("%s was entered %d times", user, n)
		}
	}
	got, err := instances[1].Get(context.Background(), v.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != "DRAWN" || got.Entries != len(accepted) || len(created) != len(accepted) {
		t.Fatalf("drawn from %d entries (%s); %d accepted, %d created", got.Entries, got.Status, len(accepted), len(created))
	}
	if _, _, err := instances[0].Enter(context.Background(), v.ID, "late"); !errors.Is(err, raffle.ErrClosed) {
		t.Fatalf("an entry after the draw: %v", err)
	}
	won := 0
	for user := range accepted {
		s, err := instances[2].Standing(context.Background(), v.ID, user)
		if err != nil {
			t.Fatal(err)
		}
		if s.Status == "won" {
			won++
		}
	}
	if won != min(winners, len(accepted)) {
		t.Fatalf("%d won, want %d", won, winners)
	}
	seed, err := draw.ParseSeed(*got.Seed)
	if err != nil || seed.Hash() != v.SeedHash {
		t.Fatalf("the published seed does not match the commitment: %v", err)
	}
	order := draw.Order(seed, slices.Collect(mapsKeys(accepted)))
	if *got.CutoffTicket != order[winners-1].Ticket {
		t.Fatalf("cutoff %s, recomputed %s", *got.CutoffTicket, order[winners-1].Ticket)
	}
}

func mapsKeys(m map[string]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// crashBeforeCommit fails where the draw's result would be written, as a process killed
// between the selection and the commit would.
type crashBeforeCommit struct {
	ports.RaffleRepository
	crashes atomic.Int32
}

var errCrash = errors.New("crashed between the draw's selection and its commit")

func (c *crashBeforeCommit) SaveDrawn(context.Context, *raffle.Raffle) error {
	c.crashes.Add(1)
	return errCrash
}

// TestDraw_CrashBeforeCommitLeavesItDrawableOnce: a draw that dies after selecting the winners
// and before committing leaves the raffle shown OPEN, its seed unshown and entries refused; the
// next instance draws it, with the same seed, and nobody draws it again.
func TestDraw_CrashBeforeCommitLeavesItDrawableOnce(t *testing.T) {
	f := newFixture()
	crashing := &crashBeforeCommit{}
	dying := f.instance(func(r ports.RaffleRepository) ports.RaffleRepository {
		crashing.RaffleRepository = r
		return crashing
	})
	survivor := f.instance(nil)
	v := f.create(t, survivor, 1, "")
	for i := range 5 {
		if _, _, err := survivor.Enter(context.Background(), v.ID, fmt.Sprint("user-", i)); err != nil {
			t.Fatal(err)
		}
	}
	f.clock.Advance(time.Hour)

	if drawn, err := dying.DrawDue(context.Background()); !errors.Is(err, errCrash) || drawn != 0 {
		t.Fatalf("crashing draw: %d drawn, %v", drawn, err)
	}
	after, err := survivor.Get(context.Background(), v.ID)
	if err != nil || after.Status != "OPEN" || after.Seed != nil {
		t.Fatalf("after the crash: %+v, %v", after, err)
	}
	if _, _, err := survivor.Enter(context.Background(), v.ID, "late"); !errors.Is(err, raffle.ErrClosed) {
		t.Fatalf("an entry after the crashed draw: %v", err)
	}
	if drawn, err := survivor.DrawDue(context.Background()); err != nil || drawn != 1 {
		t.Fatalf("the next draw: %d drawn, %v", drawn, err)
	}
	for _, svc := range []*appraffle.Service{survivor, dying} {
		if drawn, err := svc.DrawDue(context.Background()); err != nil || drawn != 0 {
			t.Fatalf("a drawn raffle was drawn again: %d, %v", drawn, err)
		}
	}
	drawnView, err := survivor.Get(context.Background(), v.ID)
	if err != nil || drawnView.Status != "DRAWN" || drawnView.SeedHash != v.SeedHash || crashing.crashes.Load() != 1 {
		t.Fatalf("drawn: %+v, %v, %d crashes", drawnView, err, crashing.crashes.Load())
	}
}

// TestPurchaseLimit_AProductOnlyItsRafflesWinnersBuy: no raffle, anyone, unlimited; a raffle
// not drawn yet, nobody; drawn, its winner one unit in all and nobody else, entrant or not.
func TestPurchaseLimit_AProductOnlyItsRafflesWinnersBuy(t *testing.T) {
	f := newFixture()
	svc := f.instance(nil)
	ctx := context.Background()
	product, free := f.product(t), uuid.NewString()
	v := f.create(t, svc, 1, product)
	for _, u := range []string{"a", "b"} {
		if _, _, err := svc.Enter(ctx, v.ID, u); err != nil {
			t.Fatal(err)
		}
	}
	if _, limited, err := svc.PurchaseLimit(ctx, "a", free); limited || err != nil {
		t.Fatalf("a product no raffle names: limited %v, %v", limited, err)
	}
	if _, _, err := svc.PurchaseLimit(ctx, "a", product); !errors.Is(err, raffle.ErrNotWon) {
		t.Fatalf("before the draw: %v", err)
	}
	f.clock.Advance(time.Hour)
	if _, err := svc.DrawDue(ctx); err != nil {
		t.Fatal(err)
	}
	winner, loser := "a", "b"
	if s, _ := svc.Standing(ctx, v.ID, "a"); s.Status != "won" {
		winner, loser = "b", "a"
	}
	if limit, limited, err := svc.PurchaseLimit(ctx, winner, product); limit != 1 || !limited || err != nil {
		t.Fatalf("winner: %d, limited %v, %v", limit, limited, err)
	}
	for _, u := range []string{loser, "never-entered"} {
		if _, _, err := svc.PurchaseLimit(ctx, u, product); !errors.Is(err, raffle.ErrNotWon) {
			t.Fatalf("%s: %v", u, err)
		}
	}
}

// deadlineRecorder is an entry repository that records the deadline of each call's context. Its
// AddWhileOpen answers as Postgres's does, with the users it stored only, so a batch reads the
// others' entries in a second call.
type deadlineRecorder struct {
	ports.RaffleEntryRepository
	testkit.Deadlines
}

func (d *deadlineRecorder) AddWhileOpen(ctx context.Context, raffleID string, at time.Time, userIDs []string) ([]string, map[string]raffle.Entry, error) {
	d.Record(ctx, "AddWhileOpen")
	stored, _, err := d.RaffleEntryRepository.AddWhileOpen(ctx, raffleID, at, userIDs)
	return stored, nil, err
}

func (d *deadlineRecorder) Existing(ctx context.Context, raffleID string, userIDs []string) (map[string]raffle.Entry, error) {
	d.Record(ctx, "Existing")
	return d.RaffleEntryRepository.Existing(ctx, raffleID, userIDs)
}

// TestEnter_TheBatchsStoreCallsShareOneDeadlineFromTheEntrysArrival: an entry's wait for its
// batch and every store call of the batch (here the insert and the read of an existing entry)
// are bounded together by Timeout from the entry's arrival, not by a timeout each, so a
// slow database answers the entry within one timeout.
func TestEnter_TheBatchsStoreCallsShareOneDeadlineFromTheEntrysArrival(t *testing.T) {
	const timeout = time.Hour // never reached: only the deadlines are read
	f := newFixture()
	stores := memory.NewRaffleStores(f.db)
	recorder := &deadlineRecorder{RaffleEntryRepository: stores.Entries}
	svc := appraffle.NewService(appraffle.Deps{Tx: f.db, Raffles: stores.Raffles, Entries: recorder, Clock: f.clock,
		IDs: system.UUIDs{}, Timeout: timeout})
	v := f.create(t, svc, 1, "")
	if _, _, err := svc.Enter(context.Background(), v.ID, "returning"); err != nil {
		t.Fatal(err)
	}

	before := time.Now()
	if _, created, err := svc.Enter(context.Background(), v.ID, "returning"); err != nil || created {
		t.Fatalf("the second entry: created %v, %v", created, err)
	}
	recorder.AssertOneTimeoutFromArrival(t, timeout, before, time.Now(), "AddWhileOpen", "Existing")
}

// deadlineRaffles and deadlineProducts record the deadline of a raffle's insert and of a
// product's read.
type deadlineRaffles struct {
	ports.RaffleRepository
	*testkit.Deadlines
}

func (d deadlineRaffles) Create(ctx context.Context, r *raffle.Raffle) error {
	d.Record(ctx, "Raffles.Create")
	return d.RaffleRepository.Create(ctx, r)
}

type deadlineProducts struct {
	ports.ProductRepository
	*testkit.Deadlines
}

func (d deadlineProducts) Get(ctx context.Context, id string) (*catalog.Product, catalog.Stock, error) {
	d.Record(ctx, "Products.Get")
	return d.ProductRepository.Get(ctx, id)
}

// TestCreate_TheProductReadAndTheInsertShareOneTimeout: a raffle naming a product reads the
// product, then stores the raffle; both are bounded together by Timeout from the call's arrival,
// not by a timeout each, so a slow database answers the create within one timeout.
func TestCreate_TheProductReadAndTheInsertShareOneTimeout(t *testing.T) {
	const timeout = time.Hour // never reached: only the deadlines are read
	f := newFixture()
	stores := memory.NewRaffleStores(f.db)
	deadlines := &testkit.Deadlines{}
	svc := appraffle.NewService(appraffle.Deps{Tx: f.db, Raffles: deadlineRaffles{stores.Raffles, deadlines},
		Entries: stores.Entries, Products: deadlineProducts{memory.NewCommerceStores(f.db).Products, deadlines},
		Clock: f.clock, IDs: system.UUIDs{}, Timeout: timeout})
	productID := f.product(t)

	before := time.Now()
	if _, err := svc.Create(context.Background(), appraffle.CreateCommand{Name: "bounded", Winners: 1,
		ClosesAt: f.clock.Now().Add(time.Hour), ProductID: productID}); err != nil {
		t.Fatal(err)
	}
	deadlines.AssertOneTimeoutFromArrival(t, timeout, before, time.Now(), "Products.Get", "Raffles.Create")
}
