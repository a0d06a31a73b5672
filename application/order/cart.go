// Package order holds the cart and order use cases: add to cart, read the cart, place an order
// from it and read an order. A cart's changes and an order's placement run under the cart's row
// lock, so concurrent adds never lose an increment, a cart's lines become one order at most, and
// a user's placements run one after another, each seeing the orders placed before.
// It depends on ports only.
package order

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	appcatalog "github.com/rushgate/rushgate/application/catalog"
	"github.com/rushgate/rushgate/application/guard/combine"
	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/domain/commerce"
	"github.com/rushgate/rushgate/domain/commerce/catalog"
	"github.com/rushgate/rushgate/domain/commerce/order"
	"github.com/rushgate/rushgate/ports"
)

// AddToCartCommand adds quantity units of a product to the user's cart.
type AddToCartCommand struct {
	UserID    string
	ProductID string
	Quantity  int
}

// CartItemView is a cart line after an add: Quantity is the line's new total, AddedAt when the
// product first entered the cart.
type CartItemView struct {
	CartItemID string
	ProductID  string
	Quantity   int
	AddedAt    time.Time
}

// maxAddBatch bounds how many adds of one cart one transaction serves.
const maxAddBatch = 64

// AddToCart adds the units to the user's cart, creating the cart on the first add. In
// one transaction under the cart's row lock it reads the cart's lines, raises the product's line
// or adds one, and checks that the stock covers the line's new quantity. Fails with
// catalog.ErrProductNotFound, catalog.InsufficientStock, or VALIDATION_FAILED for a quantity
// outside 1..order.MaxLineQuantity (also as the line's total) or a cart already holding
// order.MaxCartLines products, or, checked before the stock, with the purchase permissions'
// refusal of the line's new quantity (a raffle's prize: RAFFLE_NOT_WON, or more than one unit
// for its winner, counting the units the winner's orders hold).
//
// An add whose transaction's COMMIT answer was lost (ports.ErrCommitOutcomeUnknown) is answered
// as committed when the cart records its batch among its recent adds (committedAfterAll), and
// with 503 otherwise: the add takes no idempotency key, so a client retrying an add that did commit would
// add its units twice.
//
// Concurrent adds to one cart on this instance line up in process and are served in batches,
// one transaction each (addBatch): a herd on one cart then waits its turn in arrival order here
// instead of on the database's row lock, which Postgres does not grant in arrival order, and
// which a request could wait on past its database timeout behind dozens of others.
func (s *Service) AddToCart(ctx context.Context, cmd AddToCartCommand) (CartItemView, error) {
	if err := domain.ValidateUserID("userId", cmd.UserID); err != nil {
		return CartItemView{}, err
	}
	if err := appcatalog.ValidateProductID(cmd.ProductID); err != nil {
		return CartItemView{}, err
	}
	if err := order.ValidateQuantity(cmd.Quantity); err != nil {
		return CartItemView{}, err
	}
	return s.adding.Do(ctx, cmd.UserID, cmd)
}

// addBatch applies a batch of adds to one user's cart in arrival order, in one transaction under
// the cart's row lock: one read of the lines, each add checked against the lines as the adds
// before it left them, one write per line that changed. A rejected add is answered alone and
// changes nothing; a failure to reach a dependency fails the batch. The cart's lock records a
// fresh id of the batch, addID, among the cart's recent adds, which tells whether a commit whose
// answer was lost committed.
func (s *Service) addBatch(ctx context.Context, userID string, batch []AddToCartCommand) ([]combine.Answer[CartItemView], error) {
	answers := make([]combine.Answer[CartItemView], len(batch))
	addID := s.ids.NewID()
	var changed []string // product ids of the lines to write, in the order they first changed
	err := s.tx.InTx(ctx, func(ctx context.Context) error {
		clear(answers)
		changed = changed[:0]
		// The cart's lock comes first: on MySQL a transaction's plain reads see the snapshot of
		// its first one, which must not predate the writes of the add that held the lock before.
		now := s.clock.Now()
		fresh, err := order.NewCart(s.ids.NewID(), userID, now)
		if err != nil {
			return err
		}
		cart, err := s.carts.GetOrCreateForUpdate(ctx, fresh, addID)
		if err != nil {
			return fmt.Errorf("lock cart: %w", err)
		}
		lines, err := s.carts.Lines(ctx, userID)
		if err != nil {
			return fmt.Errorf("read cart: %w", err)
		}
		products := map[string]productNow{} // each product read once: its stock is not locked
		for i, cmd := range batch {
			line, err := s.addLine(ctx, cart, lines, products, cmd, now)
			if _, rejected := domain.AsError(err); rejected {
				answers[i].Err = err
				continue
			}
			if err != nil {
				return err
			}
			at := slices.IndexFunc(lines, func(l order.CartLine) bool { return l.ProductID() == cmd.ProductID })
			if at < 0 {
				lines = append(lines, line)
			} else {
				lines[at] = line
			}
			if !slices.Contains(changed, cmd.ProductID) {
				changed = append(changed, cmd.ProductID)
			}
			item := line.CartItem
			answers[i].Value = CartItemView{CartItemID: item.ID(), ProductID: item.ProductID(), Quantity: item.Quantity(), AddedAt: item.AddedAt()}
		}
		for _, productID := range changed {
			at := slices.IndexFunc(lines, func(l order.CartLine) bool { return l.ProductID() == productID })
			if err := s.carts.PutItem(ctx, lines[at].CartItem); err != nil {
				return err
			}
		}
		return nil
	})
	if errors.Is(err, ports.ErrCommitOutcomeUnknown) && len(changed) > 0 {
		err = s.committedAfterAll(ctx, userID, addID, err)
	}
	if err != nil {
		return nil, err
	}
	return answers, nil
}

// committedAfterAll answers a batch of adds whose COMMIT's outcome is unknown (its connection was
// lost during it, lost): whether the cart records the batch's addID among its recent adds, read
// within the batch's deadline once the database has ended the transaction. Recorded, it
// committed after all, and nil is returned and the answers stand. Otherwise, or when the read
// fails too, lost is returned and the clients hear 503: not recorded means the transaction did
// not commit, unless ports.RecentCartAdds adds of other instances committed on the cart before
// the read (this instance's adds wait for this batch). The read may leave an empty cart behind
// (see ports.CartRepository), which answers as none.
func (s *Service) committedAfterAll(ctx context.Context, userID, addID string, lost error) error {
	fresh, err := order.NewCart(s.ids.NewID(), userID, s.clock.Now())
	if err != nil {
		return lost
	}
	committed, err := s.carts.AddCommitted(ctx, fresh, addID)
	if err != nil || !committed {
		return lost
	}
	return nil
}

// productNow is a product and its stock as a batch of adds read them.
type productNow struct {
	product *catalog.Product
	stock   catalog.Stock
}

// addLine is the cart line that adding cmd's units to lines makes, priced with the product as
// it is now (read into products on first use), or the error that refuses the add.
func (s *Service) addLine(ctx context.Context, cart order.Cart, lines []order.CartLine, products map[string]productNow,
	cmd AddToCartCommand, now time.Time) (order.CartLine, error) {
	p, ok := products[cmd.ProductID]
	if !ok {
		product, stock, err := s.products.Get(ctx, cmd.ProductID)
		if err != nil {
			return order.CartLine{}, err
		}
		p = productNow{product: product, stock: stock}
		products[cmd.ProductID] = p
	}
	// The permission comes before the stock: whoever may not buy the product must not learn
	// its stock from the refusal.
	if err := s.checkPurchase(ctx, cmd.UserID, cmd.ProductID, quantityIn(lines, cmd.ProductID)+cmd.Quantity); err != nil {
		return order.CartLine{}, err
	}
	product, stock := p.product, p.stock
	item, err := cart.Add(lines, s.ids.NewID(), product, stock, cmd.Quantity, now)
	if err != nil {
		return order.CartLine{}, err
	}
	return order.CartLine{CartItem: item, Name: product.Name(), UnitPrice: product.Price(), Stock: stock.Quantity()}, nil
}

// quantityIn is how many units of productID lines hold.
func quantityIn(lines []order.CartLine, productID string) int {
	for _, l := range lines {
		if l.ProductID() == productID {
			return l.Quantity()
		}
	}
	return 0
}

// CartLineView is one cart line with its product as it is now: stockAvailable tells whether the
// stock on hand (currentStock) covers the quantity.
type CartLineView struct {
	CartItemID     string
	ProductID      string
	Name           string
	UnitPrice      int64
	Quantity       int
	Subtotal       int64
	StockAvailable bool
	CurrentStock   int64
}

// CartView is a user's cart; a user who never added anything has an empty one.
type CartView struct {
	UserID      string
	Items       []CartLineView
	TotalAmount int64
}

// Cart returns the user's cart lines in the order they were added, priced now.
func (s *Service) Cart(ctx context.Context, userID string) (CartView, error) {
	if err := domain.ValidateUserID("userId", userID); err != nil {
		return CartView{}, err
	}
	lines, err := s.carts.Lines(ctx, userID)
	if err != nil {
		return CartView{}, fmt.Errorf("read cart: %w", err)
	}
	view := CartView{UserID: userID, Items: make([]CartLineView, len(lines))}
	for i, l := range lines {
		subtotal, err := l.Subtotal()
		if err != nil {
			return CartView{}, err
		}
		if view.TotalAmount, err = commerce.Add(view.TotalAmount, subtotal); err != nil {
			return CartView{}, err
		}
		view.Items[i] = CartLineView{CartItemID: l.ID(), ProductID: l.ProductID(), Name: l.Name, UnitPrice: l.UnitPrice,
			Quantity: l.Quantity(), Subtotal: subtotal, StockAvailable: l.StockAvailable(), CurrentStock: l.Stock}
	}
	return view, nil
}
