package domain

import (
	"unicode"
	"unicode/utf8"
)

// ValidateText is the one check every text bound for storage passes (names, titles, ids, cursor
// fields): valid UTF-8, 1..maxLen characters (runes), no control characters, and not spaces
// only. Postgres refuses a NUL byte in text (SQLSTATE 22021) where MySQL and memory store it,
// and control characters break logs and terminals; refusing them here makes every backend
// answer the same VALIDATION_FAILED naming field.
func ValidateText(field, value string, maxLen int) error {
	if !utf8.ValidString(value) {
		return Invalid(field, "must be valid UTF-8")
	}
	if n := utf8.RuneCountInString(value); n == 0 || n > maxLen {
		return Invalid(field, "must be 1..%d characters", maxLen)
	}
	blank := true
	for _, r := range value {
		if unicode.IsControl(r) {
			return Invalid(field, "must not contain control characters")
		}
		blank = blank && unicode.IsSpace(r)
	}
	// A name of spaces only names nothing, and shows as nothing in every list.
	if blank {
		return Invalid(field, "must not be blank")
	}
	return nil
}
