package ports

import "context"

// staleKey keys the mark AllowStale puts on a context.
type staleKey struct{}

// AllowStale marks reads made with the returned context, outside a transaction, as reads whose
// answer may be a moment old: a store with read replicas may serve them from one. Mark only
// reads whose answer is shown to a client, never one whose answer decides a write, nor one a
// client makes to see its own write; a transaction's reads stay on the primary whatever the mark.
func AllowStale(ctx context.Context) context.Context {
	return context.WithValue(ctx, staleKey{}, true)
}

// StaleAllowed reports whether ctx carries AllowStale's mark.
func StaleAllowed(ctx context.Context) bool {
	allowed, _ := ctx.Value(staleKey{}).(bool)
	return allowed
}
