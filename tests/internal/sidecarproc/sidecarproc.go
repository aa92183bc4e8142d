// Package sidecarproc runs the ordertimeout binary's subcommands as real
// processes for the fault tests and the soak test: it builds the binary,
// starts sidecars (`ordertimeout run`) and the fake payment gateway
// (`ordertimeout fakegateway`), kills them with SIGKILL or stops them with
// SIGTERM, reads a sidecar's /metrics, and drives the fake's control API.
//
// The packages under sidecar/internal cannot be imported from tests/, so
// everything here goes through the binary's command line and HTTP, as an
// operator's tools would.
package sidecarproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// readyTimeout is how long a started process has to answer HTTP.
const readyTimeout = 60 * time.Second

// Build compiles ./sidecar/cmd/ordertimeout of this module into dir and
// returns the binary's path. args are extra `go build` arguments (e.g.
// "-overlay", file).
func Build(ctx context.Context, dir string, args ...string) (string, error) {
	root, err := ModuleRoot(ctx)
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "ordertimeout")
	argv := append(append([]string{"build"}, args...), "-o", bin, "./sidecar/cmd/ordertimeout")
	cmd := exec.CommandContext(ctx, "go", argv...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s: %w\n%s", strings.Join(argv, " "), err, out)
	}
	return bin, nil
}

// ModuleRoot returns the directory of this module's go.mod.
func ModuleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("go env GOMOD: not inside the ordertimeout module")
	}
	return filepath.Dir(mod), nil
}

// Buffer is an io.Writer that keeps everything written to it; safe for
// concurrent use. Processes of the tests write their output to one.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Process is a running child process.
type Process struct {
	// Name names the process in errors.
	Name string

	cmd    *exec.Cmd
	exited chan struct{} // closed once the process has exited
	err    error         // how it exited; read after exited is closed
}

// Start starts bin with args and env (added to this process's environment),
// its output going to out.
func Start(name, bin string, args, env []string, out io.Writer) (*Process, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{Name: name, cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// PID returns the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Exited is closed once the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Running reports whether the process has not exited yet.
func (p *Process) Running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Err returns how the process exited (nil for exit code 0); call it once
// Exited is closed.
func (p *Process) Err() error { return p.err }

// Kill sends SIGKILL and waits for the process to be gone.
func (p *Process) Kill() error {
	if !p.Running() {
		return nil
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill %s: %w", p.Name, err)
	}
	<-p.exited
	return nil
}

// Stop sends SIGTERM and waits up to timeout for the process to exit, then
// kills it. It returns an error if the process did not exit cleanly on
// SIGTERM.
func (p *Process) Stop(timeout time.Duration) error {
	if !p.Running() {
		return fmt.Errorf("%s had exited already: %v", p.Name, p.err)
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		if p.err != nil {
			return fmt.Errorf("%s: %w", p.Name, p.err)
		}
		return nil
	case <-time.After(timeout):
		_ = p.Kill()
		return fmt.Errorf("%s did not stop within %s of SIGTERM: killed", p.Name, timeout)
	}
}

// waitHTTP polls url until it answers 200, the process exits, or
// readyTimeout passes.
func (p *Process) waitHTTP(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("wait for %s: %w", p.Name, err)
		}
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited while starting: %v", p.Name, p.err)
		case <-ctx.Done():
			return fmt.Errorf("%s did not answer %s: %w", p.Name, url, ctx.Err())
		case <-tick.C:
		}
	}
}

// FreeAddr returns 127.0.0.1:port with a port nobody listens on right now.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}
