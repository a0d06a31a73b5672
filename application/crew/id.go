package crew

import "github.com/rushgate/rushgate/domain"

// ValidateCrewID accepts the canonical lower-case UUID text form crew ids are created in, so
// every database compares them the same way. Every such id is also text domain.ValidateText
// accepts (36 ASCII characters, no control characters), so that check is not run again here.
func ValidateCrewID(id string) error {
	if len(id) != 36 {
		return domain.Invalid("crewId", "must be a UUID")
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return domain.Invalid("crewId", "must be a UUID")
			}
		default:
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return domain.Invalid("crewId", "must be a UUID")
			}
		}
	}
	return nil
}
