package ports

import "context"

// PurchasePermissions decides who may buy a product that another flow restricts (a raffle's
// prize), so that commerce asks without knowing that flow.
//
// CheckPurchase returns nil when userID may hold quantity units of productID in a cart or an
// order, and otherwise the domain error to answer: refused outright, or refused that many.
type PurchasePermissions interface {
	CheckPurchase(ctx context.Context, userID, productID string, quantity int) error
}
