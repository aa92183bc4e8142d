package sidecartest

import (
	"context"
	"fmt"
	"net"
	neturl "net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/sidecarproc"
)

// PgBouncer starts a real PgBouncer (Debian's pgbouncer, which
// tests/bin/ensure-deps installs; ORDERTIMEOUT_PGBOUNCER names another) in
// transaction pooling mode in front of the database of url, on a free port
// of 127.0.0.1, until the test ends, and returns the URL of the same
// database through it. ignore goes to its ignore_startup_parameters: the
// startup parameters it then drops instead of refusing the connection.
func PgBouncer(t testing.TB, url string, ignore ...string) string {
	t.Helper()
	bin := os.Getenv("ORDERTIMEOUT_PGBOUNCER")
	if bin == "" {
		for _, p := range []string{"pgbouncer", "/usr/sbin/pgbouncer"} {
			if found, err := exec.LookPath(p); err == nil {
				bin = found
				break
			}
		}
	}
	if bin == "" {
		t.Skip("this test needs PgBouncer and none is installed: run tests/bin/ensure-deps as root " +
			"(it runs apt-get install pgbouncer; `make test` does this), or set ORDERTIMEOUT_PGBOUNCER to a pgbouncer binary")
	}
	cc, err := pgx.ParseConfig(url)
	require.NoError(t, err)
	// PgBouncer refuses to run as root: it switches to postgres (-u).
	var asUser []string
	if os.Geteuid() == 0 {
		if _, err := user.Lookup("postgres"); err != nil {
			t.Skip("this test runs PgBouncer, which refuses to run as root, as the user postgres, and there is none: " +
				"run it as another user, or create postgres (Debian's postgresql-15 package does)")
		}
		asUser = []string{"-u", "postgres"}
	}
	// Its auth_file quotes a name or password with double quotes, doubled
	// inside.
	quote := func(v string) string { return `"` + strings.ReplaceAll(v, `"`, `""`) + `"` }
	users := quote(cc.User) + " " + quote(cc.Password) + "\n"
	// A port another process took between freePort and PgBouncer's bind
	// makes PgBouncer exit: try another.
	for attempt := 1; ; attempt++ {
		bouncer, exited := startPgBouncer(t, bin, asUser, cc, users, ignore)
		if !exited {
			return bouncer
		}
		if attempt == 3 {
			t.Fatalf("PgBouncer exited three times before listening: %s", bouncer)
		}
	}
}

// startPgBouncer starts one PgBouncer on a free port and returns its URL,
// or, with exited, what it printed before it exited without listening.
func startPgBouncer(t testing.TB, bin string, asUser []string, cc *pgx.ConnConfig, users string, ignore []string) (string, bool) {
	t.Helper()

	// The user PgBouncer switches to must read its files and write its log
	// here (t.TempDir's parent is private to the test's user).
	dir, err := os.MkdirTemp("", "pgbouncer-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o777))
	addr, err := sidecarproc.FreeAddr()
	require.NoError(t, err)
	_, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	ini := fmt.Sprintf(`[databases]
* = host=%s port=%d

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %s
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
logfile = %s
`, cc.Host, cc.Port, port, filepath.Join(dir, "users.txt"), filepath.Join(dir, "pgbouncer.log"))
	if len(ignore) > 0 {
		ini += "ignore_startup_parameters = " + strings.Join(ignore, ", ") + "\n"
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "pgbouncer.ini"), []byte(ini), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "users.txt"), []byte(users), 0o644))

	cmd := exec.Command(bin, append(append([]string{}, asUser...), filepath.Join(dir, "pgbouncer.ini"))...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})

	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-done:
			log, _ := os.ReadFile(filepath.Join(dir, "pgbouncer.log"))
			return out.String() + string(log), true
		default:
		}
		if c, err := (&net.Dialer{Timeout: time.Second}).DialContext(context.Background(), "tcp", addr); err == nil {
			_ = c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("PgBouncer did not listen on %s within 10s", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	u := &neturl.URL{Scheme: "postgres", User: neturl.UserPassword(cc.User, cc.Password), Host: addr, Path: "/" + cc.Database,
		RawQuery: "sslmode=disable"}
	if cc.Password == "" {
		u.User = neturl.User(cc.User)
	}
	return u.String(), false
}
