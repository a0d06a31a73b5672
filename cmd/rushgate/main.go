// Command rushgate serves the rushgate HTTP API and runs its operational tasks.
//
//	rushgate serve                                   run the server (in-memory without configuration)
//	rushgate migrate                                 apply the database schema of RUSHGATE_DATABASE_URL
//	rushgate token --user U1 [--admin] [--ttl 1h]    mint a JWT with RUSHGATE_JWT_SECRET
//	rushgate version                                 print the module version and VCS revision
//
// Every command answers --help (exit 0) and refuses arguments it does not know (exit 2).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"go.uber.org/fx"

	"github.com/rushgate/rushgate/adapters/gormdb"
	rghttp "github.com/rushgate/rushgate/adapters/http"
	"github.com/rushgate/rushgate/adapters/system"
	"github.com/rushgate/rushgate/bootstrap"
)

// Exit codes: a failure, and a command line rushgate does not understand (as package flag).
const (
	exitFailure = 1
	exitUsage   = 2
)

// command is one subcommand: its name, its synopsis and description for --help, and prepare,
// which declares its flags on fs and returns the function that runs it once they are parsed.
type command struct {
	name        string
	synopsis    string
	description string
	prepare     func(fs *flag.FlagSet) func(ctx context.Context, stdout, stderr io.Writer) error
}

// commands are the subcommands, in the order the usage lists them.
var commands = []command{
	{
		name:        "serve",
		synopsis:    "rushgate serve [--role all|broker|dispatcher]",
		description: "Run the HTTP server: in-memory adapters unless RUSHGATE_DATABASE_URL and RUSHGATE_REDIS_URL are set.",
		prepare: func(fs *flag.FlagSet) func(context.Context, io.Writer, io.Writer) error {
			role := fs.String("role", "", "push-mode role: all, broker or dispatcher (default RUSHGATE_ROLE, else all)")
			return func(ctx context.Context, _, stderr io.Writer) error { return serve(ctx, stderr, *role) }
		},
	},
	{
		name:        "migrate",
		synopsis:    "rushgate migrate",
		description: "Apply the database schema to RUSHGATE_DATABASE_URL.",
		prepare: func(*flag.FlagSet) func(context.Context, io.Writer, io.Writer) error {
			return func(ctx context.Context, stdout, _ io.Writer) error { return migrate(ctx, stdout) }
		},
	},
	{
		name:        "token",
		synopsis:    tokenSynopsis,
		description: "Mint a JWT with RUSHGATE_JWT_SECRET, checked as serve checks it.",
		prepare: func(fs *flag.FlagSet) func(context.Context, io.Writer, io.Writer) error {
			user := fs.String("user", "", "user id (the token's sub); required")
			admin := fs.Bool("admin", false, "grant the admin role")
			ttl := fs.Duration("ttl", time.Hour, "lifetime")
			return func(_ context.Context, stdout, _ io.Writer) error {
				if *user == "" {
					return &usageError{problem: "--user is required", synopsis: tokenSynopsis}
				}
				return token(*user, *admin, *ttl, stdout)
			}
		},
	},
	{
		name:        "version",
		synopsis:    "rushgate version",
		description: "Print rushgate's module version and the VCS revision it was built from.",
		prepare: func(*flag.FlagSet) func(context.Context, io.Writer, io.Writer) error {
			return func(_ context.Context, stdout, _ io.Writer) error {
				b := system.ReadBuild()
				fmt.Fprintf(stdout, "rushgate %s (revision %s)\n", b.Version, b.Revision)
				return nil
			}
		},
	},
}

const tokenSynopsis = "rushgate token --user U1 [--admin] [--ttl 1h]"

// topSynopsis is the usage line of rushgate itself; printUsage lists the commands under it.
const topSynopsis = "rushgate <command> [flags]"

// printUsage lists the commands with their descriptions.
func printUsage(w io.Writer) {
	fmt.Fprintf(w, "usage: %s\n\ncommands:\n", topSynopsis)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.description)
	}
	fmt.Fprint(w, "\nRun \"rushgate <command> --help\" for a command's flags. Settings are RUSHGATE_* environment\n"+
		"variables; see the README.\n")
}

// findCommand returns the command called name.
func findCommand(name string) (command, bool) {
	i := slices.IndexFunc(commands, func(c command) bool { return c.name == name })
	if i < 0 {
		return command{}, false
	}
	return commands[i], true
}

// topHint is the usage line printed under a missing or unknown command.
const topHint = topSynopsis + "; rushgate --help lists the commands"

// usageError is a command line rushgate does not understand. main prints it with the usage
// line and exits 2.
type usageError struct {
	problem  string
	synopsis string
}

func (e *usageError) Error() string { return e.problem }

func main() {
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		if err := execWithSlowSysmon(); err != nil {
			fmt.Fprintf(os.Stderr, "rushgate: serving without GODEBUG=%s: %v\n", slowSysmon, err)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(report(err, os.Stderr))
}

// report prints err, if any, and returns the exit code for it.
func report(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	if usage, ok := errors.AsType[*usageError](err); ok {
		fmt.Fprintf(stderr, "rushgate: %s\nusage: %s\n", usage.problem, usage.synopsis)
		return exitUsage
	}
	fmt.Fprintln(stderr, "rushgate:", oneLine(err.Error()))
	return exitFailure
}

// oneLine joins the lines of an error's text, so that a failed start is one line on stderr
// whatever a driver's error holds: pgx puts each address it tried on an indented line of its
// own. A line ending in ':' runs on into the next; the others are separated by "; ".
func oneLine(text string) string {
	var b strings.Builder
	for i, line := range strings.Split(strings.TrimSpace(text), "\n") {
		line = strings.TrimSpace(line)
		if i > 0 && !strings.HasSuffix(b.String(), ":") {
			b.WriteString(";")
		}
		if i > 0 {
			b.WriteString(" ")
		}
		b.WriteString(line)
	}
	return b.String()
}

// run runs the command line args until it is done or ctx ends (serve stops gracefully then).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return &usageError{problem: "missing command", synopsis: topHint}
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		printUsage(stdout)
		return nil
	}
	cmd, ok := findCommand(name)
	if !ok {
		return &usageError{problem: fmt.Sprintf("unknown command %q", name), synopsis: topHint}
	}
	fs := flag.NewFlagSet("rushgate "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported once, by report
	runCommand := cmd.prepare(fs)
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printHelp(stdout, cmd, fs)
			return nil
		}
		return &usageError{problem: err.Error(), synopsis: cmd.synopsis}
	}
	if fs.NArg() > 0 {
		return &usageError{problem: fmt.Sprintf("unexpected argument %q", fs.Arg(0)), synopsis: cmd.synopsis}
	}
	return runCommand(ctx, stdout, stderr)
}

// printHelp writes a command's usage, description and flags.
func printHelp(w io.Writer, cmd command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: %s\n\n%s\n", cmd.synopsis, cmd.description)
	var flags strings.Builder
	fs.SetOutput(&flags)
	fs.PrintDefaults()
	if flags.Len() > 0 {
		fmt.Fprintf(w, "\nflags:\n%s", flags.String())
	}
}

// serve runs the server until ctx ends, then stops it gracefully. The tokens of a generated
// secret go to stderr.
func serve(ctx context.Context, stderr io.Writer, role string) error {
	if role != "" && role != bootstrap.RoleAll && role != bootstrap.RoleBroker && role != bootstrap.RoleDispatcher {
		return &usageError{problem: fmt.Sprintf("--role: %q is not all, broker or dispatcher", role),
			synopsis: "rushgate serve [--role all|broker|dispatcher]"}
	}
	// The flag wins over RUSHGATE_ROLE, whatever that holds.
	cfg, err := bootstrap.LoadConfig(func(c *bootstrap.Config) {
		if role != "" {
			c.Queue.Role = role
		}
	})
	if err != nil {
		return err
	}
	var log *slog.Logger
	app := fx.New(bootstrap.Modules(cfg), fx.Replace(bootstrap.Console{Writer: stderr}, bootstrap.PoolFill(true)), fx.Populate(&log))
	if err := app.Err(); err != nil {
		return bootstrap.RootCause(err)
	}
	startCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := app.Start(startCtx); err != nil {
		if ctx.Err() != nil {
			return nil // asked to stop while starting: fx has stopped what had started
		}
		return bootstrap.RootCause(err)
	}
	<-ctx.Done()
	// An operator sees that the stop was asked for, and whether it finished within its bound.
	began := time.Now()
	log.Info("shutdown began", "timeout", cfg.Server.ShutdownTimeout.String())
	stopCtx, cancel := context.WithTimeout(context.Background(), cfg.Server.ShutdownTimeout)
	defer cancel()
	if err := app.Stop(stopCtx); err != nil {
		log.Error("shutdown did not finish cleanly", "error", err, "tookMs", time.Since(began).Milliseconds())
		return err
	}
	log.Info("shutdown complete", "tookMs", time.Since(began).Milliseconds())
	return nil
}

func migrate(ctx context.Context, stdout io.Writer) error {
	cfg, err := bootstrap.LoadConfig()
	if err != nil {
		return err
	}
	if cfg.Database.URL == "" {
		return errors.New("RUSHGATE_DATABASE_URL: required by migrate")
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	db, err := gormdb.Open(ctx, cfg.Database.URL, gormdb.Options{ConnectTimeout: cfg.Database.Timeout})
	if err != nil {
		return fmt.Errorf("RUSHGATE_DATABASE_URL: %w", err)
	}
	defer db.Close()
	if err := gormdb.Migrate(ctx, db); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	fmt.Fprintln(stdout, "schema up to date on", db.Dialect())
	return nil
}

// token mints a token with the secret serve would use, refusing one serve would refuse.
func token(user string, admin bool, ttl time.Duration, stdout io.Writer) error {
	cfg, err := bootstrap.LoadConfig()
	if err != nil {
		return err
	}
	if cfg.Auth.JWTSecret == "" {
		return errors.New("RUSHGATE_JWT_SECRET: required to mint a token the server accepts")
	}
	role := rghttp.RoleUser
	if admin {
		role = rghttp.RoleAdmin
	}
	raw, err := rghttp.NewTokens([]byte(cfg.Auth.JWTSecret)).Mint(user, role, ttl)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, raw)
	return nil
}
