// Package capacity hands out a limited number of units, one per claimant, first come first
// served: the rule a crew's seats and a coupon's quantity share.
package capacity

// Allot decides claims on remaining units in the order given, as if each were decided alone
// in that order: a claimant who holds a unit already (held, which may be nil) or was granted
// one earlier in claimants is refused with duplicate; the others are granted while units last
// and refused with exhausted once they are gone. It answers one verdict per claimant: nil when
// granted, else its refusal.
func Allot(claimants []string, held map[string]bool, remaining int, duplicate, exhausted error) []error {
	verdicts := make([]error, len(claimants))
	granted := make(map[string]bool, min(len(claimants), max(remaining, 0)))
	for i, claimant := range claimants {
		switch {
		case held[claimant] || granted[claimant]:
			verdicts[i] = duplicate
		case len(granted) >= remaining:
			verdicts[i] = exhausted
		default:
			granted[claimant] = true
		}
	}
	return verdicts
}
