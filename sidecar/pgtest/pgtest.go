// Package pgtest gives each test its own freshly migrated PostgreSQL database.
//
// The first call in a test process creates a template database on the server
// named by DATABASE_URL and runs every migration of migrations.FS on it. Each
// NewPool then clones the template (CREATE DATABASE ... TEMPLATE, a file copy
// that takes milliseconds) and drops the clone when the test ends, so tests may
// commit, run in parallel, and open as many connections as they like.
//
// DATABASE_URL must name a role allowed to create databases. When it is unset
// the tests are skipped: `make test` runs them against a private server.
//
// A package using pgtest calls Main from its TestMain, which drops the
// template when the package's tests are done:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// The package is public on purpose, as River ships rivertest: a shop's own
// tests of code that calls ordertimeout's SQL API get a migrated database per
// test the same way this repository's tests do. (sidecar/internal/sidecartest,
// which starts whole sidecars in-process, and tests/internal are test support
// for this repository only.)
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ordertimeout/ordertimeout/migrations"
)

// timeout bounds each administrative statement (create, migrate, drop).
const timeout = 2 * time.Minute

var (
	// prefix names this process's databases: unique per process, so test
	// processes running at once against one server never share a template.
	prefix = "pgtest_" + fmt.Sprint(os.Getpid()) + "_" + randomHex(3)
	clones atomic.Int64

	templateOnce sync.Once
	templateName string // set once the template database exists
	templateErr  error
)

// NewPool returns a pool on a new database cloned from the migrated template.
// The pool is closed and the database dropped when the test ends. The test is
// skipped when DATABASE_URL is unset.
func NewPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	base := baseURL(t)
	tmpl := template(t, base)

	name := fmt.Sprintf("%s_%d", prefix, clones.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := adminExec(ctx, base, "CREATE DATABASE "+quote(name)+" TEMPLATE "+quote(tmpl)); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := dropDatabase(ctx, base, name); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})

	pool, err := pgxpool.New(ctx, withDatabase(base, name))
	if err != nil {
		t.Fatalf("pgtest: connect to database %s: %v", name, err)
	}
	t.Cleanup(pool.Close) // runs before the drop: cleanups run last first
	return pool
}

// URL returns the connection string of the database pool is connected to,
// built from DATABASE_URL, for tests that open other connections or start
// processes.
func URL(t testing.TB, pool *pgxpool.Pool) string {
	t.Helper()
	return withDatabase(baseURL(t), pool.Config().ConnConfig.Database)
}

// Main runs the tests of m, then drops the template database. Call it from
// TestMain.
func Main(m *testing.M) {
	code := m.Run()
	if templateName != "" {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := dropDatabase(ctx, os.Getenv("DATABASE_URL"), templateName); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest:", err)
			if code == 0 {
				code = 1
			}
		}
	}
	if code != 0 {
		os.Exit(code)
	}
}

func baseURL(t testing.TB) string {
	t.Helper()
	base := os.Getenv("DATABASE_URL")
	if base == "" {
		t.Skip("DATABASE_URL is not set: run the tests with `make test`, which starts a private PostgreSQL server")
	}
	return base
}

// template returns the name of this process's migrated template database,
// creating it on first use.
func template(t testing.TB, base string) string {
	t.Helper()
	templateOnce.Do(func() { templateErr = createTemplate(base) })
	if templateErr != nil {
		t.Fatalf("pgtest: %v", templateErr)
	}
	return templateName
}

func createTemplate(base string) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	name := prefix + "_template"
	if err := adminExec(ctx, base, "CREATE DATABASE "+quote(name)); err != nil {
		return fmt.Errorf("create template database: %w", err)
	}
	templateName = name // from here on Main drops it

	if err := migrations.Up(withDatabase(base, name)); err != nil {
		return fmt.Errorf("template database: %w", err)
	}
	return nil
}

func dropDatabase(ctx context.Context, base, name string) error {
	if err := adminExec(ctx, base, "DROP DATABASE IF EXISTS "+quote(name)+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}

// adminExec runs one statement on DATABASE_URL's own database.
func adminExec(ctx context.Context, base, sql string) error {
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// withDatabase returns connString (a URL or keyword/value string) naming
// database name instead of its own.
func withDatabase(connString, name string) string {
	if strings.HasPrefix(connString, "postgres://") || strings.HasPrefix(connString, "postgresql://") {
		if u, err := url.Parse(connString); err == nil {
			u.Path = "/" + name
			u.RawPath = ""
			return u.String()
		}
	}
	// In a keyword/value string the last setting of a keyword wins.
	return connString + " dbname=" + name
}

func quote(name string) string {
	return pgx.Identifier{name}.Sanitize()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
