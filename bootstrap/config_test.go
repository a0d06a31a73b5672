package bootstrap

import (
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"github.com/caarlos0/env/v11"

	"github.com/rushgate/rushgate/adapters/redis"
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
			if field := group.Field(j).Type; field.Kind() == reflect.String ||
				field.Kind() == reflect.Slice && field.Elem().Kind() == reflect.String {
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
		{"RUSHGATE_CHARGE_MAX", "9007199254740993"},
		{"RUSHGATE_OUTBOX_BACKOFF", "0s"},
		{"RUSHGATE_OUTBOX_BACKOFF", "1m,-5m"},
		{"RUSHGATE_PUBLIC_URL", "ftp://example.com"},
		{"RUSHGATE_DATAPLATFORM_URL", "not a url"},
		{"RUSHGATE_ALERT_WEBHOOK_URL", "example.com/hook"},
		{"RUSHGATE_RECONNECT_GRACE", "-1s"},
		{"RUSHGATE_UPLOAD_URL_EXPIRY", "500ms"},
		{"RUSHGATE_QUEUE_POLL_INTERVAL", "1h"},
		{"RUSHGATE_READ_HEADER_TIMEOUT", "11s"},
		{"RUSHGATE_IDEMPOTENCY_LEASE", "2h"},
		{"RUSHGATE_LOG_LEVEL", "loud"},
		{"RUSHGATE_ACCESS_LOG_LEVEL", "loud"},
		{"RUSHGATE_ACCESS_LOG_LEVEL", "info+2"},
		{"RUSHGATE_ACCESS_LOG_SAMPLE", "-1"},
		{"RUSHGATE_ROLE", "broker"},                // a split role needs Redis, unset here
		{"RUSHGATE_REDIS_KEY_PREFIX", "rooms{a}:"}, // a brace would move the {eventId} hash tags
		{"RUSHGATE_REDIS_KEY_PREFIX", "rooms}:"},
		{"RUSHGATE_REDIS_KEY_PREFIX", "rooms\n:"},
		{"RUSHGATE_REDIS_KEY_PREFIX", "salle-é:"},
	} {
		expectRefusedNaming(t, tc.name, tc.value)
	}
}

// TestRedisKeyPrefix_DefaultsToTheWaitingRoomPrefix: unset or empty, the rooms keep the keys
// they had before the setting existed; set, any printable ASCII without braces is taken as it
// is. An empty prefix set in code (tests build their Config) is refused.
func TestRedisKeyPrefix_DefaultsToTheWaitingRoomPrefix(t *testing.T) {
	for _, environment := range []map[string]string{{}, {"RUSHGATE_REDIS_KEY_PREFIX": ""}} {
		cfg, err := parseConfig(env.Options{Environment: environment})
		if err != nil || cfg.Redis.KeyPrefix != redis.WaitingRoomKeyPrefix {
			t.Errorf("%v: key prefix %q, %v; want %q", environment, cfg.Redis.KeyPrefix, err, redis.WaitingRoomKeyPrefix)
		}
	}
	empty := DefaultConfig()
	empty.Redis.KeyPrefix = ""
	if err := empty.Validate(); err == nil || !strings.HasPrefix(err.Error(), "RUSHGATE_REDIS_KEY_PREFIX: ") {
		t.Errorf("empty key prefix: want an error naming RUSHGATE_REDIS_KEY_PREFIX, got %v", err)
	}
	cfg := parseWith(t, "RUSHGATE_REDIS_KEY_PREFIX", "staging rooms:")
	if err := cfg.Validate(); err != nil || cfg.Redis.KeyPrefix != "staging rooms:" {
		t.Errorf("key prefix %q, %v; want \"staging rooms:\" accepted", cfg.Redis.KeyPrefix, err)
	}
}

// TestValidate_RefusesZeroNamingTheVariable: every numeric setting but those where zero means
// something must be positive, so a new one is checked without being listed here.
func TestValidate_RefusesZeroNamingTheVariable(t *testing.T) {
	zeroMeansNone := map[string]bool{"RUSHGATE_RECONNECT_GRACE": true}
	groups := reflect.TypeFor[Config]()
	for i := range groups.NumField() {
		group := groups.Field(i).Type
		for j := range group.NumField() {
			name := group.Field(j).Tag.Get("env")
			switch group.Field(j).Type.Kind() {
			case reflect.Int, reflect.Int64:
				if zeroMeansNone[name] {
					cfg := parseWith(t, name, "0")
					if err := cfg.Validate(); err != nil {
						t.Errorf("%s=0: %v", name, err)
					}
					continue
				}
				expectRefusedNaming(t, name, "0")
			case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Uint, reflect.Uint8, reflect.Uint16,
				reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
				t.Errorf("%s: a numeric kind this test does not check yet", name)
			}
		}
	}
}

func parseWith(t *testing.T, name, value string) Config {
	t.Helper()
	cfg, err := parseConfig(env.Options{Environment: map[string]string{name: value}})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func expectRefusedNaming(t *testing.T, name, value string) {
	t.Helper()
	if err := parseWith(t, name, value).Validate(); err == nil || !strings.HasPrefix(err.Error(), name+": ") {
		t.Errorf("%s=%s: want an error naming it, got %v", name, value, err)
	}
}

// TestAccessLog_FollowsTheSettings: the router logs access lines at RUSHGATE_ACCESS_LOG_LEVEL
// and keeps one in RUSHGATE_ACCESS_LOG_SAMPLE of the successful ones.
func TestAccessLog_FollowsTheSettings(t *testing.T) {
	if got := accessLog(DefaultConfig().Server); got.Level != slog.LevelInfo || got.SampleEvery != 1 {
		t.Errorf("default access log %+v, want every line at info", got)
	}
	cfg := parseWith(t, "RUSHGATE_ACCESS_LOG_LEVEL", "DEBUG")
	cfg.Server.AccessLogSample = 10
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := accessLog(cfg.Server); got.Level != slog.LevelDebug || got.SampleEvery != 10 {
		t.Errorf("access log %+v, want one line in 10 at debug", got)
	}
}

// TestReplicaURLs_ParsedAndCheckedAgainstThePrimary: the replicas are a comma-separated list of
// URLs of the primary's driver; a bad one, one of another driver, or replicas without a primary
// are refused naming RUSHGATE_DATABASE_REPLICA_URLS, never repeating a URL (it may hold a
// password).
func TestReplicaURLs_ParsedAndCheckedAgainstThePrimary(t *testing.T) {
	const primary = "postgres://app:secret@db1:5432/app?sslmode=disable"
	parse := func(t *testing.T, environment map[string]string) (Config, error) {
		t.Helper()
		cfg, err := parseConfig(env.Options{Environment: environment})
		if err != nil {
			t.Fatal(err)
		}
		return cfg, cfg.Validate()
	}
	cfg, err := parse(t, map[string]string{
		"RUSHGATE_DATABASE_URL":          primary,
		"RUSHGATE_DATABASE_REPLICA_URLS": "postgres://app:secret@db2:5432/app?sslmode=disable,postgresql://app:secret@db3/app",
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Database.ReplicaURLs; len(got) != 2 || got[1] != "postgresql://app:secret@db3/app" {
		t.Errorf("replicas %q, want the two URLs", got)
	}
	if cfg, _ := parse(t, map[string]string{"RUSHGATE_DATABASE_URL": primary}); len(cfg.Database.ReplicaURLs) != 0 {
		t.Errorf("unset: replicas %q, want none", cfg.Database.ReplicaURLs)
	}
	for name, environment := range map[string]map[string]string{
		"another driver":  {"RUSHGATE_DATABASE_URL": primary, "RUSHGATE_DATABASE_REPLICA_URLS": "mysql://app:secret@db2:3306/app"},
		"not a URL":       {"RUSHGATE_DATABASE_URL": primary, "RUSHGATE_DATABASE_REPLICA_URLS": "postgres://app:secret@db2:5432/app,%zz"},
		"no database":     {"RUSHGATE_DATABASE_URL": primary, "RUSHGATE_DATABASE_REPLICA_URLS": "postgres://app:secret@db2:5432"},
		"an empty item":   {"RUSHGATE_DATABASE_URL": primary, "RUSHGATE_DATABASE_REPLICA_URLS": "postgres://app:secret@db2:5432/app,"},
		"without primary": {"RUSHGATE_DATABASE_REPLICA_URLS": "postgres://app:secret@db2:5432/app"},
	} {
		_, err := parse(t, environment)
		if err == nil || !strings.HasPrefix(err.Error(), "RUSHGATE_DATABASE_REPLICA_URLS: ") || strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: want an error naming RUSHGATE_DATABASE_REPLICA_URLS without the password, got %v", name, err)
		}
	}
}
