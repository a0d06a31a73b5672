package crew

import "github.com/rushgate/rushgate/domain"

// ValidateCrewID accepts the canonical lower-case UUID text form crew ids are created in.
func ValidateCrewID(id string) error { return domain.ValidateUUID("crewId", id) }
