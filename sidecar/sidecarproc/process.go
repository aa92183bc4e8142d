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

// Build compiles ./sidecar/cmd/ordertimeout and
// ./sidecar/cmd/ordertimeout-fakegateway of this module into dir and returns
// the path of ordertimeout; FakeBinary(path) is the fake's. args are extra
// `go build` arguments (e.g. "-overlay", file).
func Build(ctx context.Context, dir string, args ...string) (string, error) {
	root, err := ModuleRoot(ctx)
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "ordertimeout")
	for out, pkg := range map[string]string{bin: "./sidecar/cmd/ordertimeout", FakeBinary(bin): "./sidecar/cmd/ordertimeout-fakegateway"} {
		argv := append(append([]string{"build"}, args...), "-o", out, pkg)
		cmd := exec.CommandContext(ctx, "go", argv...)
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("go %s: %w\n%s", strings.Join(argv, " "), err, b)
		}
	}
	return bin, nil
}

// FakeBinary returns the path of ordertimeout-fakegateway next to the
// ordertimeout binary bin, where Build and `make build` put it.
func FakeBinary(bin string) string {
	return filepath.Join(filepath.Dir(bin), "ordertimeout-fakegateway")
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

// Command says how to start a child process.
type Command struct {
	// Name names the process in errors. It is required.
	Name string
	// Bin is the program to run. It is required.
	Bin  string
	Args []string
	// Env is added to this process's environment; a later K=V wins over an
	// earlier one with the same K.
	Env []string
	// Output receives the child's stdout and stderr. If nil, they go to Log;
	// if both are empty, they are discarded.
	Output io.Writer
	// Log, if set, is the file (created or truncated) that receives the
	// child's stdout and stderr when Output is nil; the errors of WaitHTTP
	// quote its last lines.
	Log string
	// OwnGroup starts the child in a process group of its own, so that a
	// Ctrl-C in the terminal reaches only this program, which then stops its
	// children in order; on Linux the kernel also sends the child SIGTERM
	// should this program die without doing so.
	OwnGroup bool
}

// Process is a running child process.
type Process struct {
	// Name names the process in errors.
	Name string

	log    string
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process has exited
	err    error         // how it exited; read after exited is closed
}

// Start starts the child process c describes.
func Start(c Command) (*Process, error) {
	cmd := exec.Command(c.Bin, c.Args...)
	cmd.Env = append(os.Environ(), c.Env...)
	var logFile *os.File
	switch {
	case c.Output != nil:
		cmd.Stdout, cmd.Stderr = c.Output, c.Output
	case c.Log != "":
		f, err := os.Create(c.Log)
		if err != nil {
			return nil, fmt.Errorf("start %s: %w", c.Name, err)
		}
		logFile = f
		cmd.Stdout, cmd.Stderr = f, f
	}
	if c.OwnGroup {
		cmd.SysProcAttr = ownGroup()
	}
	if err := cmd.Start(); err != nil {
		if logFile != nil {
			logFile.Close()
		}
		return nil, fmt.Errorf("start %s: %w", c.Name, err)
	}
	p := &Process{Name: c.Name, log: c.Log, cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		if logFile != nil {
			logFile.Close()
		}
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

// Log returns the path of the process's log file (Command.Log), or "".
func (p *Process) Log() string { return p.log }

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
// kills it. It returns an error if the process had exited already or did not
// exit cleanly on SIGTERM.
func (p *Process) Stop(timeout time.Duration) error {
	if !p.Running() {
		return fmt.Errorf("%s had exited already: %v", p.Name, p.err)
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.exited:
		if p.err != nil {
			return fmt.Errorf("%s: %w", p.Name, p.err)
		}
		return nil
	case <-t.C:
		_ = p.Kill()
		return fmt.Errorf("%s did not stop within %s of SIGTERM: killed", p.Name, timeout)
	}
}

// WaitHTTP polls url until it answers 200, and fails when the process exits
// or within passes first; the error then quotes the end of the log.
func (p *Process) WaitHTTP(ctx context.Context, url string, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
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
			return fmt.Errorf("%s exited while starting (%v)%s", p.Name, p.err, p.logTail())
		case <-ctx.Done():
			return fmt.Errorf("%s did not answer %s within %s: %w%s", p.Name, url, within, ctx.Err(), p.logTail())
		case <-tick.C:
		}
	}
}

// logTail returns "; its log:" and the last lines of the log, or "" without
// a log.
func (p *Process) logTail() string {
	if p.log == "" {
		return ""
	}
	return "; its log:\n" + Tail(p.log, 20)
}

// Tail returns the last n lines of the file at path, indented, for an error
// message.
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "  (no log: " + err.Error() + ")"
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return "  (the log is empty)"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
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
