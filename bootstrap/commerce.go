package bootstrap

import (
	"fmt"
	"time"

	"go.uber.org/fx"

	"github.com/rushgate/rushgate/adapters/gormdb"
	rghttp "github.com/rushgate/rushgate/adapters/http"
	"github.com/rushgate/rushgate/adapters/memory"
	"github.com/rushgate/rushgate/application/catalog"
	"github.com/rushgate/rushgate/application/coupon"
	"github.com/rushgate/rushgate/application/guard"
	"github.com/rushgate/rushgate/application/order"
	"github.com/rushgate/rushgate/application/ranking"
	"github.com/rushgate/rushgate/application/wallet"
	"github.com/rushgate/rushgate/domain/commerce"
	"github.com/rushgate/rushgate/ports"
)

// CommerceModule is points, coupons, products, carts and orders: their store set (which
// payments share), use cases and routes.
var CommerceModule = flow("commerce",
	fx.Provide(storesOn(memory.NewCommerceStores, gormdb.NewCommerceStores),
		provideWalletService, provideCouponService, provideCatalogService, provideOrderService),
	routes(rghttp.WalletRoutes),
	routes(rghttp.CouponRoutes),
	routes(rghttp.ProductRoutes),
	routes(rghttp.CartRoutes),
	routes(rghttp.OrderRoutes),
)

// CommerceConfig is points and coupons.
type CommerceConfig struct {
	// ChargeMax is the largest single charge of points, at most 2^53.
	ChargeMax int64 `env:"RUSHGATE_CHARGE_MAX"`
	// CouponIssueRetries is how many times a batch of coupon issues is retried after an
	// optimistic version conflict before its requests hear COUPON_ISSUE_FAILED.
	CouponIssueRetries int `env:"RUSHGATE_COUPON_ISSUE_RETRIES"`
	// TopProductsFreshFor is how long one read of the top products answers every request.
	TopProductsFreshFor time.Duration `env:"RUSHGATE_TOP_PRODUCTS_FRESH_FOR"`
	// TopProductsTimeout bounds the top products' read; beyond it the answer is an empty list.
	TopProductsTimeout time.Duration `env:"RUSHGATE_TOP_PRODUCTS_TIMEOUT"`
}

func (c *CommerceConfig) setDefaults() {
	c.ChargeMax = wallet.DefaultChargeMax
	c.CouponIssueRetries = coupon.DefaultIssueRetries
	c.TopProductsFreshFor = ranking.DefaultFreshFor
	c.TopProductsTimeout = ranking.DefaultTimeout
}

// Validate checks the commerce settings.
func (c CommerceConfig) Validate() error {
	if c.ChargeMax > commerce.MaxAmount {
		return fmt.Errorf("RUSHGATE_CHARGE_MAX: %d is above the largest amount rushgate holds, %d", c.ChargeMax, commerce.MaxAmount)
	}
	return allPositive(
		positive{"RUSHGATE_CHARGE_MAX", c.ChargeMax > 0},
		positive{"RUSHGATE_COUPON_ISSUE_RETRIES", c.CouponIssueRetries > 0},
		positive{"RUSHGATE_TOP_PRODUCTS_FRESH_FOR", c.TopProductsFreshFor > 0},
		positive{"RUSHGATE_TOP_PRODUCTS_TIMEOUT", c.TopProductsTimeout > 0},
	)
}

func provideWalletService(cfg Config, tx ports.TxRunner, stores ports.CommerceStores, g *guard.Guard, clock ports.Clock,
	ids ports.IDGenerator) *wallet.Service {
	return wallet.NewService(wallet.Deps{
		Tx:      tx,
		Wallets: stores.Wallets,
		Guard:   g,
		Clock:   clock,
		IDs:     ids,
	}, wallet.Config{ChargeMax: cfg.Commerce.ChargeMax, MaxBatch: cfg.Guard.LockMaxBatch})
}

func provideCouponService(cfg Config, tx ports.TxRunner, stores ports.CommerceStores, g *guard.Guard, clock ports.Clock,
	ids ports.IDGenerator) *coupon.Service {
	return coupon.NewService(coupon.Deps{
		Tx:          tx,
		Coupons:     stores.Coupons,
		UserCoupons: stores.UserCoupons,
		Guard:       g,
		Clock:       clock,
		IDs:         ids,
	}, coupon.Config{IssueRetries: cfg.Commerce.CouponIssueRetries, MaxBatch: cfg.Guard.LockMaxBatch})
}

func provideCatalogService(stores ports.CommerceStores, clock ports.Clock, ids ports.IDGenerator) *catalog.Service {
	return catalog.NewService(catalog.Deps{Products: stores.Products, Clock: clock, IDs: ids})
}

func provideOrderService(cfg Config, tx ports.TxRunner, stores ports.CommerceStores, g *guard.Guard, clock ports.Clock,
	ids ports.IDGenerator, permissions ports.PurchasePermissions) *order.Service {
	return order.NewService(order.Deps{
		Tx:          tx,
		Products:    stores.Products,
		Carts:       stores.Carts,
		Orders:      stores.Orders,
		UserCoupons: stores.UserCoupons,
		Guard:       g,
		Clock:       clock,
		IDs:         ids,
		Permissions: permissions,
		AddTimeout:  cfg.Database.Timeout,
	})
}
