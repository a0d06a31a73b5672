// Package ranking answers the best sellers: the top products by units sold in completed orders
// of a recent period, read live from the orders. A failing or slow read answers an empty list,
// with its error for the caller to log: the ranking is decoration, not a reason for a page to
// fail. It depends on ports only.
package ranking

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rushgate/rushgate/application/guard/combine"
	"github.com/rushgate/rushgate/domain/commerce/order"
	"github.com/rushgate/rushgate/ports"
)

// Defaults of Config.
const (
	DefaultPeriod  = 72 * time.Hour
	DefaultLimit   = 5
	DefaultTimeout = time.Second
	// DefaultFreshFor keeps a herd of readers to one aggregate a second: a ranking over three
	// days does not change meaningfully faster.
	DefaultFreshFor = time.Second
	// PeriodName names DefaultPeriod in the answer.
	PeriodName = "3days"
)

// Config tunes the ranking. The zero value of a field takes its default.
type Config struct {
	// Timeout bounds the read; DefaultTimeout.
	Timeout time.Duration
	// FreshFor is how long a ranking read is answered again without reading; DefaultFreshFor.
	FreshFor time.Duration
}

// Deps are the ports the ranking reads.
type Deps struct {
	Orders ports.OrderRepository
	Clock  ports.Clock
}

// Service answers the top products. Concurrent callers share one read (combining), and a
// successful read answers for FreshFor.
type Service struct {
	d   Deps
	cfg Config

	mu       sync.Mutex
	inFlight *read // the read callers now wait for; nil when none
	last     *read // the last successful read
}

// read is one aggregate and its answer; done is closed once top and err are set.
type read struct {
	at   time.Time
	top  Top
	err  error
	done chan struct{}
}

// NewService returns the ranking.
func NewService(d Deps, cfg Config) *Service {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.FreshFor <= 0 {
		cfg.FreshFor = DefaultFreshFor
	}
	return &Service{d: d, cfg: cfg}
}

// Ranked is one product of the ranking.
type Ranked struct {
	Rank       int
	ProductID  string
	Name       string
	SalesCount int64
	Revenue    int64
}

// Top is the ranking of a period.
type Top struct {
	Period   string
	Products []Ranked
}

// TopProducts returns the DefaultLimit products sold most (units) in COMPLETED orders paid in
// the last DefaultPeriod, with their revenue; ties go to the smaller product id. A read that
// fails or outlasts the timeout answers an empty list and its error, to every caller that
// waited for it, so that each logs the failure as its own (with its own request id): the list
// is usable either way. A caller arriving while a read runs waits for it; one within FreshFor of
// a successful read gets its answer. A caller that leaves before the read ends gets the empty
// list and no error: nothing failed that it could report.
func (s *Service) TopProducts(ctx context.Context) (Top, error) {
	now := s.d.Clock.Now()
	s.mu.Lock()
	// A read stamped after now (the wall clock was stepped back) is not fresh: counted as such,
	// it would be served for as long as the step.
	if s.last != nil && !s.last.at.After(now) && now.Sub(s.last.at) < s.cfg.FreshFor {
		top := s.last.top
		s.mu.Unlock()
		return top, nil
	}
	r := s.inFlight
	if r == nil {
		r = &read{at: now, done: make(chan struct{})}
		s.inFlight = r
		s.mu.Unlock()
		// The read serves every waiter, so no single caller's cancellation ends it.
		r.top, r.err = s.aggregate(context.WithoutCancel(ctx), now)
		s.mu.Lock()
		s.inFlight = nil
		if r.err == nil {
			s.last = r
		}
		s.mu.Unlock()
		close(r.done)
		return r.top, r.err
	}
	s.mu.Unlock()
	select {
	case <-r.done:
		return r.top, r.err
	case <-ctx.Done():
		return Top{Period: PeriodName, Products: []Ranked{}}, nil
	}
}

// aggregate reads the ranking as of now, or answers an empty list and why. A read that panics
// fails as any other: it answers its waiters, and the next caller reads again.
func (s *Service) aggregate(ctx context.Context, now time.Time) (Top, error) {
	top := Top{Period: PeriodName, Products: []Ranked{}}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	sales, err := combine.Safely(func() ([]order.Sales, error) {
		return s.d.Orders.TopSelling(ports.AllowStale(ctx), now.Add(-DefaultPeriod), DefaultLimit)
	})
	if err != nil {
		return top, fmt.Errorf("ranking: read the top products: %w", err)
	}
	for i, sale := range sales {
		top.Products = append(top.Products, Ranked{Rank: i + 1, ProductID: sale.ProductID, Name: sale.Name,
			SalesCount: sale.Units, Revenue: sale.Revenue})
	}
	return top, nil
}
