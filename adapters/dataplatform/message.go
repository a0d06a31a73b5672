package dataplatform

import (
	"encoding/json"
	"time"

	"github.com/rushgate/rushgate/application/payment"
)

var _ payment.MessageEncoder = Encoder{}

// Encoder writes a paid order as the platform's JSON message, the body the outbox stores and
// Send posts.
type Encoder struct{}

// Encode writes d as a paidOrder.
func (Encoder) Encode(d payment.Delivered) ([]byte, error) {
	m := paidOrder{MessageID: d.MessageID, OrderID: d.OrderID, UserID: d.UserID, TotalAmount: d.TotalAmount, PaidAt: d.PaidAt}
	if d.Items != nil {
		m.Items = make([]paidItem, len(d.Items))
		for i, item := range d.Items {
			m.Items[i] = paidItem(item)
		}
	}
	return json.Marshal(m)
}

// paidOrder is the message announcing a paid order.
type paidOrder struct {
	MessageID   string     `json:"messageId"`
	OrderID     string     `json:"orderId"`
	UserID      string     `json:"userId"`
	Items       []paidItem `json:"items"`
	TotalAmount int64      `json:"totalAmount"`
	PaidAt      time.Time  `json:"paidAt"`
}

// paidItem is one line of a paid order.
type paidItem struct {
	ProductID string `json:"productId"`
	Name      string `json:"name"`
	Quantity  int    `json:"quantity"`
	UnitPrice int64  `json:"unitPrice"`
	Subtotal  int64  `json:"subtotal"`
}
