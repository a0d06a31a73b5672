// Package order holds a user's cart and the orders placed from it: the rules for adding to a
// cart, and for turning a cart into a PENDING order with its amounts (subtotal, discount,
// total) computed without overflow.
package order

import (
	"time"

	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/domain/commerce"
	"github.com/rushgate/rushgate/domain/commerce/catalog"
)

// Bounds of a cart.
const (
	// MaxLineQuantity bounds the units of one product in a cart, and so in an order line.
	MaxLineQuantity = 1000
	// MaxCartLines bounds the distinct products in one cart, and so the lines of an order.
	MaxCartLines = 100
)

// Cart is a user's one cart (UNIQUE per user), created on the first add.
type Cart struct {
	id        string
	userID    string
	createdAt time.Time
}

// NewCart validates and creates the empty cart of userID.
func NewCart(id, userID string, now time.Time) (Cart, error) {
	if err := domain.ValidateUserID("userId", userID); err != nil {
		return Cart{}, err
	}
	return Cart{id: id, userID: userID, createdAt: now}, nil
}

// RebuildCart restores a cart from storage without re-validating; adapters only.
func RebuildCart(id, userID string, createdAt time.Time) Cart {
	return Cart{id: id, userID: userID, createdAt: createdAt}
}

func (c Cart) ID() string           { return c.id }
func (c Cart) UserID() string       { return c.userID }
func (c Cart) CreatedAt() time.Time { return c.createdAt }

// CartItem is one line of a cart: a product and how many units of it; (cartID, productID) is
// unique. Items are made by Cart.Add.
type CartItem struct {
	id        string
	cartID    string
	productID string
	quantity  int
	addedAt   time.Time
}

// RebuildCartItem restores a cart item from storage without re-validating; adapters only.
func RebuildCartItem(id, cartID, productID string, quantity int, addedAt time.Time) CartItem {
	return CartItem{id: id, cartID: cartID, productID: productID, quantity: quantity, addedAt: addedAt}
}

func (i CartItem) ID() string        { return i.id }
func (i CartItem) CartID() string    { return i.cartID }
func (i CartItem) ProductID() string { return i.productID }
func (i CartItem) Quantity() int     { return i.quantity }

// AddedAt is when the product first entered the cart.
func (i CartItem) AddedAt() time.Time { return i.addedAt }

// CartLine is a cart item with its product's name, current unit price and stock on hand.
type CartLine struct {
	CartItem
	Name      string
	UnitPrice int64
	Stock     int64
}

// Subtotal is the line's unit price × quantity.
func (l CartLine) Subtotal() (int64, error) { return commerce.Mul(l.UnitPrice, int64(l.quantity)) }

// StockAvailable reports whether the stock on hand covers the line's quantity.
func (l CartLine) StockAvailable() bool { return int64(l.quantity) <= l.Stock }

// ValidateQuantity accepts 1..MaxLineQuantity units.
func ValidateQuantity(quantity int) error {
	if quantity < 1 || quantity > MaxLineQuantity {
		return domain.Invalid("quantity", "must be between 1 and %d", MaxLineQuantity)
	}
	return nil
}

// CheckPurchaseLimit accepts quantity units of a product in a cart line, or in the order being
// placed from it, when its buyer may buy limit units of it in all and already holds ordered in
// orders not cancelled; past the limit it is VALIDATION_FAILED on quantity.
func CheckPurchaseLimit(limit, ordered, quantity int) error {
	switch {
	case ordered+quantity <= limit:
		return nil
	case ordered == 0:
		return domain.Invalid("quantity", "you may buy at most %d of this product", limit)
	default:
		return domain.Invalid("quantity", "you may buy at most %d of this product and have ordered %d already", limit, ordered)
	}
}

// Add returns the item that adding quantity units of product to c makes: c's line of the
// product (among lines, c's lines) with its quantity raised, or a new line with newItemID. The
// line's resulting quantity must stay within MaxLineQuantity and be covered by stock
// (catalog.InsufficientStock otherwise), a new product must fit within MaxCartLines, and the
// cart's total must stay within commerce.MaxAmount, so that an order of it can always be priced.
func (c Cart) Add(lines []CartLine, newItemID string, product *catalog.Product, stock catalog.Stock,
	quantity int, now time.Time) (CartItem, error) {
	if err := ValidateQuantity(quantity); err != nil {
		return CartItem{}, err
	}
	item := CartItem{id: newItemID, cartID: c.id, productID: product.ID(), addedAt: now}
	found := false
	var others int64 // the total of the cart's other lines
	for _, l := range lines {
		if l.productID == product.ID() {
			item, found = l.CartItem, true
			continue
		}
		subtotal, err := l.Subtotal()
		if err != nil {
			return CartItem{}, err
		}
		if others, err = commerce.Add(others, subtotal); err != nil {
			return CartItem{}, err
		}
	}
	if !found && len(lines) >= MaxCartLines {
		return CartItem{}, domain.Invalid("productId", "a cart holds at most %d products", MaxCartLines)
	}
	if item.quantity+quantity > MaxLineQuantity {
		return CartItem{}, domain.Invalid("quantity",
			"a cart holds at most %d units of a product and already holds %d", MaxLineQuantity, item.quantity)
	}
	item.quantity += quantity
	if !stock.Covers(int64(item.quantity)) {
		return CartItem{}, catalog.InsufficientStock(product.ID())
	}
	subtotal, err := commerce.Mul(product.Price(), int64(item.quantity))
	if err != nil {
		return CartItem{}, err
	}
	if _, err := commerce.Add(others, subtotal); err != nil {
		return CartItem{}, err
	}
	return item, nil
}
