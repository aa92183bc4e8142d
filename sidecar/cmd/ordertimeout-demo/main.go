// Command ordertimeout-demo shows ordertimeout at work in about a minute: it
// migrates a throwaway database, starts the fake payment gateway
// (bin/ordertimeout-fakegateway) and the sidecar (bin/ordertimeout) as child
// processes, runs a small web shop whose
// buyers pay, walk away, pay late or pay without a callback, shows a progress
// line while it runs, and prints a report read back from the database,
// including the money-safety invariants.
//
//	tests/bin/withpg bin/ordertimeout-demo          # what `make demo` runs
//	bin/ordertimeout-demo --duration 30s --keep     # DATABASE_URL set
//
// The exit code is 1 when a money-safety invariant is violated or the demo
// could not run, 130 after Ctrl-C.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/config"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/demo"
)

const description = `
Runs the whole lifecycle of unpaid orders for about a minute and reports what
happened. It migrates a throwaway database (created on the server of
DATABASE_URL and dropped at exit), starts the fake payment gateway and the
sidecar as child processes (logs in a temporary directory), then runs a small
shop: orders a few times a second, most paid in time, many abandoned and
cancelled at their deadline, plus a payment the gateway never reports, a
declined card, a deadline extension, two bank transfers that land after the
cancel and a QR code paid after the cancel whose callback never comes. A
progress line follows on stderr; the report on stdout ends with the
money-safety invariants, checked against the database. Ctrl-C stops
everything. Exit code 1 if an invariant is violated.

Without DATABASE_URL, run it through tests/bin/withpg (as 'make demo' does),
which starts a private PostgreSQL for the run.`

// errViolated reports a violated invariant; the report has said which.
var errViolated = errors.New("a money-safety invariant is VIOLATED")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := realMain(ctx)
	interrupted := ctx.Err() != nil
	stop()
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case err == nil && interrupted: // --keep, ended by Ctrl-C as it should be
		fmt.Fprintln(os.Stderr, "ordertimeout-demo: stopped")
	case err == nil:
	case interrupted && !errors.Is(err, errViolated):
		fmt.Fprintln(os.Stderr, "ordertimeout-demo: interrupted; everything stopped")
		os.Exit(130)
	default:
		fmt.Fprintln(os.Stderr, "ordertimeout-demo:", err)
		os.Exit(1)
	}
}

func realMain(ctx context.Context) error {
	var (
		cfg         demo.Config
		databaseURL string
		ownDatabase bool
		rate        int
	)
	f := config.New("ordertimeout-demo", "ordertimeout-demo [flags]", description)
	f.String(&databaseURL, "database-url", "", "PostgreSQL server to run on: a superuser's postgres:// URL", "DATABASE_URL", config.EnvName("database-url"))
	f.Duration(&cfg.Duration, "duration", time.Minute, "how long the shop runs (at least 12s); every deadline scales with it")
	f.Bool(&cfg.Keep, "keep", false, "after the report, keep the sidecar and the gateway running until Ctrl-C (metrics, River UI, psql)")
	f.String(&cfg.SidecarBin, "sidecar-bin", defaultSidecarBin(), "the ordertimeout binary (make build)")
	f.String(&cfg.FakeGatewayBin, "fakegateway-bin", "", "the ordertimeout-fakegateway binary (make build); default: the one next to --sidecar-bin")
	f.String(&cfg.HTTPAddr, "http", "", "address of the sidecar's HTTP server (metrics, River UI); default: a free port of 127.0.0.1")
	f.String(&cfg.GatewayAddr, "gateway-listen", "", "address of the fake payment gateway; default: a free port of 127.0.0.1")
	f.Int(&rate, "rate", 3, "background orders placed per second")
	f.Bool(&ownDatabase, "own-database", true, "run in a new database created on the server and dropped at exit; false: use the URL's database as it is")
	f.String(&cfg.LogDir, "log-dir", "", "directory for the logs of the child processes; default: a new temporary directory")
	if err := f.Parse(os.Args[1:], os.Getenv); err != nil {
		return err
	}
	if databaseURL == "" {
		return errors.New("DATABASE_URL is not set: run me through tests/bin/withpg (or `make demo`), or set --database-url")
	}
	cfg.DatabaseURL = databaseURL
	cfg.Rate = float64(rate)

	if ownDatabase {
		name := fmt.Sprintf("ordertimeout_demo_%d", os.Getpid())
		dbURL, err := createDatabase(ctx, databaseURL, name)
		if err != nil {
			return err
		}
		defer dropDatabase(databaseURL, name)
		cfg.DatabaseURL = dbURL
	}

	result, err := demo.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if !result.OK() {
		return errViolated
	}
	return nil
}

// defaultSidecarBin is bin/ordertimeout next to this binary, as `make build`
// puts them.
func defaultSidecarBin() string {
	exe, err := os.Executable()
	if err != nil {
		return "bin/ordertimeout"
	}
	return filepath.Join(filepath.Dir(exe), "ordertimeout")
}

// createDatabase creates database name on the server of serverURL and
// returns its URL.
func createDatabase(ctx context.Context, serverURL, name string) (string, error) {
	u, err := url.Parse(serverURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", errors.New("DATABASE_URL must be a postgres:// URL")
	}
	if err := adminExec(ctx, serverURL, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	u.Path = "/" + name
	return u.String(), nil
}

// dropDatabase drops database name, with a fresh context: it also runs after
// Ctrl-C.
func dropDatabase(serverURL, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := adminExec(ctx, serverURL, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		fmt.Fprintf(os.Stderr, "ordertimeout-demo: drop database %s: %v\n", name, err)
	}
}

func adminExec(ctx context.Context, serverURL, sql string) error {
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}
