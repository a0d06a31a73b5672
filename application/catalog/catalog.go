// Package catalog holds the product use cases: an admin creates a product with its initial
// stock, and anyone reads one. It depends on ports only.
package catalog

import (
	"context"
	"fmt"
	"time"

	"github.com/rushgate/rushgate/domain"
	"github.com/rushgate/rushgate/domain/commerce/catalog"
	"github.com/rushgate/rushgate/ports"
)

// Deps are the ports the product use cases run on.
type Deps struct {
	Products ports.ProductRepository
	Clock    ports.Clock
	IDs      ports.IDGenerator
}

// Service runs the product use cases.
type Service struct {
	products ports.ProductRepository
	clock    ports.Clock
	ids      ports.IDGenerator
}

// NewService wires the product use cases to their ports.
func NewService(d Deps) *Service {
	return &Service{products: d.Products, clock: d.Clock, ids: d.IDs}
}

// View is a product as clients see it: its unit price in minor units and its stock on hand.
type View struct {
	ID        string
	Name      string
	Price     int64
	Stock     int64
	CreatedAt time.Time
}

func viewOf(p *catalog.Product, s catalog.Stock) View {
	return View{ID: p.ID(), Name: p.Name(), Price: p.Price(), Stock: s.Quantity(), CreatedAt: p.CreatedAt()}
}

// CreateCommand creates a product with its initial stock.
type CreateCommand struct {
	Name  string
	Price int64
	Stock int64
}

// Create validates and stores a product and its stock row together.
func (s *Service) Create(ctx context.Context, cmd CreateCommand) (View, error) {
	p, err := catalog.NewProduct(s.ids.NewID(), cmd.Name, cmd.Price, s.clock.Now())
	if err != nil {
		return View{}, err
	}
	stock, err := catalog.NewStock(p.ID(), cmd.Stock)
	if err != nil {
		return View{}, err
	}
	if err := s.products.Create(ctx, p, stock); err != nil {
		return View{}, fmt.Errorf("create product: %w", err)
	}
	return viewOf(p, stock), nil
}

// Get returns one product with its current stock, or catalog.ErrProductNotFound.
func (s *Service) Get(ctx context.Context, productID string) (View, error) {
	if err := ValidateProductID(productID); err != nil {
		return View{}, err
	}
	p, stock, err := s.products.Get(ctx, productID)
	if err != nil {
		return View{}, err
	}
	return viewOf(p, stock), nil
}

// ValidateProductID accepts the lower-case UUID product ids are created in.
func ValidateProductID(id string) error { return domain.ValidateUUID("productId", id) }
