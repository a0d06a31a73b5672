package main

import (
	"bytes"
	"strings"
	"testing"

	rghttp "github.com/rushgate/rushgate/adapters/http"
)

// TestServe_BadConfigurationStopsWithOneLine: each bad value names its variable.
func TestServe_BadConfigurationStopsWithOneLine(t *testing.T) {
	cases := []struct{ name, value, want string }{
		{"RUSHGATE_DB_TIMEOUT", "soon", "RUSHGATE_DB_TIMEOUT: "},
		{"RUSHGATE_LOCK_RETRIES", "-1", "RUSHGATE_LOCK_RETRIES: "},
		{"RUSHGATE_DATABASE_URL", "oracle://x/y", "RUSHGATE_DATABASE_URL: "},
		{"RUSHGATE_REDIS_URL", "http://x", "RUSHGATE_REDIS_URL: "},
		{"RUSHGATE_JWT_SECRET", "short", "RUSHGATE_JWT_SECRET: "},
		{"RUSHGATE_ADDR", "8080", "RUSHGATE_ADDR: "},
		{"RUSHGATE_MIGRATE", "maybe", "RUSHGATE_MIGRATE: "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(tc.name, tc.value)
			err := run([]string{"serve"}, &bytes.Buffer{})
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("want one line starting %q, got %q", tc.want, err)
			}
		})
	}
}

func TestServe_UnreachableDatabaseNamesIt(t *testing.T) {
	t.Setenv("RUSHGATE_DATABASE_URL", "postgres://postgres:secret@127.0.0.1:1/test?sslmode=disable")
	err := run([]string{"serve"}, &bytes.Buffer{})
	if err == nil {
		t.Fatal("serve started without its database")
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "database") || !strings.Contains(msg, "127.0.0.1:1") || strings.Contains(msg, "secret") || strings.Contains(msg, "\n") {
		t.Fatalf("unclear or leaky start error: %q", msg)
	}
}

func TestToken_MintsWhatTheServerAccepts(t *testing.T) {
	secret := strings.Repeat("s", 32)
	t.Setenv("RUSHGATE_JWT_SECRET", secret)
	var out bytes.Buffer
	if err := run([]string{"token", "--user", "U1", "--admin", "--ttl", "5m"}, &out); err != nil {
		t.Fatal(err)
	}
	p, err := rghttp.NewTokens([]byte(secret)).Verify(strings.TrimSpace(out.String()))
	if err != nil || p.UserID != "U1" || p.Role != rghttp.RoleAdmin {
		t.Fatalf("principal %+v, err %v", p, err)
	}
}

func TestToken_RequiresUserAndSecret(t *testing.T) {
	t.Setenv("RUSHGATE_JWT_SECRET", "")
	if err := run([]string{"token", "--user", "U1"}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "RUSHGATE_JWT_SECRET") {
		t.Fatalf("err %v", err)
	}
	if err := run([]string{"token"}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "--user") {
		t.Fatalf("err %v", err)
	}
}

func TestRun_UnknownCommandAndVersion(t *testing.T) {
	if err := run([]string{"launch"}, &bytes.Buffer{}); err == nil {
		t.Fatal("unknown command accepted")
	}
	var out bytes.Buffer
	if err := run([]string{"version"}, &out); err != nil || !strings.HasPrefix(out.String(), "rushgate ") {
		t.Fatalf("%q, %v", out.String(), err)
	}
}
