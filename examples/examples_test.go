// Package examples runs every example of this folder against a freshly
// migrated database, each where its runtime is on the machine.
package examples

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// wantLines must all appear in every example's output, whatever the language:
// the same story, through the same SQL functions.
var wantLines = []string{
	"(new: true)",
	"bad input refused: OT103",
	"payment: paid",
	"event: - -> PENDING (requested)",
	"event: PENDING -> PAYING (payment)",
	"event: PAYING -> PAID (payment)",
}

func TestExamples(t *testing.T) {
	pool := pgtest.NewPool(t)
	url := pgtest.URL(t, pool)

	tests := []struct {
		name string
		cmd  func(t *testing.T, orderID string) *exec.Cmd
	}{
		{"psql", func(t *testing.T, orderID string) *exec.Cmd {
			psql := lookPath(t, "psql")
			return exec.Command(psql, url, "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
				"-v", "order_id="+orderID, "-f", filepath.Join("psql", "lifecycle.sql"))
		}},
		{"go", func(t *testing.T, orderID string) *exec.Cmd {
			bin := filepath.Join(t.TempDir(), "example")
			out, err := exec.Command("go", "build", "-o", bin, "./go").CombinedOutput()
			require.NoError(t, err, "build the Go example: %s", out)
			return exec.Command(bin, orderID)
		}},
		{"python", func(t *testing.T, orderID string) *exec.Cmd {
			python := pythonWithPsycopg(t)
			return exec.Command(python, filepath.Join("python", "lifecycle.py"), orderID)
		}},
		{"node", func(t *testing.T, orderID string) *exec.Cmd {
			node := lookPath(t, "node")
			nodeModules(t)
			return exec.Command(node, filepath.Join("node", "lifecycle.js"), orderID)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			orderID := "example-" + tt.name
			cmd := tt.cmd(t, orderID)
			cmd.Env = append(os.Environ(), "DATABASE_URL="+url)
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s example: %s", tt.name, out)
			if tt.name == "psql" {
				// psql prints rows, not sentences: check the story in the database.
				var status string
				require.NoError(t, pool.QueryRow(context.Background(),
					`SELECT status FROM ordertimeout.order_info($1)`, orderID).Scan(&status))
				require.Equal(t, "PAID", status)
				require.Contains(t, string(out), "paid")
				return
			}
			for _, want := range wantLines {
				require.Contains(t, string(out), want, "%s example output:\n%s", tt.name, out)
			}
		})
	}
}

func lookPath(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s is not on this machine", name)
	}
	return path
}

// pythonWithPsycopg finds a Python that can import psycopg 3 (Debian's
// python3-psycopg installs it for /usr/bin/python3).
func pythonWithPsycopg(t *testing.T) string {
	t.Helper()
	for _, python := range []string{"/usr/bin/python3", "python3"} {
		if err := exec.Command(python, "-c", "import psycopg").Run(); err == nil {
			return python
		}
	}
	t.Skip("no Python with psycopg 3 on this machine (Debian: apt-get install python3-psycopg)")
	return ""
}

// nodeModules installs the Node example's one dependency unless present.
func nodeModules(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(filepath.Join("node", "node_modules", "pg")); err == nil {
		return
	}
	npm := lookPath(t, "npm")
	cmd := exec.Command(npm, "install", "--no-audit", "--no-fund", "--no-package-lock", "--silent")
	cmd.Dir = "node"
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("npm install of the Node example's driver failed: %s", strings.TrimSpace(string(out)))
	}
}
