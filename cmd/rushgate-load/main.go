// Command rushgate-load drives a running rushgate server with a crew-join stampede and prints one
// table: throughput, exact latency percentiles, responses per status code, the SPEC §1 invariant
// read back from the database, and the "ceiling" — the same join transaction issued directly
// through database/sql at the same concurrency, i.e. what the database alone can do.
//
//	rushgate-load [flags] crew-herd     --users join ONE crew of --capacity seats
//	rushgate-load [flags] crew-spread   --users joins spread over --crews crews (no contention)
//
// It exits 1 when the invariant fails, any response is a 5xx or a transport error, or a ceiling
// transaction fails; 2 when the run could not be set up.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rushgate/rushgate/adapters/gormdb"
	rghttp "github.com/rushgate/rushgate/adapters/http"
)

const usage = `usage: rushgate-load [flags] <scenario>

scenarios:
  crew-herd     --users users join ONE crew of --capacity seats (the stampede)
  crew-spread   --users joins spread over --crews crews, each sized to hold all it is sent

flags:
`

// config is the parsed command line.
type config struct {
	scenario    string
	url         string
	databaseURL string
	jwtSecret   string
	users       int
	capacity    int
	concurrency int
	crews       int
	noCeiling   bool
	timeout     time.Duration
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	passed, err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "rushgate-load:", err)
		os.Exit(2)
	}
	if !passed {
		os.Exit(1)
	}
}

// run parses args, runs the scenario, its invariant check and the ceiling, and prints the table
// to stdout. It reports whether the run passed; err means it could not be carried out.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) (bool, error) {
	cfg, err := parseArgs(args, stderr)
	if err != nil {
		return false, err
	}
	sc, err := newScenario(cfg)
	if err != nil {
		return false, err
	}

	db, err := gormdb.Open(ctx, cfg.databaseURL, gormdb.Options{})
	if err != nil {
		return false, fmt.Errorf("--database-url: %w", err)
	}
	defer db.Close()

	runID, err := newRunID()
	if err != nil {
		return false, err
	}
	target := newTarget(cfg.url, cfg.concurrency, cfg.timeout, rghttp.NewTokens([]byte(cfg.jwtSecret)))

	fmt.Fprintf(stderr, "run %s: creating %d crew(s) and minting %d tokens\n", runID, sc.crews, sc.users)
	joins, crewIDs, err := prepareJoins(ctx, target, sc, runID)
	if err != nil {
		return false, err
	}
	fmt.Fprintf(stderr, "run %s: %d joins against %s at concurrency %d\n", runID, sc.users, cfg.url, cfg.concurrency)
	attempts, elapsed := runConcurrently(ctx, len(joins), cfg.concurrency, func(ctx context.Context, i int) attempt {
		return target.join(ctx, joins[i])
	})
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("interrupted during the rushgate run: %w", err)
	}

	rep := report{
		scenario:    sc,
		dialect:     db.Dialect(),
		concurrency: cfg.concurrency,
		runID:       runID,
		rushgate:    statsOf(attempts, elapsed),
	}
	if rep.invariant, err = checkInvariant(ctx, db, sc, crewIDs); err != nil {
		return false, err
	}
	if !cfg.noCeiling {
		fmt.Fprintf(stderr, "run %s: ceiling, %d join transactions through database/sql\n", runID, sc.users)
		ceiling, err := runCeiling(ctx, db, sc, runID, cfg.concurrency, cfg.timeout)
		if err != nil {
			return false, err
		}
		rep.ceiling = &ceiling
	}
	if err := rep.write(stdout); err != nil {
		return false, fmt.Errorf("write report: %w", err)
	}
	return len(rep.failures()) == 0, nil
}

// parseArgs reads flags, then the scenario, then any flags after it.
func parseArgs(args []string, stderr io.Writer) (config, error) {
	cfg := config{}
	fs := flag.NewFlagSet("rushgate-load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	fs.StringVar(&cfg.url, "url", "http://127.0.0.1:8080", "rushgate base URL")
	fs.StringVar(&cfg.databaseURL, "database-url", os.Getenv("RUSHGATE_DATABASE_URL"),
		"the server's database, same form as RUSHGATE_DATABASE_URL (default $RUSHGATE_DATABASE_URL); required for the invariant and the ceiling")
	fs.StringVar(&cfg.jwtSecret, "jwt-secret", os.Getenv("RUSHGATE_JWT_SECRET"),
		"the server's HS256 secret, to mint tokens (default $RUSHGATE_JWT_SECRET)")
	fs.IntVar(&cfg.users, "users", 2000, "number of users, one join each")
	fs.IntVar(&cfg.capacity, "capacity", 100, "crew-herd: the crew's maxMembers")
	fs.IntVar(&cfg.concurrency, "concurrency", 64, "requests (and ceiling transactions) in flight")
	fs.IntVar(&cfg.crews, "crews", 200, "crew-spread: number of crews")
	fs.BoolVar(&cfg.noCeiling, "no-ceiling", false, "skip the database/sql ceiling run")
	fs.DurationVar(&cfg.timeout, "timeout", 10*time.Second, "per request (and per ceiling transaction)")

	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return config{}, errors.New("missing scenario: crew-herd or crew-spread")
	}
	cfg.scenario = fs.Arg(0)
	if err := fs.Parse(fs.Args()[1:]); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments after the scenario: %q", fs.Args())
	}

	switch {
	case cfg.databaseURL == "":
		return config{}, errors.New("--database-url (or RUSHGATE_DATABASE_URL) is required: the invariant is read from the database")
	case cfg.jwtSecret == "":
		return config{}, errors.New("--jwt-secret (or RUSHGATE_JWT_SECRET) is required: tokens are minted with the server's secret")
	case cfg.users < 1:
		return config{}, errors.New("--users must be at least 1")
	case cfg.concurrency < 1:
		return config{}, errors.New("--concurrency must be at least 1")
	case cfg.timeout <= 0:
		return config{}, errors.New("--timeout must be positive")
	}
	return cfg, nil
}

// newRunID returns a short random id that keeps this run's users, keys and crews apart from
// earlier runs against the same database.
func newRunID() (string, error) {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("run id: %w", err)
	}
	return hex.EncodeToString(b), nil
}
