package ports

import (
	"context"
	"time"

	"github.com/rushgate/rushgate/domain/commerce/catalog"
	"github.com/rushgate/rushgate/domain/commerce/order"
)

// ProductRepository stores products and their stock.
//
// Create inserts the product and its stock row together, all or none, also outside InTx. Get
// returns a product with its stock, or catalog.ErrProductNotFound for an unknown id.
type ProductRepository interface {
	Create(ctx context.Context, p *catalog.Product, s catalog.Stock) error
	Get(ctx context.Context, id string) (*catalog.Product, catalog.Stock, error)
}

// CartRepository stores carts and their items.
//
// GetOrCreateForUpdate must run inside TxRunner.InTx: it returns the user's cart, creating
// fresh (its id and time, for fresh.UserID) when the user has none, locks the cart's row until
// the transaction ends, and records addID, a fresh id of the adds the transaction makes, among
// the cart's recent adds: the ids of its RecentCartAdds latest committed lockers. Carts are
// UNIQUE per user: concurrent first calls for one user create one cart, and all of them return
// it. GetForUpdate does the same without creating: found is false when the user has no cart.
// Concurrent lockers of one cart run one after another, each seeing the previous one's committed
// writes, provided the lock is the transaction's first read (on MySQL, REPEATABLE READ, plain
// reads see the snapshot taken at the transaction's first plain read, which must not predate the
// lock); that lock is what makes a cart's read-modify-write (an add, an order) atomic.
//
// Lines returns the user's cart items joined with their products' names, current prices and
// stock, ordered by (AddedAt, ID); a user without a cart has none. PutItem inserts item, or,
// when the cart already holds a line of item.ProductID, sets that line's quantity, keeping its
// ID and AddedAt; an unknown product is catalog.ErrProductNotFound. Clear deletes every item of
// the cart.
//
// AddCommitted reports whether the cart of fresh.UserID records addID among its recent adds. It
// waits while a transaction holds the cart's lock or is creating the cart, and reads once that
// one has ended: a caller whose COMMIT's answer was lost (ErrCommitOutcomeUnknown) learns
// whether its transaction committed, unless RecentCartAdds later lockers have committed since.
// To wait for a transaction creating the cart, it may create fresh itself (on Postgres only the
// cart's unique key waits for a row not committed yet): an empty cart, as an order leaves, which
// Lines answers as none.
type CartRepository interface {
	GetOrCreateForUpdate(ctx context.Context, fresh order.Cart, addID string) (order.Cart, error)
	AddCommitted(ctx context.Context, fresh order.Cart, addID string) (bool, error)
	GetForUpdate(ctx context.Context, userID string) (cart order.Cart, found bool, err error)
	Lines(ctx context.Context, userID string) ([]order.CartLine, error)
	PutItem(ctx context.Context, item order.CartItem) error
	Clear(ctx context.Context, cartID string) error
}

// RecentCartAdds is how many of a cart's latest adds CartRepository records: a batch whose
// COMMIT's answer was lost finds its own among them unless that many batches of other instances
// committed on the cart before its read, which starts as soon as the connection is seen broken.
// An instance runs a cart's adds one batch at a time, each holding the cart's lock for some six
// round trips, so that takes sixteen such batches back to back: a herd on one cart from many
// instances. More would cost every add more bytes written (16 ids of 36 characters: about 600).
const RecentCartAdds = 16

// OrderRepository stores orders with their items.
//
// Create inserts the order and its items together, all or none, also outside InTx. Get returns
// the order with its items in the order they were placed, or order.ErrNotFound. GetForUpdate
// does the same but must run inside TxRunner.InTx and locks the order's row until that
// transaction ends: concurrent payments and cancels of one order run one after another, each
// seeing the previous one's committed status, also when its transaction read other rows before
// (the status is read under the lock, never from an older snapshot). MarkPaid turns a PENDING
// order COMPLETED at paidAt in one conditional statement, or returns order.ErrNotPayable,
// changing nothing, when it is unknown or not PENDING. MarkCancelled turns a PENDING order
// CANCELLED the same way, or returns order.ErrNotCancellable, changing nothing: of a concurrent
// MarkPaid and MarkCancelled of one order at most one succeeds.
//
// UnitsOrdered returns how many units of productID the user's PENDING and COMPLETED orders hold
// (a CANCELLED order holds none). Read in a transaction after CartRepository's lock of the
// user's cart, it counts every order committed before that lock was granted, whatever the
// transaction read before the lock: a placement that counts under the lock thus sees those
// placed before it.
//
// TopSelling returns up to limit products by units sold in COMPLETED orders paid at or after
// since, most units first (ties by product id), with their revenue (Σ line subtotals) and
// current names.
type OrderRepository interface {
	Create(ctx context.Context, o *order.Order) error
	Get(ctx context.Context, id string) (*order.Order, error)
	GetForUpdate(ctx context.Context, id string) (*order.Order, error)
	MarkPaid(ctx context.Context, id string, paidAt time.Time) error
	MarkCancelled(ctx context.Context, id string) error
	UnitsOrdered(ctx context.Context, userID, productID string) (int, error)
	TopSelling(ctx context.Context, since time.Time, limit int) ([]order.Sales, error)
}

// StockRepository changes stock on hand and keeps its history.
//
// Deduct takes n units of productID in one optimistic statement, UPDATE stock SET quantity =
// quantity - n, version = version + 1 WHERE product_id = ? AND version = ? AND quantity >= n: it
// applies only when the stored version still equals version and the stock still covers n, and
// otherwise changes nothing and returns ErrVersionConflict (the caller re-reads and decides
// again in a fresh transaction). Of concurrent Deduct calls with one version at most one
// applies. AddMovements inserts stock history rows in one statement, all or none; Movements
// returns a product's history, oldest first.
type StockRepository interface {
	Deduct(ctx context.Context, productID string, version, n int64) error
	AddMovements(ctx context.Context, movements ...catalog.Movement) error
	Movements(ctx context.Context, productID string) ([]catalog.Movement, error)
}
