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

// Every setting out of its range is refused by Validate with an error naming the variable.
func TestValidate_NamesTheVariable(t *testing.T) {
	for _, tc := range []struct{ name, value string }{
		{"RUSHGATE_CHARGE_MAX", "0"},
		{"RUSHGATE_CHARGE_MAX", "9007199254740993"},
		{"RUSHGATE_COUPON_ISSUE_RETRIES", "0"},
		{"RUSHGATE_OUTBOX_BACKOFF", "0s"},
		{"RUSHGATE_OUTBOX_BACKOFF", "1m,-5m"},
		{"RUSHGATE_PUBLIC_URL", "ftp://example.com"},
		{"RUSHGATE_DATAPLATFORM_URL", "not a url"},
		{"RUSHGATE_ALERT_WEBHOOK_URL", "example.com/hook"},
		{"RUSHGATE_RECONNECT_GRACE", "-1s"},
		{"RUSHGATE_UPLOAD_MAX_BYTES", "0"},
		{"RUSHGATE_UPLOAD_URL_EXPIRY", "0s"},
		{"RUSHGATE_UPLOAD_SESSION_EXPIRY", "0s"},
		{"RUSHGATE_EXPIRY_INTERVAL", "0s"},
		{"RUSHGATE_QUEUE_TICK", "0s"},
		{"RUSHGATE_BROKER_HEARTBEAT_TIMEOUT", "0s"},
		{"RUSHGATE_DATAPLATFORM_TIMEOUT", "0s"},
		{"RUSHGATE_OUTBOX_INTERVAL", "0s"},
		{"RUSHGATE_QUEUE_POLL_INTERVAL", "1h"},
	} {
		cfg, err := parseConfig(env.Options{Environment: map[string]string{tc.name: tc.value}})
		if err != nil {
			t.Fatal(err)
		}
		if err := cfg.Validate(); err == nil || !strings.HasPrefix(err.Error(), tc.name+": ") {
			t.Errorf("%s=%s: want an error naming it, got %v", tc.name, tc.value, err)
		}
	}
}
