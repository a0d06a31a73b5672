// Package ranking answers the best sellers: the top products by units sold in completed orders
// of a recent period, read live from the orders. A failing or slow read answers an empty list,
// never an error: the ranking is decoration, not a reason for a page to fail. It depends on
// ports only.
package ranking

import (
	"context"
	"log/slog"
	"time"

	"github.com/rushgate/rushgate/ports"
)

// Defaults of Config.
const (
	DefaultPeriod  = 72 * time.Hour
	DefaultLimit   = 5
	DefaultTimeout = time.Second
	// PeriodName names DefaultPeriod in the answer.
	PeriodName = "3days"
)

// Config tunes the ranking. The zero value of a field takes its default.
type Config struct {
	// Timeout bounds the read; DefaultTimeout.
	Timeout time.Duration
}

// Deps are the ports the ranking reads. Logger may be nil.
type Deps struct {
	Orders ports.OrderRepository
	Clock  ports.Clock
	Logger *slog.Logger
}

// Service answers the top products.
type Service struct {
	d       Deps
	timeout time.Duration
}

// NewService returns the ranking.
func NewService(d Deps, cfg Config) *Service {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	return &Service{d: d, timeout: cfg.Timeout}
}

// Ranked is one product of the ranking.
type Ranked struct {
	Rank       int    `json:"rank"`
	ProductID  string `json:"productId"`
	Name       string `json:"name"`
	SalesCount int64  `json:"salesCount"`
	Revenue    int64  `json:"revenue"`
}

// Top is the ranking of a period.
type Top struct {
	Period   string   `json:"period"`
	Products []Ranked `json:"products"`
}

// TopProducts returns the DefaultLimit products sold most (units) in COMPLETED orders paid in
// the last DefaultPeriod, with their revenue; ties go to the smaller product id. A read that
// fails or outlasts the timeout is logged and answers an empty list.
func (s *Service) TopProducts(ctx context.Context) Top {
	top := Top{Period: PeriodName, Products: []Ranked{}}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	sales, err := s.d.Orders.TopSelling(ctx, s.d.Clock.Now().Add(-DefaultPeriod), DefaultLimit)
	if err != nil {
		s.d.Logger.ErrorContext(ctx, "failed to query popular products; answering an empty list", "error", err)
		return top
	}
	for i, sale := range sales {
		top.Products = append(top.Products, Ranked{Rank: i + 1, ProductID: sale.ProductID, Name: sale.Name,
			SalesCount: sale.Units, Revenue: sale.Revenue})
	}
	return top
}
