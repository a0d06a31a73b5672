package bootstrap

import (
	"reflect"
	"strings"
	"testing"

	"github.com/caarlos0/env/v11"
)

func TestDefaultConfig_IsValid(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestParse_NamesTheVariableOfEachGroup: a value of the wrong type names its own variable, even
// where groups share a field name (Database.Timeout, Redis.Timeout).
func TestParse_NamesTheVariableOfEachGroup(t *testing.T) {
	groups := reflect.TypeFor[Config]()
	for i := range groups.NumField() {
		group := groups.Field(i).Type
		for j := range group.NumField() {
			name := group.Field(j).Tag.Get("env")
			if group.Field(j).Type.Kind() == reflect.String {
				continue // any text parses
			}
			t.Run(name, func(t *testing.T) {
				_, err := parseConfig(env.Options{Environment: map[string]string{name: "not-a-value"}})
				if err == nil || !strings.HasPrefix(err.Error(), name+": not a valid ") {
					t.Fatalf("want an error naming %s, got %v", name, err)
				}
			})
		}
	}
}
