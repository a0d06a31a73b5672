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
var ErrProductNotFound = domain.NewError("PRODUCT_NOT_FOUND", "product not found")

// CodeInsufficientStock is the code of InsufficientStock's error.
const CodeInsufficientStock = "INSUFFICIENT_STOCK"

// ErrInsufficientStock matches every InsufficientStock error with errors.Is.
var ErrInsufficientStock = domain.NewError(CodeInsufficientStock, "not enough stock")

// InsufficientStock refuses a quantity the stock of productID does not cover, naming the
// product so the client knows which line to change.
func InsufficientStock(productID string) error {
	return &domain.Error{
		Code:    CodeInsufficientStock,
		Message: "not enough stock for product " + productID,
		Details: map[string]any{"productId": productID},
	}
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

// Stock is the units of one product on hand. Version counts its changes, for the optimistic
// update that deducts it (UPDATE … WHERE version = ?).
type Stock struct {
	ProductID string
	Quantity  int64
	Version   int64
}

// NewStock validates an initial quantity of productID's stock.
func NewStock(productID string, quantity int64) (Stock, error) {
	if quantity < 0 || quantity > MaxStock {
		return Stock{}, domain.Invalid("stock", "must be between 0 and %d", MaxStock)
	}
	return Stock{ProductID: productID, Quantity: quantity}, nil
}

// Covers reports whether the stock holds at least quantity units.
func (s Stock) Covers(quantity int64) bool { return quantity <= s.Quantity }
