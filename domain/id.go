package domain

// ValidateUUID accepts the canonical lower-case UUID text form ids are created in, so every
// database compares them the same way, and names field otherwise. Every such id is also text
// ValidateText accepts (36 ASCII characters, no control characters).
func ValidateUUID(field, id string) error {
	if len(id) != 36 {
		return Invalid(field, "must be a UUID")
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return Invalid(field, "must be a UUID")
			}
		default:
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return Invalid(field, "must be a UUID")
			}
		}
	}
	return nil
}
