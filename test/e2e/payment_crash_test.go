package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rushgate/rushgate/adapters/dataplatform"
	"github.com/rushgate/rushgate/adapters/gormdb"
	"github.com/rushgate/rushgate/adapters/memory/memorytest"
	"github.com/rushgate/rushgate/adapters/system"
	"github.com/rushgate/rushgate/application/payment"
	"github.com/rushgate/rushgate/domain/commerce/catalog"
	"github.com/rushgate/rushgate/domain/commerce/coupon"
	"github.com/rushgate/rushgate/domain/commerce/order"
	"github.com/rushgate/rushgate/domain/commerce/wallet"
	"github.com/rushgate/rushgate/domain/outbox"
	"github.com/rushgate/rushgate/ports"
	"github.com/rushgate/rushgate/test/testenv"
)

var errCrash = errors.New("injected crash")

// crashingWallets fails Apply, the balance's write, after the stock was deducted.
type crashingWallets struct{ ports.WalletRepository }

func (crashingWallets) Apply(context.Context, *wallet.Account, ...wallet.Entry) error {
	return errCrash
}

// crashingOutbox fails the last write of a payment.
type crashingOutbox struct{ ports.OutboxRepository }

func (crashingOutbox) Add(context.Context, ...outbox.Message) error { return errCrash }

// crashingStock fails the stock's deduction, after the balance was read and decided.
type crashingStock struct{ ports.StockRepository }

func (crashingStock) Deduct(context.Context, string, int64, int64) error { return errCrash }

// storages are the transactional storages a use case runs on: memory and fresh Postgres and
// MySQL databases.
var storages = []struct {
	name string
	open func(t *testing.T) ports.Stores
}{
	{"memory", func(*testing.T) ports.Stores { return memorytest.New().Stores }},
	{"postgres", func(t *testing.T) ports.Stores { return sqlStoresOn(t, testenv.Postgres(t)) }},
	{"mysql", func(t *testing.T) ports.Stores { return sqlStoresOn(t, testenv.MySQL(t)) }},
}

func sqlStoresOn(t *testing.T, database testenv.Database) ports.Stores {
	ctx := context.Background()
	db, err := gormdb.Open(ctx, database.URL, testenv.DBOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := gormdb.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	return gormdb.NewStores(db)
}

// paymentService is the payment use case on stores with an in-process guard.
func paymentService(stores ports.Stores) *payment.Service {
	env := memorytest.New(memorytest.WithStores(stores), memorytest.WithClock(system.Clock{}, system.Sleeper{}))
	return payment.NewService(payment.Deps{Tx: stores.Tx, Orders: stores.Orders, Products: stores.Products,
		Stock: stores.Stock, Wallets: stores.Wallets, UserCoupons: stores.UserCoupons, Outbox: stores.Outbox,
		Messages: dataplatform.Encoder{}, Guard: env.Guard, Clock: env.Clock, IDs: system.UUIDs{}}, payment.Config{})
}

// shop is one user with points, a held coupon and a PENDING order of two units using it.
type shop struct {
	userID, productID, couponID string
	order                       *order.Order
}

func openShop(t *testing.T, stores ports.Stores, userID string) shop {
	t.Helper()
	ctx := context.Background()
	ids, now := system.UUIDs{}, system.Clock{}.Now()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	p, err := catalog.NewProduct(ids.NewID(), "crash", 1000, now)
	must(err)
	stock, err := catalog.NewStock(p.ID(), 10)
	must(err)
	must(stores.Products.Create(ctx, p, stock))
	a, opening, err := wallet.Open(userID, 5000, ids.NewID(), now)
	must(err)
	must(stores.Tx.InTx(ctx, func(ctx context.Context) error { return stores.Wallets.Create(ctx, a, opening) }))
	c, err := coupon.New(ids.NewID(), "crash 10%", 10, 5, now.Add(time.Hour), now)
	must(err)
	must(stores.Coupons.Create(ctx, c))
	must(stores.UserCoupons.Add(ctx, c.Issue(ids.NewID(), userID, now)))
	o, err := order.Place(ids.NewID(), userID, []order.CartLine{{CartItem: order.RebuildCartItem(ids.NewID(), ids.NewID(), p.ID(), 2, now),
		Name: p.Name(), UnitPrice: p.Price(), Stock: 10}}, order.Discount{CouponID: c.ID(), Rate: 10}, now)
	must(err)
	must(stores.Orders.Create(ctx, o))
	return shop{userID: userID, productID: p.ID(), couponID: c.ID(), order: o}
}

// state is everything a payment writes, as the stores hold it.
func (sh shop) state(t *testing.T, stores ports.Stores) string {
	t.Helper()
	ctx := context.Background()
	o, err := stores.Orders.Get(ctx, sh.order.ID())
	if err != nil {
		t.Fatal(err)
	}
	a, err := stores.Wallets.Get(ctx, sh.userID)
	if err != nil {
		t.Fatal(err)
	}
	sum, entries, err := stores.Wallets.Totals(ctx, sh.userID)
	if err != nil {
		t.Fatal(err)
	}
	_, stock, err := stores.Products.Get(ctx, sh.productID)
	if err != nil {
		t.Fatal(err)
	}
	movements, err := stores.Stock.Movements(ctx, sh.productID)
	if err != nil {
		t.Fatal(err)
	}
	held, err := stores.UserCoupons.Get(ctx, sh.userID, sh.couponID)
	if err != nil {
		t.Fatal(err)
	}
	messages, _, err := stores.Outbox.List(ctx, "", "", 500)
	if err != nil {
		t.Fatal(err)
	}
	ofOrder := 0
	for _, m := range messages {
		if strings.Contains(string(m.Payload), sh.order.ID()) {
			ofOrder++
		}
	}
	markers, err := stores.Markers.Find(ctx, []ports.IdempotencyKey{{Scope: sh.userID, Key: "crash"}})
	if err != nil {
		t.Fatal(err)
	}
	return fmtState(o.Status(), a.Balance(), sum, entries, stock.Quantity(), stock.Version(), len(movements), held.Status(),
		ofOrder, len(markers))
}

func fmtState(args ...any) string { return fmt.Sprintln(args...) }

// TestPayment_ACrashMidTransactionLeavesNoTrace: a payment whose transaction fails after some of
// its writes (the stock deducted, then the balance's write fails; or the last write, the outbox
// message, fails; or the deduction itself fails) leaves nothing of it visible: the order PENDING,
// balance and ledger, stock and history, coupon, outbox and idempotency marker as before. The
// same key then pays once.
func TestPayment_ACrashMidTransactionLeavesNoTrace(t *testing.T) {
	crashes := []struct {
		name  string
		crash func(ports.Stores) ports.Stores
	}{
		{"balance write after the stock deduction", func(s ports.Stores) ports.Stores {
			s.Wallets = crashingWallets{s.Wallets}
			return s
		}},
		{"outbox write, the last one", func(s ports.Stores) ports.Stores { s.Outbox = crashingOutbox{s.Outbox}; return s }},
		{"stock deduction", func(s ports.Stores) ports.Stores { s.Stock = crashingStock{s.Stock}; return s }},
	}
	for _, storage := range storages {
		t.Run(storage.name, func(t *testing.T) {
			stores := storage.open(t)
			for _, crash := range crashes {
				t.Run(crash.name, func(t *testing.T) {
					sh := openShop(t, stores, "crasher-"+strings.ReplaceAll(crash.name, " ", "-")[:12])
					before := sh.state(t, stores)
					cmd := payment.PayCommand{OrderID: sh.order.ID(), UserID: sh.userID, IdempotencyKey: "crash"}
					if _, err := paymentService(crash.crash(stores)).Pay(context.Background(), cmd); !errors.Is(err, errCrash) {
						t.Fatalf("payment with a crash: %v", err)
					}
					if after := sh.state(t, stores); after != before {
						t.Fatalf("a crashed payment left a trace:\nbefore%s\nafter %s", before, after)
					}
					res, err := paymentService(stores).Pay(context.Background(), cmd)
					if err != nil || res.Value.PaidAmount != 1800 || res.Value.RemainingBalance != 3200 {
						t.Fatalf("payment after the crash: %+v, %v", res, err)
					}
					want := fmtState(order.StatusCompleted, int64(3200), int64(3200), 2, int64(8), int64(1), 1, coupon.Used, 1, 1)
					if got := sh.state(t, stores); got != want {
						t.Fatalf("after paying: %s, want %s", got, want)
					}
				})
			}
		})
	}
}
