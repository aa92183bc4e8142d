// Package pgcluster runs a private PostgreSQL cluster that a test or a program
// can stop, crash and restart: initdb into a temporary directory, a free port
// on 127.0.0.1, pg_ctl start, stop and restart with shutdown mode fast or
// immediate, and removal of every file at Close.
//
// initdb and postgres refuse to run as root. Run as root, the cluster runs as
// user postgres (through runuser) in a directory given to that user.
//
// Tests call New, which skips the test when no cluster can be made here:
//
//	c := pgcluster.New(t, pgcluster.Options{})
//	pool, err := pgxpool.New(ctx, c.URL())
//	...
//	require.NoError(t, c.Restart(ctx, pgcluster.Immediate))
//
// Programs call Create and Close themselves.
package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ordertimeout/ordertimeout/sidecar/sqlstate"
)

// ErrUnsupported marks the errors of Create that mean no cluster can be made
// on this machine (no PostgreSQL binaries, no postgres user to run them as
// root, initdb refused): a test skips on it rather than fail.
var ErrUnsupported = errors.New("cannot run a private PostgreSQL cluster here")

// Mode is a shutdown mode of pg_ctl.
type Mode string

// Shutdown modes.
const (
	// Fast ends every session, writes a checkpoint and stops.
	Fast Mode = "fast"
	// Immediate kills every server process at once, as a crash would; the
	// next start recovers from the WAL.
	Immediate Mode = "immediate"
)

// DefaultBin is where Debian installs PostgreSQL 15's server programs.
const DefaultBin = "/usr/lib/postgresql/15/bin"

// pgCtlTimeout bounds one pg_ctl start, stop or restart.
const pgCtlTimeout = 60 * time.Second

// Options configures a cluster. The zero value is a good default.
type Options struct {
	// Bin holds initdb, pg_ctl and postgres. If empty, $PGBIN, then
	// DefaultBin.
	Bin string

	// Settings are extra server settings ("name=value"), applied after the
	// defaults (so they override them). The defaults: listen on 127.0.0.1
	// only, max_connections 200, fsync off and full_page_writes off (safe
	// for a crash of the server, which is what the cluster is for; not for
	// a crash of the machine), synchronous_commit on (an acknowledged commit
	// survives an immediate shutdown).
	Settings []string

	// Dir is the parent of the cluster's temporary directory. If empty, the
	// system's temporary directory.
	Dir string
}

// Cluster is a private PostgreSQL cluster. Its methods are safe for
// concurrent use.
type Cluster struct {
	bin  string
	dir  string   // the cluster's directory: data/, the socket, server.log
	asPG []string // runs a program as postgres when we are root
	port int
	opts string     // the server options given to every start
	mu   sync.Mutex // one pg_ctl at a time
}

// Create makes a cluster in a new temporary directory and starts it. The
// caller must Close it. An error wrapping ErrUnsupported means this machine
// cannot run one.
func Create(ctx context.Context, opts Options) (*Cluster, error) {
	c := &Cluster{bin: opts.Bin}
	if c.bin == "" {
		c.bin = os.Getenv("PGBIN")
	}
	if c.bin == "" {
		c.bin = DefaultBin
	}
	for _, tool := range []string{"initdb", "pg_ctl", "postgres"} {
		if _, err := os.Stat(filepath.Join(c.bin, tool)); err != nil {
			return nil, fmt.Errorf("%w: PostgreSQL's %s is not in %s (set PGBIN): %w", ErrUnsupported, tool, c.bin, err)
		}
	}
	var uid, gid int
	if os.Geteuid() == 0 {
		pg, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("%w: running as root, PostgreSQL must run as user postgres: %w", ErrUnsupported, err)
		}
		runuser, err := exec.LookPath("runuser")
		if err != nil {
			return nil, fmt.Errorf("%w: running as root, PostgreSQL must run as postgres through runuser: %w", ErrUnsupported, err)
		}
		uid, _ = strconv.Atoi(pg.Uid)
		gid, _ = strconv.Atoi(pg.Gid)
		c.asPG = []string{runuser, "-u", "postgres", "--"}
	}

	dir, err := os.MkdirTemp(opts.Dir, "pgcluster-")
	if err != nil {
		return nil, fmt.Errorf("create the cluster's directory: %w", err)
	}
	c.dir = dir
	if c.asPG != nil {
		if err := os.Chown(dir, uid, gid); err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("give the cluster's directory to postgres: %w", err)
		}
	}
	if out, err := c.run(ctx, "initdb", "-D", c.data(), "-U", "postgres", "--auth=trust", "-E", "UTF8",
		"--locale=C", "--no-sync"); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("%w: initdb: %w\n%s", ErrUnsupported, err, out)
	}

	// Another process may take the port between our probe and the server's
	// bind: then try another one.
	for attempt := 1; ; attempt++ {
		if c.port, err = freePort(); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		settings := append([]string{
			"listen_addresses=127.0.0.1",
			"port=" + strconv.Itoa(c.port),
			"unix_socket_directories='" + dir + "'",
			"max_connections=200",
			"fsync=off",
			"full_page_writes=off",
			"synchronous_commit=on",
		}, opts.Settings...)
		c.opts = "-c " + strings.Join(settings, " -c ")
		err = c.Start(ctx)
		if err == nil {
			return c, nil
		}
		if attempt == 3 || !strings.Contains(err.Error(), "could not bind") && !strings.Contains(err.Error(), "could not create any TCP/IP sockets") {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
}

// URL returns a superuser's connection string for database postgres.
func (c *Cluster) URL() string { return c.DatabaseURL("postgres") }

// DatabaseURL returns a superuser's connection string for database name.
func (c *Cluster) DatabaseURL(name string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User("postgres"),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)),
		Path:     "/" + name,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// Dir returns the cluster's directory (data/ and server.log are in it).
func (c *Cluster) Dir() string { return c.dir }

// Port returns the TCP port the cluster listens on; it stays the same across
// restarts.
func (c *Cluster) Port() int { return c.port }

// Start starts the stopped cluster and waits until it accepts connections.
func (c *Cluster) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.pgCtl(ctx, "-o", c.opts, "start"); err != nil {
		return err
	}
	return nil
}

// Stop stops the cluster with the given shutdown mode and waits until it is
// down.
func (c *Cluster) Stop(ctx context.Context, mode Mode) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.pgCtl(ctx, "-m", string(mode), "stop"); err != nil {
		return err
	}
	return nil
}

// Restart stops the cluster with the given shutdown mode, starts it again on
// the same port, and returns once it accepts connections. After Immediate,
// the start recovers from the WAL as after a crash.
func (c *Cluster) Restart(ctx context.Context, mode Mode) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.pgCtl(ctx, "-m", string(mode), "-o", c.opts, "restart"); err != nil {
		return err
	}
	return nil
}

// Close stops the cluster at once (mode immediate) if it runs and removes
// its files.
func (c *Cluster) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var err error
	if _, statErr := os.Stat(filepath.Join(c.data(), "postmaster.pid")); statErr == nil {
		ctx, cancel := context.WithTimeout(context.Background(), pgCtlTimeout)
		err = c.pgCtl(ctx, "-m", string(Immediate), "stop")
		cancel()
	}
	if rmErr := os.RemoveAll(c.dir); rmErr != nil {
		err = errors.Join(err, fmt.Errorf("remove the cluster's directory: %w", rmErr))
	}
	return err
}

// LogTail returns the last n lines of the server's log.
func (c *Cluster) LogTail(n int) string {
	b, err := os.ReadFile(filepath.Join(c.dir, "server.log"))
	if err != nil {
		return "(no server log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (c *Cluster) data() string { return filepath.Join(c.dir, "data") }

// run runs one of PostgreSQL's programs as the cluster's owner.
func (c *Cluster) run(ctx context.Context, tool string, args ...string) ([]byte, error) {
	argv := append(append(append([]string{}, c.asPG...), filepath.Join(c.bin, tool)), args...)
	return exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
}

// pgCtl runs pg_ctl on the cluster and waits for the operation to complete.
func (c *Cluster) pgCtl(ctx context.Context, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, pgCtlTimeout+5*time.Second)
	defer cancel()
	args = append([]string{"-D", c.data(), "-l", filepath.Join(c.dir, "server.log"), "-w",
		"-t", strconv.Itoa(int(pgCtlTimeout.Seconds()))}, args...)
	out, err := c.run(ctx, "pg_ctl", args...)
	if err != nil {
		return fmt.Errorf("pg_ctl %s: %w\n%s\nserver log:\n%s", strings.Join(args, " "), err,
			strings.TrimSpace(string(out)), c.LogTail(20))
	}
	return nil
}

// freePort returns a TCP port of 127.0.0.1 that nobody listens on right now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// TB is the part of testing.TB that New uses.
type TB interface {
	Helper()
	Cleanup(func())
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
	Logf(format string, args ...any)
	Failed() bool
}

// New creates and starts a cluster for a test and closes it when the test
// ends; on failure it logs the end of the server's log. It skips the test
// when this machine cannot run a cluster (see ErrUnsupported).
func New(t TB, opts Options) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := Create(ctx, opts)
	if errors.Is(err, ErrUnsupported) {
		t.Skipf("pgcluster: %v", err)
	}
	if err != nil {
		t.Fatalf("pgcluster: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("pgcluster: end of the server log:\n%s", c.LogTail(30))
		}
		if err := c.Close(); err != nil {
			t.Logf("pgcluster: close: %v", err)
		}
	})
	return c
}

// Unavailable reports whether err comes from the server going away or coming
// back (the connection was cut or refused, the server is starting or shutting
// down), after which the same call may be sent again once it is back. A call
// that failed so may or may not have committed: only an idempotent call may
// be repeated blindly.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code[:2] {
		case sqlstate.ClassConnectionException, sqlstate.ClassOperatorIntervention: // admin shutdown, crash shutdown, cannot connect now
			return true
		}
		return false
	}
	var netErr *net.OpError
	var connectErr *pgconn.ConnectError
	return errors.As(err, &netErr) || errors.As(err, &connectErr) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || pgconn.SafeToRetry(err) ||
		strings.Contains(err.Error(), "conn closed")
}

// ErrorKind names an error for a report: its SQLSTATE, or the end of its
// message (the innermost cause).
func ErrorKind(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return "SQLSTATE " + pgErr.Code
	}
	msg := err.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 {
		msg = msg[i+2:]
	}
	return msg
}
