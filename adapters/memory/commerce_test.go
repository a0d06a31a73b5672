package memory_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/uuid"

	"github.com/rushgate/rushgate/domain/commerce/catalog"
	"github.com/rushgate/rushgate/domain/commerce/order"
)

// A purchase limit's count of a user's units reads that user's orders, whatever the number of
// other users' orders (go test -run '^$' -bench UnitsOrdered ./adapters/memory/).
func BenchmarkUnitsOrdered_AmongOtherUsersOrders(b *testing.B) {
	for _, others := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("%d_other_orders", others), func(b *testing.B) {
			ctx := context.Background()
			s := newStore()
			product, err := catalog.NewProduct(uuid.NewString(), "limited", 100, epoch)
			if err != nil {
				b.Fatal(err)
			}
			stock, err := catalog.NewStock(product.ID(), 1_000_000)
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Products.Create(ctx, product, stock); err != nil {
				b.Fatal(err)
			}
			place := func(userID string) {
				item := order.RebuildCartItem(uuid.NewString(), uuid.NewString(), product.ID(), 1, epoch)
				line := order.CartLine{CartItem: item, Name: product.Name(), UnitPrice: 100, Stock: 1_000_000}
				o, err := order.Place(uuid.NewString(), userID, []order.CartLine{line}, order.Discount{}, epoch)
				if err != nil {
					b.Fatal(err)
				}
				if err := s.Orders.Create(ctx, o); err != nil {
					b.Fatal(err)
				}
			}
			for range others {
				place(uuid.NewString())
			}
			buyer := uuid.NewString()
			place(buyer)

			b.ResetTimer()
			for b.Loop() {
				if units, err := s.Orders.UnitsOrdered(ctx, buyer, product.ID()); err != nil || units != 1 {
					b.Fatalf("UnitsOrdered = %d, %v; want 1", units, err)
				}
			}
		})
	}
}
