package http

import (
	"time"

	"github.com/rushgate/rushgate/domain"
)

// StatusOf is the status the edge answers err with.
func StatusOf(err error) int {
	_, status := classify(err)
	return status
}

// KindStatus is the status of an error of kind whose code has no status of its own.
func KindStatus(kind domain.Kind) int { return statusByKind[kind] }

// CodesWithOwnStatus are the codes whose status is not their kind's.
func CodesWithOwnStatus() []string {
	codes := make([]string, 0, len(statusOverrides))
	for code := range statusOverrides {
		codes = append(codes, code)
	}
	return codes
}

// The crew answers' wire types, for tests that read answers.
type (
	CrewJSON       = crewJSON
	JoinJSON       = joinJSON
	MemberPageJSON = pageJSON[memberJSON]
)

// VerifyUnremembered is Verify of a token the memory of verified tokens does not hold, and does
// not keep, answering when the token expires too: the first check of a fresh token.
func VerifyUnremembered(t *Tokens, raw string) (Principal, time.Time, error) {
	v, err := t.verifyUntil(raw, false)
	if err != nil {
		return Principal{}, time.Time{}, err
	}
	return v.principal, v.expires, nil
}
