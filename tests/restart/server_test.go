package restart

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/golang-migrate/migrate/v4"
	pgxmigrate "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/ordertimeout/ordertimeout/migrations"
)

// server is a private PostgreSQL cluster the test controls.
type server struct {
	bin  string   // PostgreSQL's binaries
	dir  string   // the cluster's directory: data/, the socket, server.log
	asPG []string // the command prefix that runs a program as postgres, when root
	URL  string   // a superuser's connection string
}

// startServer creates and starts a cluster that is stopped and deleted when
// the test ends, or skips the test when that is impossible here.
func startServer(t *testing.T) *server {
	t.Helper()
	if testing.Short() {
		t.Skip("restarts PostgreSQL: not in -short mode")
	}
	s := &server{bin: os.Getenv("PGBIN")}
	if s.bin == "" {
		s.bin = "/usr/lib/postgresql/15/bin"
	}
	for _, tool := range []string{"initdb", "pg_ctl", "postgres"} {
		if _, err := os.Stat(filepath.Join(s.bin, tool)); err != nil {
			t.Skipf("needs PostgreSQL's %s in %s (set PGBIN): %v", tool, s.bin, err)
		}
	}

	dir, err := os.MkdirTemp("", "ordertimeout-restart-")
	if err != nil {
		t.Fatalf("create the cluster's directory: %v", err)
	}
	s.dir = dir
	t.Cleanup(func() {
		if _, err := os.Stat(filepath.Join(dir, "data", "postmaster.pid")); err == nil {
			_ = s.pgCtl(context.Background(), "-m", "immediate", "stop")
		}
		_ = os.RemoveAll(dir)
	})

	// initdb and postgres refuse to run as root: as root, run them as postgres.
	if os.Geteuid() == 0 {
		pg, err := user.Lookup("postgres")
		if err != nil {
			t.Skipf("running as root, PostgreSQL must run as user postgres, which does not exist: %v", err)
		}
		runuser, err := exec.LookPath("runuser")
		if err != nil {
			t.Skipf("running as root, PostgreSQL must run as user postgres through runuser: %v", err)
		}
		uid, _ := strconv.Atoi(pg.Uid)
		gid, _ := strconv.Atoi(pg.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatalf("give the cluster's directory to postgres: %v", err)
		}
		s.asPG = []string{runuser, "-u", "postgres", "--"}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := s.run(ctx, "initdb", "-D", s.data(), "-U", "postgres", "--auth=trust", "-E", "UTF8",
		"--locale=C", "--no-sync"); err != nil {
		t.Skipf("cannot create a PostgreSQL cluster here: initdb: %v\n%s", err, out)
	}

	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	port := listener.Addr().(*net.TCPAddr).Port
	_ = listener.Close()
	// fsync off is safe here: a crash of the server, not of the machine,
	// keeps what was written. Commits stay synchronous: an acknowledged
	// commit must survive the crash.
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -c port=%d -c unix_socket_directories='%s'"+
		" -c fsync=off -c full_page_writes=off -c max_connections=50", port, dir)
	if err := s.pgCtl(ctx, "-o", opts, "start"); err != nil {
		t.Fatalf("start PostgreSQL: %v", err)
	}
	s.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	return s
}

func (s *server) data() string { return filepath.Join(s.dir, "data") }

// run runs one of PostgreSQL's programs as the cluster's owner.
func (s *server) run(ctx context.Context, tool string, args ...string) ([]byte, error) {
	argv := append(append(append([]string{}, s.asPG...), filepath.Join(s.bin, tool)), args...)
	return exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
}

// pgCtl runs pg_ctl on the cluster, waiting for the operation to complete.
func (s *server) pgCtl(ctx context.Context, args ...string) error {
	args = append([]string{"-D", s.data(), "-l", filepath.Join(s.dir, "server.log"), "-w", "-t", "60"}, args...)
	out, err := s.run(ctx, "pg_ctl", args...)
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
		if len(log) > 2000 {
			log = log[len(log)-2000:]
		}
		return fmt.Errorf("pg_ctl %v: %w\n%s\nserver log:\n%s", args, err, out, log)
	}
	return nil
}

// restart restarts the server with shutdown mode fast (sessions are ended,
// a checkpoint is written) or immediate (every process is killed; the next
// start recovers from the WAL, as after a crash).
func (s *server) restart(ctx context.Context, mode string) error {
	return s.pgCtl(ctx, "-m", mode, "restart")
}

// migrateUp runs every migration of migrations.FS on the database at url.
func migrateUp(url string) error {
	config, err := pgx.ParseConfig(url)
	if err != nil {
		return fmt.Errorf("parse %s: %w", url, err)
	}
	db := stdlib.OpenDB(*config)
	driver, err := pgxmigrate.WithInstance(db, &pgxmigrate.Config{})
	if err != nil {
		db.Close()
		return fmt.Errorf("open migration driver: %w", err)
	}
	source, err := iofs.New(migrations.FS, ".")
	if err != nil {
		driver.Close()
		return fmt.Errorf("open migrations: %w", err)
	}
	m, err := migrate.NewWithInstance("iofs", source, "pgx5", driver)
	if err != nil {
		source.Close()
		driver.Close()
		return fmt.Errorf("create migrator: %w", err)
	}
	upErr := m.Up()
	sourceErr, dbErr := m.Close()
	if upErr != nil && !errors.Is(upErr, migrate.ErrNoChange) {
		return fmt.Errorf("migrate: %w", upErr)
	}
	if err := errors.Join(sourceErr, dbErr); err != nil {
		return fmt.Errorf("close migrator: %w", err)
	}
	return nil
}
