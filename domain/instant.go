package domain

import (
	"strings"
	"time"
)

// The instants every store holds and every answer can carry: MySQL's DATETIME(6), the narrowest
// column, holds 1000-01-01 00:00:00.000000 .. 9999-12-31 23:59:59.999999, and encoding/json
// writes no year outside 0..9999. The last one is whole microseconds, so that Postgres's rounding
// to microseconds cannot carry an instant past it.
var (
	earliestInstant = time.Date(1000, time.January, 1, 0, 0, 0, 0, time.UTC)
	latestInstant   = time.Date(9999, time.December, 31, 23, 59, 59, 999999000, time.UTC)
)

// ValidateInstant is the one check every client-given instant bound for storage passes
// (deadlines, expiries, opening and closing times, cursors): within the years 1000..9999 in UTC.
// RFC 3339 allows offsets that move 9999-12-31T23:59:59-23:59 into the year 10000 in UTC, which
// Postgres and memory would store but no answer could carry, and MySQL refuses; refusing it here
// makes every backend answer the same VALIDATION_FAILED naming field, with nothing stored.
func ValidateInstant(field string, t time.Time) error {
	if t.Before(earliestInstant) || t.After(latestInstant) {
		return Invalid(field, "must be between %s and %s",
			earliestInstant.Format(time.RFC3339Nano), latestInstant.Format(time.RFC3339Nano))
	}
	return nil
}

// ParseInstant reads a client-given RFC 3339 time, as the one way every route and command
// reads one: Go's parser also takes a comma before the fraction, which RFC 3339 does not, and
// refuses the lower-case "t" and "z", which RFC 3339 allows (§5.6).
func ParseInstant(field, value string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, strings.Map(upperTAndZ, value))
	if err != nil || strings.ContainsRune(value, ',') {
		return time.Time{}, Invalid(field, "must be an RFC 3339 time such as 2030-01-02T15:04:05Z")
	}
	return t, nil
}

// upperTAndZ writes RFC 3339's date-time separator and UTC designator in the upper case Go's
// parser reads; no other letter can be part of a time.
func upperTAndZ(r rune) rune {
	switch r {
	case 't':
		return 'T'
	case 'z':
		return 'Z'
	}
	return r
}
