// Command rushgate-load drives one or more rushgate servers with a scenario and prints one table
// per run: throughput, exact latency percentiles, answers per status, the invariant read back
// from the database, the "ceiling" — the equivalent transaction issued directly through
// database/sql at the same concurrency, i.e. what the database alone can do (raw ZADD for
// queue-pull, a bare GET /healthz for queue-push) — and each target
// the scenario is judged on, with PASS or MISS next to the value it judges.
//
//	rushgate-load [flags] <scenario>
//	rushgate-load -list      the registered scenarios, one per line (-h describes them)
//
// --url may be repeated or comma-separated: request i goes to server i mod n.
//
// It exits 1 when the invariant fails, any response is a 5xx or a transport error, or a ceiling
// transaction fails; 2 when the run could not be set up. A missed performance target is
// reported (MISS) and does not change the exit status; 429s are counted, never a failure.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/rushgate/rushgate/adapters/gormdb"
	rghttp "github.com/rushgate/rushgate/adapters/http"
	appwaiting "github.com/rushgate/rushgate/application/waiting"
)

// config is the parsed command line.
type config struct {
	scenario    string
	urls        []string
	databaseURL string
	redisURL    string
	jwtSecret   string
	users       int
	// usersPerInstance, when set, is --users per server: --users is it × the servers.
	usersPerInstance int
	capacity         int
	concurrency      int
	crews            int
	orderItems       int
	// queueTick is the servers' RUSHGATE_QUEUE_TICK: the waiting-room scenarios' targets are
	// counted in ticks.
	queueTick time.Duration
	noCeiling bool
	list      bool // print the scenario names instead of running one
	timeout   time.Duration
	summary   string
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == streamClientCommand {
		if err := runStreamClient(os.Args[2:], os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "rushgate-load stream client:", err)
			os.Exit(2)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	passed, err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case errors.Is(err, flag.ErrHelp):
		return
	case err != nil:
		fmt.Fprintln(os.Stderr, "rushgate-load:", err)
		os.Exit(2)
	case !passed:
		os.Exit(1)
	}
}

// run parses args, runs the scenario, its invariant check and its ceiling, judges it and prints
// the table to stdout. It reports whether the run passed; err means it could not be carried out.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) (bool, error) {
	cfg, err := parseArgs(args, stderr)
	if err != nil {
		return false, err
	}
	if cfg.list {
		_, err := fmt.Fprintln(stdout, strings.Join(scenarioNames(), "\n"))
		return err == nil, err
	}
	passed, err := runScenario(ctx, cfg, stdout, stderr)
	if err != nil && cfg.summary != "" {
		// The summary of many runs still shows this one; the error itself goes to stderr.
		if serr := appendSummary(cfg.summary, unrunRow(cfg)); serr != nil {
			progress(stderr, "rushgate-load: %v\n", serr)
		}
	}
	return passed, err
}

// runScenario runs the scenario cfg names, prints its report and appends its summary line.
func runScenario(ctx context.Context, cfg config, stdout, stderr io.Writer) (bool, error) {
	reg, err := lookup(cfg.scenario)
	if err != nil {
		return false, err
	}
	sc, err := reg.build(cfg)
	if err != nil {
		return false, err
	}

	var db *gormdb.DB
	dialect := gormdb.Dialect("memory")
	switch _, optional := sc.(databaseOptional); {
	case cfg.databaseURL != "":
		if db, err = gormdb.Open(ctx, cfg.databaseURL, gormdb.Options{}); err != nil {
			return false, fmt.Errorf("--database-url: %w", err)
		}
		defer func() { _ = db.Close() }()
		// Opened whole, as `rushgate serve` opens its own before it answers: a ceiling run that
		// opened its connections as its burst came paid for that inside its timed window and the
		// servers did not, which flattered every ratio against it in a run of a second or two.
		if err := db.Fill(ctx); err != nil {
			return false, fmt.Errorf("--database-url: %w", err)
		}
		dialect = db.Dialect()
	case !optional:
		return false, errors.New("--database-url (or RUSHGATE_DATABASE_URL) is required: the invariant is read from the database")
	default:
		cfg.noCeiling = true
		progress(stderr, "no --database-url: the invariant is read through the API, and there is no ceiling\n")
	}
	runID, err := newRunID()
	if err != nil {
		return false, err
	}
	e := &env{
		runID:       runID,
		api:         newInstances(cfg.urls, cfg.concurrency, cfg.timeout),
		tokens:      rghttp.NewTokens([]byte(cfg.jwtSecret)),
		db:          db,
		timeout:     cfg.timeout,
		concurrency: cfg.concurrency,
		redisURL:    cfg.redisURL,
		stderr:      stderr,
	}

	progress(stderr, "run %s: %s: preparing %s\n", runID, reg.name, sc.shape())
	if err := sc.prepare(ctx, e); err != nil {
		return false, err
	}
	var meter *cpuMeter
	if m, ok := newCPUMeter(cfg.urls); ok {
		meter = &m
	}
	progress(stderr, "run %s: %s against %s at concurrency %d\n", runID, reg.name, strings.Join(cfg.urls, ", "), cfg.concurrency)
	attempts, stats := timedRun(ctx, sc.run(e), cfg.concurrency, meter)
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("interrupted during the rushgate run: %w", err)
	}
	rep := report{
		scenario:    reg.name,
		shape:       sc.shape(),
		dialect:     dialect,
		instances:   len(cfg.urls),
		concurrency: cfg.concurrency,
		runID:       runID,
		rushgate:    stats,
		ceilingName: ceilingName(sc),
	}
	if rep.invariant, err = sc.invariant(ctx, e, attempts); err != nil {
		return false, err
	}

	if !cfg.noCeiling {
		progress(stderr, "run %s: ceiling, the same work through %s\n", runID, rep.ceilingName)
		w, err := sc.ceiling(ctx, e)
		if err != nil {
			return false, err
		}
		_, ceiling := timedRun(ctx, w, cfg.concurrency, meter)
		if err := ctx.Err(); err != nil {
			return false, fmt.Errorf("interrupted during the ceiling run: %w", err)
		}
		rep.ceiling = &ceiling
	}

	rep.verdicts = judgeAll(sc.targets(dialect),
		measurement{rushgate: rep.rushgate, ceiling: rep.ceiling, concurrency: cfg.concurrency})
	if err := rep.write(stdout); err != nil {
		return false, fmt.Errorf("write report: %w", err)
	}
	if cfg.summary != "" {
		if err := appendSummary(cfg.summary, rep.summaryRow()); err != nil {
			return false, err
		}
	}
	return len(rep.failures()) == 0, nil
}

// timedRun runs w at concurrency and summarises it, with the CPU each process spent per request
// when meter is set.
func timedRun(ctx context.Context, w work, concurrency int, meter *cpuMeter) ([]attempt, runStats) {
	var before cpuTimes
	if meter != nil {
		before = meter.read()
	}
	attempts, elapsed := runConcurrently(ctx, w, concurrency)
	stats := statsOf(attempts, elapsed)
	if meter != nil {
		stats.cpuPerRequest = perRequest(before, meter.read(), stats.total)
	}
	return attempts, stats
}

// appendSummary adds row to the tab-separated summary file at path, with the header first when
// the file is new.
func appendSummary(path string, row []string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("--summary: %w", err)
	}
	info, err := f.Stat()
	if err == nil && info.Size() == 0 {
		_, err = fmt.Fprintln(f, strings.Join(summaryHeader, "\t"))
	}
	if err == nil {
		_, err = fmt.Fprintln(f, strings.Join(row, "\t"))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("--summary: %w", err)
	}
	return nil
}

// unrunRow is the summary line of a run that could not be carried out. The database column is
// the dialect gormdb reads off the URL, as in a run's row; never the URL, which may hold a
// password.
func unrunRow(cfg config) []string {
	dialect, _, err := gormdb.ParseURL(cfg.databaseURL)
	if err != nil {
		dialect = "-"
	}
	row := []string{cfg.scenario, string(dialect), fmt.Sprint(len(cfg.urls))}
	for len(row) < len(summaryHeader)-1 {
		row = append(row, "-")
	}
	return append(row, "could not run")
}

// usage lists the registered scenarios; the flags follow.
func usage() string {
	var b strings.Builder
	b.WriteString("usage: rushgate-load [flags] <scenario>\n\nscenarios:\n")
	for _, r := range registry {
		fmt.Fprintf(&b, "  %-18s  %s\n", r.name, r.summary)
		if len(r.defaults) > 0 {
			fmt.Fprintf(&b, "  %-18s  (unless given: %s)\n", "", defaultFlags(r.defaults))
		}
	}
	b.WriteString("\nflags:\n")
	return b.String()
}

// parseArgs reads flags, then the scenario, then any flags after it.
func parseArgs(args []string, stderr io.Writer) (config, error) {
	cfg := config{}
	urls := urlList{urls: []string{"http://127.0.0.1:8080"}}
	fs := flag.NewFlagSet("rushgate-load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		progress(stderr, "%s", usage())
		fs.PrintDefaults()
	}
	fs.Var(&urls, "url", "rushgate base URL; repeat it or separate URLs with commas to spread requests round-robin over several instances")
	fs.StringVar(&cfg.databaseURL, "database-url", os.Getenv("RUSHGATE_DATABASE_URL"),
		"the servers' database, same form as RUSHGATE_DATABASE_URL (default $RUSHGATE_DATABASE_URL); required for the invariant and the ceiling, except by verification-flow against the embedded default")
	fs.StringVar(&cfg.redisURL, "redis-url", os.Getenv("RUSHGATE_REDIS_URL"),
		"queue-pull: the servers' Redis, same form as RUSHGATE_REDIS_URL (default $RUSHGATE_REDIS_URL); its ceiling is raw ZADD there")
	fs.StringVar(&cfg.jwtSecret, "jwt-secret", os.Getenv("RUSHGATE_JWT_SECRET"),
		"the servers' HS256 secret, to mint tokens (default $RUSHGATE_JWT_SECRET)")
	fs.IntVar(&cfg.users, "users", 2000, "number of users, one request each (charge-herd: number of charges)")
	fs.IntVar(&cfg.usersPerInstance, "users-per-instance", 0, "instead of --users: this many users for each --url, so one command sizes the one- and two-instance runs alike")
	fs.IntVar(&cfg.capacity, "capacity", 100, "crew-herd: the crew's maxMembers (crew-hot's crew has a seat per user); coupon-herd: the coupon's quantity; queue-pull: the slots; seat-herd: the seats")
	fs.IntVar(&cfg.concurrency, "concurrency", 64, "requests (and ceiling transactions) in flight")
	fs.IntVar(&cfg.crews, "crews", 200, "crew-spread: number of crews")
	fs.IntVar(&cfg.orderItems, "order-items", 100000, "top-products: order lines written before the reads (1000000 takes minutes)")
	tick, err := serverQueueTick()
	if err != nil {
		return config{}, err
	}
	fs.DurationVar(&cfg.queueTick, "queue-tick", tick, "the servers' RUSHGATE_QUEUE_TICK (default $RUSHGATE_QUEUE_TICK, else the server's default): soldout and the prequeue-open scenarios' targets are two ticks")
	fs.BoolVar(&cfg.list, "list", false, "print the scenario names, one per line, and exit")
	fs.BoolVar(&cfg.noCeiling, "no-ceiling", false, "skip the ceiling run (ratios are then not judged)")
	fs.DurationVar(&cfg.timeout, "timeout", 10*time.Second, "per request (and per ceiling transaction)")
	fs.StringVar(&cfg.summary, "summary", "", "append one tab-separated summary line of the run to this file (header first if new)")

	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if cfg.list {
		return cfg, nil
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return config{}, fmt.Errorf("missing scenario: one of %s", strings.Join(scenarioNames(), ", "))
	}
	cfg.scenario = fs.Arg(0)
	if err := fs.Parse(fs.Args()[1:]); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments after the scenario: %q", fs.Args())
	}
	usersGiven := false
	fs.Visit(func(f *flag.Flag) { usersGiven = usersGiven || f.Name == "users" })
	if err := applyScenarioDefaults(fs, cfg.scenario); err != nil {
		return config{}, err
	}
	cfg.urls = urls.urls
	if cfg.usersPerInstance != 0 {
		if usersGiven {
			return config{}, errors.New("--users and --users-per-instance exclude each other")
		}
		cfg.users = cfg.usersPerInstance * len(cfg.urls)
	}

	switch {
	case cfg.jwtSecret == "":
		return config{}, errors.New("--jwt-secret (or RUSHGATE_JWT_SECRET) is required: tokens are minted with the servers' secret")
	case cfg.users < 1:
		return config{}, errors.New("--users must be at least 1")
	case cfg.concurrency < 1:
		return config{}, errors.New("--concurrency must be at least 1")
	case cfg.timeout <= 0:
		return config{}, errors.New("--timeout must be positive")
	case cfg.queueTick <= 0:
		return config{}, errors.New("--queue-tick must be positive")
	}
	return cfg, nil
}

// serverQueueTick is the tick the servers run with: $RUSHGATE_QUEUE_TICK as they read it (the
// load tool runs in the environment make load starts them in), else their default.
func serverQueueTick() (time.Duration, error) {
	raw := os.Getenv("RUSHGATE_QUEUE_TICK")
	if raw == "" {
		return appwaiting.DefaultTick, nil
	}
	tick, err := time.ParseDuration(raw)
	if err != nil {
		return 0, fmt.Errorf("RUSHGATE_QUEUE_TICK: %w", err)
	}
	return tick, nil
}

// applyScenarioDefaults sets the flags the command line left out to the scenario's own defaults.
func applyScenarioDefaults(fs *flag.FlagSet, scenario string) error {
	reg, err := lookup(scenario)
	if err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for name, value := range reg.defaults {
		if given[name] {
			continue
		}
		if err := fs.Set(name, value); err != nil {
			return fmt.Errorf("%s's default --%s=%s: %w", scenario, name, value, err)
		}
	}
	return nil
}

// defaultFlags renders a scenario's defaults as flags, in name order.
func defaultFlags(defaults flagValues) string {
	names := slices.Sorted(maps.Keys(defaults))
	flags := make([]string, len(names))
	for i, name := range names {
		flags[i] = "--" + name + " " + defaults[name]
	}
	return strings.Join(flags, " ")
}

// progress writes a line for the person watching; stderr failing must not stop the run.
func progress(stderr io.Writer, format string, args ...any) {
	_, _ = fmt.Fprintf(stderr, format, args...)
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
