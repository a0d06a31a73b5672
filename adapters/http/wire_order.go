package http

import (
	"time"

	apporder "github.com/rushgate/rushgate/application/order"
)

type cartItemJSON struct {
	CartItemID string    `json:"cartItemId"`
	ProductID  string    `json:"productId"`
	Quantity   int       `json:"quantity"`
	AddedAt    time.Time `json:"addedAt"`
}

func wireCartItem(v apporder.CartItemView) cartItemJSON { return cartItemJSON(v) }

type cartLineJSON struct {
	CartItemID     string `json:"cartItemId"`
	ProductID      string `json:"productId"`
	Name           string `json:"name"`
	UnitPrice      int64  `json:"unitPrice"`
	Quantity       int    `json:"quantity"`
	Subtotal       int64  `json:"subtotal"`
	StockAvailable bool   `json:"stockAvailable"`
	CurrentStock   int64  `json:"currentStock"`
}

func wireCartLine(v apporder.CartLineView) cartLineJSON { return cartLineJSON(v) }

type cartJSON struct {
	UserID      string         `json:"userId"`
	Items       []cartLineJSON `json:"items"`
	TotalAmount int64          `json:"totalAmount"`
}

func wireCart(v apporder.CartView) cartJSON {
	return cartJSON{UserID: v.UserID, Items: wireEach(v.Items, wireCartLine), TotalAmount: v.TotalAmount}
}

type orderItemJSON struct {
	ProductID string `json:"productId"`
	Name      string `json:"name"`
	Quantity  int    `json:"quantity"`
	UnitPrice int64  `json:"unitPrice"`
	Subtotal  int64  `json:"subtotal"`
}

func wireOrderItem(v apporder.ItemView) orderItemJSON { return orderItemJSON(v) }

type orderJSON struct {
	OrderID        string          `json:"orderId"`
	UserID         string          `json:"userId"`
	Items          []orderItemJSON `json:"items"`
	SubtotalAmount int64           `json:"subtotalAmount"`
	DiscountAmount int64           `json:"discountAmount"`
	TotalAmount    int64           `json:"totalAmount"`
	CouponID       *string         `json:"couponId"`
	Status         string          `json:"status"`
	CreatedAt      time.Time       `json:"createdAt"`
	PaidAt         *time.Time      `json:"paidAt"`
}

func wireOrder(v apporder.View) orderJSON {
	return orderJSON{OrderID: v.OrderID, UserID: v.UserID, Items: wireEach(v.Items, wireOrderItem),
		SubtotalAmount: v.SubtotalAmount, DiscountAmount: v.DiscountAmount, TotalAmount: v.TotalAmount,
		CouponID: v.CouponID, Status: v.Status, CreatedAt: v.CreatedAt, PaidAt: v.PaidAt}
}
