package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ordertimeout/ordertimeout/sidecar/sidecarproc"
)

// The sidecar as a separate process, as in production: built from
// ./sidecar/cmd/ordertimeout when --sidecar is missing, started with
// `ordertimeout run` and DATABASE_URL, measured through /proc, stopped with
// SIGTERM.

// sidecarBinary returns the sidecar to run, building it with `go build` when
// --sidecar does not exist.
func (b *bench) sidecarBinary(ctx context.Context) (string, error) {
	bin := b.cfg.sidecar
	if _, err := os.Stat(bin); err == nil {
		return filepath.Abs(bin)
	}
	const pkg = "./sidecar/cmd/ordertimeout"
	if _, err := os.Stat(pkg); err != nil {
		return "", fmt.Errorf("%s does not exist and there is no %s to build it from (run from the repository root)", bin, pkg)
	}
	slog.Info("building the sidecar", "output", bin)
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, pkg).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build -o %s %s: %w: %s", bin, pkg, err, strings.TrimSpace(string(out)))
	}
	return filepath.Abs(bin)
}

// sidecarArgs returns the arguments of `ordertimeout run` for the benchmark:
// those of its wanted flags that `run --help` lists, then --sidecar-args.
// The HTTP server is off: nothing here reads it, and no port can clash.
// Reconciliation is off: the stand-in gateway answers 503 to everything.
func (b *bench) sidecarArgs(ctx context.Context, bin, gatewayURL string) []string {
	help, _ := exec.CommandContext(ctx, bin, "run", "--help").CombinedOutput()
	args := []string{"run"}
	for _, f := range [][2]string{{"gateway-url", gatewayURL}, {"http", "-"}, {"name", "bench"}, {"reconcile-every", "0"}} {
		if strings.Contains(string(help), "--"+f[0]+" ") {
			args = append(args, "--"+f[0], f[1])
		}
	}
	return append(args, b.cfg.sidecarArgs...)
}

// sidecarProc is the running sidecar.
type sidecarProc struct {
	*sidecarproc.Process
	log string
}

func (b *bench) startSidecar(ctx context.Context, bin string, args []string, dbURL string) (*sidecarProc, error) {
	logPath := filepath.Join(os.TempDir(), fmt.Sprintf("bench-sidecar-%d.log", os.Getpid()))
	if b.cfg.plotDir != "" {
		logPath = filepath.Join(b.cfg.plotDir, "steady-sidecar.log")
	}
	p, err := sidecarproc.Start(sidecarproc.Command{Name: "sidecar", Bin: bin, Args: args,
		Env: []string{"DATABASE_URL=" + dbURL}, Log: logPath})
	if err != nil {
		return nil, err
	}
	return &sidecarProc{Process: p, log: logPath}, nil
}

// stop sends SIGTERM and waits, killing the sidecar after 15 s.
func (p *sidecarProc) stop() error {
	if err := p.Stop(15 * time.Second); err != nil {
		return fmt.Errorf("%w (log %s)", err, p.log)
	}
	return nil
}

// usage reads the peak resident set (VmHWM, kB) and the CPU time (s) of the
// running process.
func (p *sidecarProc) usage() (hwmKB int64, cpuS float64) {
	pid := p.PID()
	if status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, line := range strings.Split(string(status), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
				hwmKB, _ = strconv.ParseInt(f[1], 10, 64)
			}
		}
	}
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		// Fields after the command name (in parentheses): utime is the 14th
		// field of the line, stime the 15th, in clock ticks (100 per second
		// on Linux).
		s := string(stat)
		if i := strings.LastIndexByte(s, ')'); i >= 0 {
			f := strings.Fields(s[i+1:])
			if len(f) > 12 {
				ut, _ := strconv.ParseFloat(f[11], 64)
				st, _ := strconv.ParseFloat(f[12], 64)
				cpuS = (ut + st) / 100
			}
		}
	}
	return hwmKB, cpuS
}

// waitSidecarReady waits until the sidecar has connected to the database (a
// connection not of the benchmark), or fails when it exits or takes more
// than 30 s; then it waits a little more for its sweeper and LISTEN to start.
func waitSidecarReady(ctx context.Context, q querier, proc *sidecarProc) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		if err := q.QueryRow(ctx, `
			SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database()
			  AND backend_type = 'client backend'
			  AND application_name <> 'ordertimeout-bench'`).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			break
		}
		select {
		case <-proc.Exited():
			return fmt.Errorf("sidecar exited at start: %v (log %s)", proc.Err(), proc.log)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sidecar not connected after 30 s (log %s)", proc.log)
		}
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Second):
		return nil
	}
}
