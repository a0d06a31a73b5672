package domain

// Page bounds of every list: ?limit= defaults to 50 and may not exceed 500.
const (
	DefaultPageLimit = 50
	MaxPageLimit     = 500
)

// PageLimit is the limit a list reads: DefaultPageLimit for 0 (no ?limit=), else limit when it
// is within 1..MaxPageLimit, else VALIDATION_FAILED naming limit.
func PageLimit(limit int) (int, error) {
	if limit == 0 {
		return DefaultPageLimit, nil
	}
	if limit < 1 || limit > MaxPageLimit {
		return 0, Invalid("limit", "must be between 1 and %d", MaxPageLimit)
	}
	return limit, nil
}
