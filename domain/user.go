package domain

// MaxUserIDLength bounds user ids taken from authentication.
const MaxUserIDLength = 64

// ValidateUserID accepts 1..64 printable ASCII characters without spaces.
func ValidateUserID(field, id string) error {
	if err := ValidateText(field, id, MaxUserIDLength); err != nil {
		return err
	}
	for i := 0; i < len(id); i++ {
		// ValidateText already refused control characters; this leaves printable ASCII.
		if c := id[i]; c > '~' || c == ' ' {
			return Invalid(field, "must be printable ASCII without spaces")
		}
	}
	return nil
}
