package crew

import "github.com/rushgate/rushgate/domain"

// ValidateCrewID accepts the canonical lower-case UUID text form crew ids are created in, so
// every database compares them the same way.
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
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				return domain.Invalid("crewId", "must be a UUID")
			}
		}
	}
	return nil
}
