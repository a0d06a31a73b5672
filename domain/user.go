package domain

import "unicode"

// MaxUserIDLength bounds user ids taken from authentication.
const MaxUserIDLength = 64

// ValidateUserID accepts 1..64 printable ASCII characters without spaces.
func ValidateUserID(field, id string) error {
	if id == "" || len(id) > MaxUserIDLength {
		return Invalid(field, "must be 1..%d characters", MaxUserIDLength)
	}
	for _, r := range id {
		if r > unicode.MaxASCII || !unicode.IsPrint(r) || r == ' ' {
			return Invalid(field, "must be printable ASCII without spaces")
		}
	}
	return nil
}
