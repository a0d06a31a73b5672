package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	rghttp "github.com/rushgate/rushgate/adapters/http"
)

// runOnce runs a command line that must return on its own, failing the test if it has not
// within a few seconds (a server started by mistake would not).
func runOnce(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, &out, &errOut) }()
	select {
	case err = <-done:
		return out.String(), errOut.String(), err
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatalf("%v did not return: it started something (then %v)", args, <-done)
		return "", "", nil
	}
}

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
		{"RUSHGATE_READ_TIMEOUT", "0s", "RUSHGATE_READ_"},
		{"RUSHGATE_READ_HEADER_TIMEOUT", "-1s", "RUSHGATE_READ_HEADER_TIMEOUT: "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(tc.name, tc.value)
			_, _, err := runOnce(t, "serve")
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("want one line starting %q, got %q", tc.want, err)
			}
			if code := report(err, io.Discard); code != exitFailure {
				t.Fatalf("exit code %d, want %d", code, exitFailure)
			}
		})
	}
}

// TestServe_RoleFlagIsCheckedWithTheRest: --role broker without Redis is refused naming the
// setting, as RUSHGATE_ROLE=broker would be, not as a command line rushgate does not understand.
func TestServe_RoleFlagIsCheckedWithTheRest(t *testing.T) {
	_, _, err := runOnce(t, "serve", "--role", "broker")
	if err == nil || !strings.HasPrefix(err.Error(), "RUSHGATE_ROLE: broker needs RUSHGATE_REDIS_URL") {
		t.Fatalf("want a refusal naming RUSHGATE_ROLE, got %v", err)
	}
	if code := report(err, io.Discard); code != exitFailure {
		t.Fatalf("exit code %d, want %d", code, exitFailure)
	}
}

// TestServe_RoleFlagWinsOverTheVariable: --role all is taken whatever RUSHGATE_ROLE holds, a
// value it would refuse or one that needs Redis; the start then fails only on what the flag
// leaves (here the unreachable database), and a bad flag is named as the flag.
func TestServe_RoleFlagWinsOverTheVariable(t *testing.T) {
	t.Setenv("RUSHGATE_DATABASE_URL", "postgres://postgres@127.0.0.1:1/none?sslmode=disable")
	for _, variable := range []string{"bogus", "broker"} {
		t.Setenv("RUSHGATE_ROLE", variable)
		_, _, err := runOnce(t, "serve", "--role", "all")
		if err == nil || strings.Contains(err.Error(), "RUSHGATE_ROLE") {
			t.Fatalf("RUSHGATE_ROLE=%s with --role all: %v, want the flag to win", variable, err)
		}
	}
	_, _, err := runOnce(t, "serve", "--role", "both")
	var usage *usageError
	if !errors.As(err, &usage) || !strings.Contains(err.Error(), `--role: "both"`) {
		t.Fatalf("--role both: %v, want a usage error naming the flag", err)
	}
}

func TestServe_UnreachableDatabaseNamesIt(t *testing.T) {
	t.Setenv("RUSHGATE_DATABASE_URL", "postgres://postgres:secret@127.0.0.1:1/test?sslmode=disable")
	_, _, err := runOnce(t, "serve")
	if err == nil {
		t.Fatal("serve started without its database")
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "RUSHGATE_DATABASE_URL: ") || !strings.Contains(msg, "127.0.0.1:1") || strings.Contains(msg, "secret") || strings.Contains(msg, "\n") {
		t.Fatalf("unclear or leaky start error: %q", msg)
	}
}

// exportLine matches a line of the ready-to-paste block serve prints without a secret.
var exportLine = regexp.MustCompile(`^export (RUSHGATE_ADMIN_TOKEN|RUSHGATE_USER\d*_TOKEN)=(\S+)$`)

// printedTokens are the variables serve prints without a secret: an admin and three users.
var printedTokens = []string{"RUSHGATE_ADMIN_TOKEN", "RUSHGATE_USER_TOKEN", "RUSHGATE_USER2_TOKEN", "RUSHGATE_USER3_TOKEN"}

// TestServe_WithoutSecretPrintsTokensToPaste: the embedded default prints, on stderr, shell
// lines setting an admin token and three user tokens, and those tokens work: the admin creates
// a crew and each user joins it as a different member.
func TestServe_WithoutSecretPrintsTokensToPaste(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	t.Setenv("RUSHGATE_ADDR", addr)
	t.Setenv("RUSHGATE_JWT_SECRET", "")
	t.Setenv("RUSHGATE_LOG_LEVEL", "error")
	ctx, cancel := context.WithCancel(context.Background())
	stderr, stderrW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, []string{"serve"}, io.Discard, stderrW)
		_ = stderrW.Close() // ends the reader below if serve stops early
		done <- err
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve stopped with %v", err)
		}
	}()

	// Read stderr line by line until every token is seen, then drain it so serve never blocks.
	printed := make(chan map[string]string, 1)
	go func() {
		tokens := map[string]string{}
		lines := bufio.NewScanner(stderr)
		for len(tokens) < len(printedTokens) && lines.Scan() {
			if m := exportLine.FindStringSubmatch(lines.Text()); m != nil {
				tokens[m[1]] = m[2]
			}
		}
		printed <- tokens
		_, _ = io.Copy(io.Discard, stderr)
	}()
	var tokens map[string]string
	select {
	case tokens = <-printed:
	case <-time.After(10 * time.Second):
		t.Fatal("no ready-to-paste tokens on stderr within 10s")
	}
	for _, name := range printedTokens {
		if tokens[name] == "" {
			t.Fatalf("serve did not print %s: %v", name, tokens)
		}
	}

	base := "http://" + addr
	created := call(t, "POST", base+"/crews", tokens["RUSHGATE_ADMIN_TOKEN"], `{"name":"runners","maxMembers":50}`)
	if created.status != http.StatusCreated {
		t.Fatalf("create with the printed admin token: %d %s", created.status, created.body)
	}
	crewID := regexp.MustCompile(`"id":"([^"]+)"`).FindStringSubmatch(created.body)[1]
	for i, name := range printedTokens[1:] {
		joined := call(t, "POST", base+"/crews/"+crewID+"/join", tokens[name], "", "Idempotency-Key", "k1")
		want := fmt.Sprintf(`"currentMembers":%d`, i+1)
		if joined.status != http.StatusCreated || !strings.Contains(joined.body, want) {
			t.Fatalf("join with %s: %d %s, want 201 with %s", name, joined.status, joined.body, want)
		}
	}
}

type answer struct {
	status int
	body   string
}

// call sends one request with a bearer token; headers are name, value pairs.
func call(t *testing.T, method, url, token, body string, headers ...string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return answer{status: res.StatusCode, body: string(raw)}
}

func TestToken_MintsWhatTheServerAccepts(t *testing.T) {
	secret := strings.Repeat("s", 32)
	t.Setenv("RUSHGATE_JWT_SECRET", secret)
	out, _, err := runOnce(t, "token", "--user", "U1", "--admin", "--ttl", "5m")
	if err != nil {
		t.Fatal(err)
	}
	p, err := rghttp.NewTokens([]byte(secret)).Verify(strings.TrimSpace(out))
	if err != nil || p.UserID != "U1" || p.Role != rghttp.RoleAdmin {
		t.Fatalf("principal %+v, err %v", p, err)
	}
}

// TestToken_RefusesWhatServeWouldRefuse: no token is minted with a secret, or a configuration,
// that serve would not start with.
func TestToken_RefusesWhatServeWouldRefuse(t *testing.T) {
	cases := []struct {
		name, secret, otherVar, otherValue, want string
	}{
		{"no secret", "", "", "", "RUSHGATE_JWT_SECRET: required"},
		{"short secret", "short", "", "", "RUSHGATE_JWT_SECRET: must be at least 32 bytes"},
		{"bad setting elsewhere", strings.Repeat("s", 32), "RUSHGATE_LOG_LEVEL", "loud", "RUSHGATE_LOG_LEVEL: "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("RUSHGATE_JWT_SECRET", tc.secret)
			if tc.otherVar != "" {
				t.Setenv(tc.otherVar, tc.otherValue)
			}
			out, _, err := runOnce(t, "token", "--user", "U1")
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) || out != "" {
				t.Fatalf("want an error starting %q and no token, got %q, %v", tc.want, out, err)
			}
		})
	}
}

// TestRun_EveryCommandAnswersHelp: --help (and -h) prints the usage on stdout and exits 0
// without running anything, serve included.
func TestRun_EveryCommandAnswersHelp(t *testing.T) {
	for _, args := range [][]string{
		{"--help"}, {"-h"}, {"help"},
		{"serve", "--help"}, {"serve", "-h"},
		{"migrate", "--help"},
		{"token", "--help"},
		{"version", "--help"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			out, errOut, err := runOnce(t, args...)
			if err != nil || report(err, io.Discard) != 0 {
				t.Fatalf("err %v", err)
			}
			if !strings.HasPrefix(out, "usage: rushgate") || errOut != "" {
				t.Fatalf("stdout %q, stderr %q", out, errOut)
			}
			if args[0] == "token" && !strings.Contains(out, "-user") {
				t.Fatalf("token's help lists no flags: %q", out)
			}
			for _, c := range commands {
				if len(args) == 1 && !strings.Contains(out, "\n  "+c.name+" ") {
					t.Fatalf("the usage does not list %s: %q", c.name, out)
				}
			}
		})
	}
}

// TestRun_RefusesWhatItDoesNotKnow: an unknown command, flag or argument prints the problem
// and a usage line and exits 2, without running anything.
func TestRun_RefusesWhatItDoesNotKnow(t *testing.T) {
	t.Setenv("RUSHGATE_JWT_SECRET", strings.Repeat("s", 32))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "missing command"},
		{[]string{"launch"}, `unknown command "launch"`},
		{[]string{"serve", "--port", "9000"}, "-port"},
		{[]string{"serve", "now"}, `unexpected argument "now"`},
		{[]string{"migrate", "--force"}, "-force"},
		{[]string{"token", "--user", "U1", "extra"}, `unexpected argument "extra"`},
		{[]string{"token", "--ttl", "forever", "--user", "U1"}, "-ttl"},
		{[]string{"token"}, "--user is required"},
		{[]string{"version", "--json"}, "-json"},
	} {
		t.Run(fmt.Sprint(tc.args), func(t *testing.T) {
			out, _, err := runOnce(t, tc.args...)
			if _, ok := errors.AsType[*usageError](err); !ok || !strings.Contains(err.Error(), tc.want) || out != "" {
				t.Fatalf("want a usage error mentioning %q and no output, got %v, %q", tc.want, err, out)
			}
			var stderr bytes.Buffer
			if code := report(err, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "\nusage: rushgate") {
				t.Fatalf("exit code %d, stderr %q", code, stderr.String())
			}
		})
	}
}

// TestRun_VersionWithoutBuildInfo: a test binary carries no module version and no VCS stamp,
// so version prints the fallbacks.
func TestRun_VersionWithoutBuildInfo(t *testing.T) {
	out, _, err := runOnce(t, "version")
	if want := "rushgate dev (revision unknown)\n"; err != nil || out != want {
		t.Fatalf("got %q, %v; want %q", out, err, want)
	}
}

// TestServe_UnreachablePostgresIsOneLine: pgx's connection error puts each address it tried on
// a line of its own; the start still stops with one line on stderr naming the variable.
func TestServe_UnreachablePostgresIsOneLine(t *testing.T) {
	addr := closedAddr(t)
	t.Setenv("RUSHGATE_DATABASE_URL", "postgres://nobody@"+addr+"/x")
	_, _, err := runOnce(t, "serve")
	if err == nil {
		t.Fatal("serve started without its database")
	}
	var stderr bytes.Buffer
	if code := report(err, &stderr); code != exitFailure {
		t.Fatalf("exit code %d, want %d", code, exitFailure)
	}
	if line := stderr.String(); !strings.HasPrefix(line, "rushgate: RUSHGATE_DATABASE_URL: ") ||
		strings.Count(line, "\n") != 1 || !strings.Contains(line, addr) {
		t.Fatalf("stderr is not one line naming RUSHGATE_DATABASE_URL and %s: %q", addr, line)
	}
}

func TestOneLine_JoinsAnErrorsLines(t *testing.T) {
	for text, want := range map[string]string{
		"RUSHGATE_X: bad":                        "RUSHGATE_X: bad",
		"connect:\n\ta: refused\n\tb: refused\n": "connect: a: refused; b: refused",
	} {
		if got := oneLine(text); got != want {
			t.Errorf("oneLine(%q) = %q, want %q", text, got, want)
		}
	}
}
