package ports

import "context"

// PurchasePermissions decides who may buy a product that another flow restricts (a raffle's
// prize), and how many units, so that commerce asks without knowing that flow.
//
// PurchaseLimit returns how many units of productID userID may buy in all, counting together
// those in the user's cart and those in the user's orders that are not cancelled; limited is
// false when nothing restricts the product, which anyone may then buy in any number (and
// commerce need count nothing). A user who may buy none of it gets, instead, the domain error
// to answer.
type PurchasePermissions interface {
	PurchaseLimit(ctx context.Context, userID, productID string) (limit int, limited bool, err error)
}
