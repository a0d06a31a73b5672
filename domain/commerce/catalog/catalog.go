// Package catalog holds what is for sale: products at a unit price and the stock on hand of
// each, with the rules that keep both in range.
package catalog

import (
	"time"

	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/domain/commerce"
)

// Bounds of a product.
const (
	MaxNameLength = 200
	// MaxStock bounds the units of one product on hand: far above any real warehouse, and small
	// enough that stock × price checks stay exact.
	MaxStock int64 = 1_000_000_000
)

// ErrProductNotFound answers a product id nothing is stored under.
var ErrProductNotFound = domain.NewError(domain.KindNotFound, "PRODUCT_NOT_FOUND", "product not found")

// CodeInsufficientStock is the code of InsufficientStock's error.
const CodeInsufficientStock = "INSUFFICIENT_STOCK"

// ErrInsufficientStock matches every InsufficientStock error with errors.Is.
var ErrInsufficientStock = domain.NewError(domain.KindInvalid, CodeInsufficientStock, "not enough stock")

// InsufficientStock refuses a quantity the stock of productID does not cover, naming the
// product so the client knows which line to change.
func InsufficientStock(productID string) error {
	return ErrInsufficientStock.WithMessage("not enough stock for product " + productID).
		WithDetails(map[string]any{"productId": productID})
}

// Product is an item for sale at a unit price in minor units.
type Product struct {
	id        string
	name      string
	price     int64
	createdAt time.Time
}

// NewProduct validates and creates a product.
func NewProduct(id, name string, price int64, now time.Time) (*Product, error) {
	if err := domain.ValidateText("name", name, MaxNameLength); err != nil {
		return nil, err
	}
	if price < 0 || price > commerce.MaxAmount {
		return nil, domain.Invalid("price", "must be between 0 and %d", commerce.MaxAmount)
	}
	return &Product{id: id, name: name, price: price, createdAt: now}, nil
}

// RebuildProduct restores a product from storage without re-validating; adapters only.
func RebuildProduct(id, name string, price int64, createdAt time.Time) *Product {
	return &Product{id: id, name: name, price: price, createdAt: createdAt}
}

func (p *Product) ID() string           { return p.id }
func (p *Product) Name() string         { return p.name }
func (p *Product) Price() int64         { return p.price }
func (p *Product) CreatedAt() time.Time { return p.createdAt }

// Stock is the units of one product on hand, never negative. Version counts its changes, for
// the optimistic update that deducts it (UPDATE … WHERE version = ?).
type Stock struct {
	productID string
	quantity  int64
	version   int64
}

// NewStock validates an initial quantity (0..MaxStock) of productID's stock.
func NewStock(productID string, quantity int64) (Stock, error) {
	if quantity < 0 || quantity > MaxStock {
		return Stock{}, domain.Invalid("stock", "must be between 0 and %d", MaxStock)
	}
	return Stock{productID: productID, quantity: quantity}, nil
}

// RebuildStock restores a product's stock from storage without re-validating; adapters only.
func RebuildStock(productID string, quantity, version int64) Stock {
	return Stock{productID: productID, quantity: quantity, version: version}
}

func (s Stock) ProductID() string { return s.productID }
func (s Stock) Quantity() int64   { return s.quantity }
func (s Stock) Version() int64    { return s.version }

// Covers reports whether the stock holds at least quantity units.
func (s Stock) Covers(quantity int64) bool { return quantity <= s.quantity }

// CodeStockDeductionFailed is the code of DeductionFailed's error.
const CodeStockDeductionFailed = "STOCK_DEDUCTION_FAILED"

// ErrStockDeductionFailed matches every DeductionFailed error with errors.Is.
var ErrStockDeductionFailed = domain.NewError(domain.KindConflict, CodeStockDeductionFailed, "the stock could not be deducted")

// DeductionFailed refuses a payment whose stock deduction of productID failed: the stock no
// longer covers the order, or concurrent payments kept changing it through every retry.
func DeductionFailed(productID, reason string) error {
	return ErrStockDeductionFailed.WithMessage("the stock of product " + productID + " could not be deducted: " + reason).
		WithDetails(map[string]any{"productId": productID})
}

// MovementType says whether a stock movement added or removed units.
type MovementType string

// Movement types.
const (
	MovementIn  MovementType = "IN"
	MovementOut MovementType = "OUT"
)

// RefOrder is the reference type of a movement an order's payment caused.
const RefOrder = "ORDER"

// Movement is one row of a product's stock history: the quantity before and after a change
// and what caused it.
type Movement struct {
	ID        string
	ProductID string
	Type      MovementType
	Before    int64
	After     int64
	RefType   string
	RefID     string
	CreatedAt time.Time
}

// Take removes n units (1..Quantity) from s for the reference refID and returns the movement,
// or reports false and leaves s unchanged. The caller writes the stock with the optimistic
// version check of the version it read.
func (s *Stock) Take(n int64, movementID, refType, refID string, now time.Time) (Movement, bool) {
	if n < 1 || n > s.quantity {
		return Movement{}, false
	}
	m := Movement{ID: movementID, ProductID: s.productID, Type: MovementOut, Before: s.quantity, After: s.quantity - n,
		RefType: refType, RefID: refID, CreatedAt: now}
	s.quantity -= n
	return m, true
}
