package sidecartest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
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

	// PgBouncer refuses to run as root: it switches to postgres (-u), which
	// must read its files and write its log here (t.TempDir's parent is
	// private to the test's user).
	dir, err := os.MkdirTemp("", "pgbouncer-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o777))
	port := freePort(t)
	ini := fmt.Sprintf(`[databases]
* = host=%s port=%d

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
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
	require.NoError(t, os.WriteFile(filepath.Join(dir, "users.txt"), []byte(fmt.Sprintf("%q \"\"\n", cc.User)), 0o644))

	args := []string{filepath.Join(dir, "pgbouncer.ini")}
	if os.Geteuid() == 0 {
		args = append([]string{"-u", "postgres"}, args...)
	}
	cmd := exec.Command(bin, args...)
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

	addr := fmt.Sprintf("127.0.0.1:%d", port)
	Eventually(t, 10*time.Second, "PgBouncer to listen on "+addr, func() (bool, error) {
		select {
		case <-done:
			log, _ := os.ReadFile(filepath.Join(dir, "pgbouncer.log"))
			return false, fmt.Errorf("pgbouncer exited: %s%s", out.String(), log)
		default:
		}
		c, err := (&net.Dialer{Timeout: time.Second}).DialContext(context.Background(), "tcp", addr)
		if err != nil {
			return false, nil
		}
		return true, c.Close()
	})
	return fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", cc.User, addr, cc.Database)
}

// freePort returns a TCP port of 127.0.0.1 that nothing listened on a
// moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close() //nolint:errcheck // only its port is wanted
	return l.Addr().(*net.TCPAddr).Port
}
