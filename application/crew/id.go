package crew

import "github.com/rushgate/rushgate/domain"

// crewIDLength is the length of a UUID's canonical text form.
const crewIDLength = 36

// ValidateCrewID accepts the canonical lower-case UUID text form crew ids are created in, so
// every database compares them the same way. It passes the text check every stored string
// passes first, so a bad id is refused with the same words as any other bad text.
func ValidateCrewID(id string) error {
	if err := domain.ValidateText("crewId", id, crewIDLength); err != nil {
		return err
	}
	if len(id) != crewIDLength {
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
