package dataplatform_test

import (
	"testing"
	"time"

	"github.com/rushgate/rushgate/adapters/dataplatform"
	"github.com/rushgate/rushgate/application/payment"
)

// TestEncoder_WritesThePlatformsMessage pins the message a paid order is announced with: its
// fields, their names and their order.
func TestEncoder_WritesThePlatformsMessage(t *testing.T) {
	paidAt := time.Date(2026, 3, 1, 12, 30, 0, 500, time.UTC)
	body, err := dataplatform.Encoder{}.Encode(payment.Delivered{
		MessageID: "m-1", OrderID: "o-1", UserID: "u-1", TotalAmount: 1800, PaidAt: paidAt,
		Items: []payment.DeliveredItem{{ProductID: "p-1", Name: "tea & cake", Quantity: 2, UnitPrice: 1000, Subtotal: 2000}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"messageId":"m-1","orderId":"o-1","userId":"u-1",` +
		`"items":[{"productId":"p-1","name":"tea \u0026 cake","quantity":2,"unitPrice":1000,"subtotal":2000}],` +
		`"totalAmount":1800,"paidAt":"2026-03-01T12:30:00.0000005Z"}`
	if string(body) != want {
		t.Errorf("got  %s\nwant %s", body, want)
	}
}
