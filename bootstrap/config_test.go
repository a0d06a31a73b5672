package bootstrap

import (
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

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
		{"RUSHGATE_OUTBOX_BACKOFF", "0s,5m,30m"},
		{"RUSHGATE_OUTBOX_BACKOFF", "1m,-5m,30m"},
		{"RUSHGATE_OUTBOX_BACKOFF", "1m,5m"}, // three retries, so three waits
		{"RUSHGATE_OUTBOX_BACKOFF", "1m,5m,30m,2h"},
		{"RUSHGATE_INSTANCE_ID", "web|1"},  // owners are "<brokerID>|<conn>|"
		{"RUSHGATE_INSTANCE_ID", "web{1}"}, // a brace would move the {brokerId} hash tag
		{"RUSHGATE_INSTANCE_ID", "web}"},
		{"RUSHGATE_INSTANCE_ID", "web\n1"},
		{"RUSHGATE_INSTANCE_ID", "wéb-1"},
		{"RUSHGATE_PUBLIC_URL", "ftp://example.com"},
		{"RUSHGATE_PUBLIC_URL", "https://example.com/rg?x=1"}, // upload URLs append their own query
		{"RUSHGATE_PUBLIC_URL", "https://example.com/rg?"},
		{"RUSHGATE_PUBLIC_URL", "https://example.com/#top"},
		{"RUSHGATE_PUBLIC_URL", "https://example.com/rg#"}, // an empty fragment still ends the URL
		{"RUSHGATE_PUBLIC_URL", "https://user:pw@example.com"},
		{"RUSHGATE_DATAPLATFORM_URL", "not a url"},
		{"RUSHGATE_ALERT_WEBHOOK_URL", "example.com/hook"},
		{"RUSHGATE_RECONNECT_GRACE", "-1s"},
		{"RUSHGATE_LOCK_RETRIES", "-1"},
		{"RUSHGATE_UPLOAD_URL_EXPIRY", "500ms"},
		{"RUSHGATE_UPLOAD_URL_EXPIRY", "169h"}, // an S3 signature lasts at most a week
		{"RUSHGATE_UPLOAD_URL_EXPIRY", "168h"}, // … a second of which the S3 store keeps for rounding
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

// TestInstanceID_TakesWhatABrokerIDCanHold: host names, pod names and the like are taken as
// they are, and the instance's broker ids start with the instance id.
func TestInstanceID_TakesWhatABrokerIDCanHold(t *testing.T) {
	for _, id := range []string{"web-1", "rushgate-7d9f8c6b5-x2k4p", "eu-west.web_2:8080", "web 1"} {
		cfg := parseWith(t, "RUSHGATE_INSTANCE_ID", id)
		if err := cfg.Validate(); err != nil || !strings.HasPrefix(processID(cfg), id+"-") {
			t.Errorf("%q: %v, broker id %q", id, err, processID(cfg))
		}
	}
}

// A public URL behind a proxy that serves rushgate under a path is taken.
func TestPublicURL_TakesAPathPrefix(t *testing.T) {
	for _, u := range []string{"https://uploads.example.com", "http://127.0.0.1:8080/", "https://example.com/rushgate"} {
		if err := parseWith(t, "RUSHGATE_PUBLIC_URL", u).Validate(); err != nil {
			t.Errorf("%q: %v", u, err)
		}
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
	zeroMeansNone := map[string]bool{"RUSHGATE_RECONNECT_GRACE": true, "RUSHGATE_RAFFLE_DRAW_HOLD": true, "RUSHGATE_LOCK_RETRIES": true}
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

// TestConfig_DefaultsAreWrittenOnce: each default is set in its group's setDefaults only, so
// no env tag may carry one, and every field is read from a variable.
func TestConfig_DefaultsAreWrittenOnce(t *testing.T) {
	for _, field := range settingFields() {
		if field.Tag.Get("env") == "" {
			t.Errorf("%s has no env tag", field.Name)
		}
		if _, ok := field.Tag.Lookup("envDefault"); ok {
			t.Errorf("%s: the default belongs in its group's setDefaults, not in an envDefault tag", field.Tag.Get("env"))
		}
	}
}

// TestReadme_ListsEverySettingWithItsDefault: the README's settings table names every variable,
// and a row whose default is one value shows the value DefaultConfig has (a setting unset by
// default has its row say what unset means instead).
func TestReadme_ListsEverySettingWithItsDefault(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	// | `RUSHGATE_X` … | `default` | meaning |
	row := regexp.MustCompile("(?m)^\\| `(RUSHGATE_[A-Z0-9_]+)`[^|]*\\| `([^`|]*)` \\|")
	documented := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(string(readme), -1) {
		documented[m[1]] = m[2]
	}
	// | `RUSHGATE_X` (`serve --flag`) | … : every row names a variable rushgate reads.
	read := map[string]bool{}
	for _, field := range settingFields() {
		read[field.Tag.Get("env")] = true
	}
	for _, m := range regexp.MustCompile("(?m)^\\| `((?:RUSHGATE|OTEL)_[A-Z0-9_]+)`").FindAllStringSubmatch(string(readme), -1) {
		if !read[m[1]] {
			t.Errorf("README: the settings table lists %s, which no setting reads", m[1])
		}
	}
	defaults := reflect.ValueOf(DefaultConfig())
	for i := range defaults.NumField() {
		group := defaults.Field(i)
		for j := range group.NumField() {
			name := group.Type().Field(j).Tag.Get("env")
			// The S3 settings share one row, as _REGION (`us-east-1`) and the like.
			if suffix, ok := strings.CutPrefix(name, "RUSHGATE_S3"); ok && name != "RUSHGATE_S3_BUCKET" {
				if !strings.Contains(string(readme), "`"+suffix+"`") {
					t.Errorf("README: %s is not in the RUSHGATE_S3_BUCKET row", name)
				}
				continue
			}
			if !strings.Contains(string(readme), "`"+name+"`") {
				t.Errorf("README: %s is not in the settings table", name)
				continue
			}
			value, ok := documented[name]
			if !group.Field(j).IsZero() && !ok {
				t.Errorf("README: %s's row does not show its default, %s", name, settingText(group.Field(j)))
			} else if ok && !group.Field(j).IsZero() && value != settingText(group.Field(j)) {
				t.Errorf("README: %s defaults to %q, the table says %q", name, settingText(group.Field(j)), value)
			}
		}
	}
}

// settingFields are the fields of every group of Config.
func settingFields() []reflect.StructField {
	var fields []reflect.StructField
	groups := reflect.TypeFor[Config]()
	for i := range groups.NumField() {
		group := groups.Field(i).Type
		for j := range group.NumField() {
			fields = append(fields, group.Field(j))
		}
	}
	return fields
}

// settingText writes a setting's value as the environment gives it: 1h rather than 1h0m0s.
func settingText(v reflect.Value) string {
	switch value := v.Interface().(type) {
	case time.Duration:
		text := value.String()
		if strings.HasSuffix(text, "m0s") || strings.HasSuffix(text, "h0s") {
			text = strings.TrimSuffix(text, "0s")
		}
		if strings.HasSuffix(text, "h0m") {
			text = strings.TrimSuffix(text, "0m")
		}
		return text
	case []time.Duration:
		texts := make([]string, len(value))
		for i, d := range value {
			texts[i] = settingText(reflect.ValueOf(d))
		}
		return strings.Join(texts, ",")
	default:
		return fmt.Sprint(value)
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

// TestReadme_RedisURLFormsAreAccepted: each form of RUSHGATE_REDIS_URL the settings table shows
// (single, Cluster, Sentinel) passes the start's check.
func TestReadme_RedisURLFormsAreAccepted(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `RUSHGATE_REDIS_URL` .*$").FindString(string(readme))
	forms := regexp.MustCompile("`(rediss?://[^`]+)`").FindAllStringSubmatch(row, -1)
	if len(forms) < 3 {
		t.Fatalf("the RUSHGATE_REDIS_URL row shows %d URL forms: not read right", len(forms))
	}
	for _, form := range forms {
		url := strings.Replace(form[1], "[:pass@]", ":pass@", 1)
		if err := parseWith(t, "RUSHGATE_REDIS_URL", url).Validate(); err != nil {
			t.Errorf("%s: %v", url, err)
		}
	}
}

// RUSHGATE_LOCK_RETRIES=0 reaches the guard as no retries, not as the guard's default schedule.
func TestGuardRetries_ZeroIsNoneForTheGuard(t *testing.T) {
	for retries, want := range map[int]int{0: -1, 1: 1, 5: 5} {
		if got := guardRetries(retries); got != want {
			t.Errorf("guardRetries(%d) = %d, want %d", retries, got, want)
		}
	}
}
