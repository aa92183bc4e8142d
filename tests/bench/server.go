package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ordertimeout/ordertimeout/migrations"
)

// server is the PostgreSQL server of DATABASE_URL, where the benchmark
// creates (and at the end drops) its databases.
type server struct {
	url    string
	prefix string
	keep   bool // drop nothing

	mu      sync.Mutex
	created []string
	seq     atomic.Int64
}

func newServer(url string) *server {
	return &server{url: url, prefix: fmt.Sprintf("bench_%d", os.Getpid())}
}

// name returns a new database name of this process: bench_<pid>_<what>_<n>.
func (s *server) name(what string) string {
	return fmt.Sprintf("%s_%s_%d", s.prefix, what, s.seq.Add(1))
}

// urlFor returns DATABASE_URL with its database replaced by name, for the
// benchmark's own connections (application_name ordertimeout-bench).
func (s *server) urlFor(name string) string {
	return s.withDatabase(name, "ordertimeout-bench")
}

// plainURLFor returns DATABASE_URL with its database replaced by name and
// nothing else changed, for other programs (the sidecar).
func (s *server) plainURLFor(name string) string {
	return s.withDatabase(name, "")
}

func (s *server) withDatabase(name, app string) string {
	if strings.HasPrefix(s.url, "postgres://") || strings.HasPrefix(s.url, "postgresql://") {
		if u, err := url.Parse(s.url); err == nil {
			u.Path = "/" + name
			u.RawPath = ""
			if app != "" {
				q := u.Query()
				q.Set("application_name", app)
				u.RawQuery = q.Encode()
			}
			return u.String()
		}
	}
	// In a keyword/value string the last setting of a keyword wins.
	out := s.url + " dbname=" + name
	if app != "" {
		out += " application_name=" + app
	}
	return out
}

// exec runs one statement on DATABASE_URL's own database.
func (s *server) exec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, s.url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// durability is the server's fsync, synchronous_commit and full_page_writes.
type durability struct {
	Fsync, SynchronousCommit, FullPageWrites string
}

// durableSettings and fastSettings are the two settings the benchmark runs
// with: production's (the default) and --fast-settings.
var (
	durableSettings = durability{"on", "on", "on"}
	fastSettings    = durability{"off", "off", "off"}
)

func (d durability) String() string {
	return fmt.Sprintf("fsync=%s, synchronous_commit=%s, full_page_writes=%s", d.Fsync, d.SynchronousCommit, d.FullPageWrites)
}

// describe returns the server version and its settings, for the report.
func (s *server) describe(ctx context.Context) (string, durability, error) {
	conn, err := pgx.Connect(ctx, s.url)
	if err != nil {
		return "", durability{}, fmt.Errorf("connect to DATABASE_URL: %w", err)
	}
	defer conn.Close(context.Background())
	var version, sharedBuffers string
	var d durability
	err = conn.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('fsync'),
		current_setting('synchronous_commit'), current_setting('full_page_writes'), current_setting('shared_buffers')`).
		Scan(&version, &d.Fsync, &d.SynchronousCommit, &d.FullPageWrites, &sharedBuffers)
	if err != nil {
		return "", durability{}, fmt.Errorf("read server settings: %w", err)
	}
	return fmt.Sprintf("PostgreSQL %s, %s, shared_buffers=%s", version, d, sharedBuffers), d, nil
}

// postmaster returns the pid of the server's postmaster when the server runs
// on this host (the parent of this connection's backend), else 0.
func (s *server) postmaster(ctx context.Context) int {
	conn, err := pgx.Connect(ctx, s.url)
	if err != nil {
		return 0
	}
	defer conn.Close(context.Background())
	var pid int
	var dir string
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid(), current_setting('data_directory')`).Scan(&pid, &dir); err != nil {
		return 0
	}
	// The pid is this host's only if /proc/<pid>/cwd is the server's data
	// directory (a remote server's pid may exist here as another process).
	if cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); err != nil || cwd != dir {
		return 0
	}
	return ppid(pid)
}

// create creates database name, a copy of template when template is not
// empty. A template must have no open connection.
func (s *server) create(ctx context.Context, name, template string) error {
	sql := "CREATE DATABASE " + quoteIdent(name)
	if template != "" {
		sql += " TEMPLATE " + quoteIdent(template)
	}
	if err := s.exec(ctx, sql); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	s.mu.Lock()
	s.created = append(s.created, name)
	s.mu.Unlock()
	return nil
}

// clone creates a new database from template and returns its name.
func (s *server) clone(ctx context.Context, template, what string) (string, error) {
	name := s.name(what)
	start := time.Now()
	if err := s.create(ctx, name, template); err != nil {
		return "", err
	}
	slog.Debug("cloned database", "name", name, "took", time.Since(start))
	return name, nil
}

// drop drops database name, closing its connections.
func (s *server) drop(name string) {
	if s.keep {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := s.exec(ctx, "DROP DATABASE IF EXISTS "+quoteIdent(name)+" WITH (FORCE)"); err != nil {
		slog.Warn("could not drop database", "name", name, "err", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, n := range s.created {
		if n == name {
			s.created = append(s.created[:i], s.created[i+1:]...)
			break
		}
	}
}

// dropAll drops every database this process created, newest first (clones
// before their templates).
func (s *server) dropAll() {
	s.mu.Lock()
	names := append([]string(nil), s.created...)
	s.mu.Unlock()
	for i := len(names) - 1; i >= 0; i-- {
		s.drop(names[i])
	}
}

// migrate runs every migration of migrations.FS on database name.
func (s *server) migrate(name string) error {
	if err := migrations.Up(s.urlFor(name)); err != nil {
		return fmt.Errorf("database %s: %w", name, err)
	}
	return nil
}

// pool opens a pool of up to maxConns connections on database name.
func (s *server) pool(ctx context.Context, name string, maxConns int) (*pgxpool.Pool, error) {
	config, err := pgxpool.ParseConfig(s.urlFor(name))
	if err != nil {
		return nil, fmt.Errorf("parse DATABASE_URL: %w", err)
	}
	config.MaxConns = int32(maxConns)
	pool, err := pgxpool.NewWithConfig(ctx, config)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", name, err)
	}
	return pool, nil
}

// connect opens one connection on database name.
func (s *server) connect(ctx context.Context, name string) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, s.urlFor(name))
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", name, err)
	}
	return conn, nil
}

// settle makes database name ready to be timed: VACUUM ANALYZE (hint bits,
// visibility map, planner statistics), then a CHECKPOINT so that no
// checkpoint of the load runs during the measurement.
func (s *server) settle(ctx context.Context, name string) error {
	conn, err := s.connect(ctx, name)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for _, sql := range []string{"VACUUM ANALYZE", "CHECKPOINT"} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("%s on %s: %w", sql, name, err)
		}
	}
	return nil
}

// checkpoint runs a CHECKPOINT (after a clone: CREATE DATABASE writes the
// copy through the WAL).
func (s *server) checkpoint(ctx context.Context) error {
	if err := s.exec(ctx, "CHECKPOINT"); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

func quoteIdent(name string) string {
	return pgx.Identifier{name}.Sanitize()
}
