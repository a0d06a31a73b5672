package domain_test

import (
	"errors"
	"maps"
	"testing"

	"github.com/rushgate/rushgate/domain"
)

// TestError_DerivedErrorsKeepKindAndCodeAndLeaveTheirSourceAlone: WithMessage and WithDetails
// change only what they name, the copy still matches its sentinel, and the sentinel is unchanged.
func TestError_DerivedErrorsKeepKindAndCodeAndLeaveTheirSourceAlone(t *testing.T) {
	sentinel := domain.NewError(domain.KindConflict, "THING_TAKEN", "taken").WithDetails(map[string]any{"a": 1})

	derived := sentinel.WithMessage("taken by someone else").WithDetails(map[string]any{"b": 2})
	if derived.Kind != domain.KindConflict || derived.Code != "THING_TAKEN" || derived.Message != "taken by someone else" {
		t.Errorf("derived %+v", derived)
	}
	if want := map[string]any{"a": 1, "b": 2}; !maps.Equal(derived.Details, want) {
		t.Errorf("derived details %v, want %v", derived.Details, want)
	}
	if !errors.Is(derived, sentinel) {
		t.Error("the derived error does not match its sentinel")
	}
	if sentinel.Message != "taken" || !maps.Equal(sentinel.Details, map[string]any{"a": 1}) {
		t.Errorf("the sentinel changed: %+v", sentinel)
	}

	invalid := domain.Invalid("name", "must be at most %d characters", 3)
	if invalid.Kind != domain.KindInvalid || invalid.Code != domain.CodeValidationFailed ||
		invalid.Message != "name: must be at most 3 characters" || invalid.Details["field"] != "name" {
		t.Errorf("Invalid: %+v", invalid)
	}
	if len(domain.ErrValidation.Details) != 0 {
		t.Errorf("Invalid changed ErrValidation: %+v", domain.ErrValidation)
	}
}
