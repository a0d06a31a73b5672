package e2e

import (
	"context"
	"crypto/rand"
	"sync/atomic"
	"testing"

	"github.com/rushgate/rushgate/adapters/memory/memorytest"
	"github.com/rushgate/rushgate/adapters/system"
	apporder "github.com/rushgate/rushgate/application/order"
	"github.com/rushgate/rushgate/domain/commerce/order"
	"github.com/rushgate/rushgate/ports"
)

// beforeCartLock is a cart repository that runs a function, once, just before a cart is locked
// for an order: as if another request's transaction committed just then.
type beforeCartLock struct {
	ports.CartRepository
	armed atomic.Bool
	run   func()
}

func (c *beforeCartLock) GetForUpdate(ctx context.Context, userID string) (order.Cart, bool, error) {
	if c.armed.Swap(false) {
		c.run()
	}
	return c.CartRepository.GetForUpdate(ctx, userID)
}

// TestPlace_WithAKeyLosesNoUnitAddedBeforeTheCartIsLocked: an order placed with an
// Idempotency-Key, and a cart add that commits after the order's transaction began but before
// it locked the cart, lose no unit: the added line is in the order (read under the cart's lock)
// or left in the cart. On MySQL a transaction's plain reads see the snapshot of its first read;
// when that was the idempotency marker's, before the cart's lock, the order read the cart's
// lines as they were before the add and then emptied the cart, the added line with it.
func TestPlace_WithAKeyLosesNoUnitAddedBeforeTheCartIsLocked(t *testing.T) {
	for _, storage := range storages {
		t.Run(storage.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			stores := storage.open(t)
			carts := &beforeCartLock{CartRepository: stores.Carts}
			stores.Carts = carts
			shop := memorytest.NewShop(t, memorytest.WithStores(stores), memorytest.WithClock(system.Clock{}, system.Sleeper{}))
			user, first, added := "snapshot-"+rand.Text(), shop.Product(100, 10), shop.Product(200, 10)
			add := func(productID string) {
				// context.Background: the add is another request, in a transaction of its own.
				if _, err := shop.Orders.AddToCart(context.Background(), apporder.AddToCartCommand{UserID: user, ProductID: productID, Quantity: 1}); err != nil {
					t.Errorf("add %s: %v", productID, err)
				}
			}
			add(first)
			carts.run = func() { add(added) }
			carts.armed.Store(true)

			placed, err := shop.Orders.Place(ctx, apporder.PlaceCommand{UserID: user, IdempotencyKey: "k"})
			if err != nil {
				t.Fatal(err)
			}
			cart, err := shop.Orders.Cart(ctx, user)
			if err != nil {
				t.Fatal(err)
			}
			units := 0
			for _, item := range placed.Value.Items {
				if item.ProductID == added {
					units += item.Quantity
				}
			}
			for _, line := range cart.Items {
				if line.ProductID == added {
					units += line.Quantity
				}
			}
			if units != 1 {
				t.Fatalf("the unit added before the cart's lock: %d in the order %+v and the cart %+v, want 1", units, placed.Value.Items, cart.Items)
			}
		})
	}
}
