// Command rushgate serves the rushgate HTTP API and runs its operational tasks.
//
//	rushgate serve                          run the server (in-memory without configuration)
//	rushgate migrate                        apply the database schema of RUSHGATE_DATABASE_URL
//	rushgate token --user U1 [--admin] [--ttl 1h]   mint a JWT with RUSHGATE_JWT_SECRET
//	rushgate version                        print the version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"go.uber.org/fx"

	"github.com/rushgate/rushgate/adapters/gormdb"
	rghttp "github.com/rushgate/rushgate/adapters/http"
	"github.com/rushgate/rushgate/bootstrap"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

const usage = `usage: rushgate <command> [flags]

commands:
  serve     run the HTTP server (in-memory adapters unless RUSHGATE_DATABASE_URL / RUSHGATE_REDIS_URL are set)
  migrate   apply the database schema to RUSHGATE_DATABASE_URL
  token     mint a JWT: token --user U1 [--admin] [--ttl 1h]
  version   print the version
`

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "rushgate:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stdout, usage)
		return errors.New("missing command")
	}
	switch args[0] {
	case "serve":
		return serve()
	case "migrate":
		return migrate()
	case "token":
		return token(args[1:], stdout)
	case "version":
		fmt.Fprintln(stdout, "rushgate", version)
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stdout, usage)
		return fmt.Errorf("unknown command %q", args[0])
	}
}

func serve() error {
	cfg, err := bootstrap.LoadConfig()
	if err != nil {
		return err
	}
	app := fx.New(bootstrap.Modules(cfg))
	if err := app.Err(); err != nil {
		return bootstrap.RootCause(err)
	}
	startCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := app.Start(startCtx); err != nil {
		return bootstrap.RootCause(err)
	}
	<-app.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	return app.Stop(stopCtx)
}

func migrate() error {
	cfg, err := bootstrap.LoadConfig()
	if err != nil {
		return err
	}
	if cfg.DatabaseURL == "" {
		return errors.New("RUSHGATE_DATABASE_URL: required by migrate")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	db, err := gormdb.Open(ctx, cfg.DatabaseURL, gormdb.Options{ConnectTimeout: cfg.DBTimeout})
	if err != nil {
		return fmt.Errorf("database: %w", err)
	}
	defer db.Close()
	if err := gormdb.Migrate(ctx, db); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	fmt.Println("schema up to date on", db.Dialect())
	return nil
}

func token(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	user := fs.String("user", "", "user id (the token's sub)")
	admin := fs.Bool("admin", false, "grant the admin role")
	ttl := fs.Duration("ttl", time.Hour, "lifetime")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *user == "" {
		return errors.New("token: --user is required")
	}
	secret := os.Getenv("RUSHGATE_JWT_SECRET")
	if secret == "" {
		return errors.New("RUSHGATE_JWT_SECRET: required to mint a token the server accepts")
	}
	role := rghttp.RoleUser
	if *admin {
		role = rghttp.RoleAdmin
	}
	raw, err := rghttp.NewTokens([]byte(secret)).Mint(*user, role, *ttl)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, raw)
	return nil
}
