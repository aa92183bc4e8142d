package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// stopTimeout is how long a child has to exit after SIGTERM before it is
// killed.
const stopTimeout = 20 * time.Second

// readyTimeout is how long a child has to start answering HTTP.
const readyTimeout = 30 * time.Second

// process is a child process (the sidecar or the fake gateway) whose output
// goes to a log file.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	logFile *os.File
	exited  chan struct{} // closed once the process has exited
	err     error         // how it exited; read after exited is closed
}

// startProcess starts bin with args in its own process group, so that a
// Ctrl-C in the terminal reaches only the demo, which then stops its children
// in order. Output goes to logDir/name.log.
func startProcess(name, bin string, args, env []string, logDir string) (*process, error) {
	logPath := filepath.Join(logDir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, logFile: logFile, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	return p, nil
}

// stop sends SIGTERM and waits for the process to exit, killing it after
// stopTimeout. It returns how the process exited if it did not exit cleanly
// on SIGTERM.
func (p *process) stop() error {
	select {
	case <-p.exited:
		return fmt.Errorf("%s had exited already: %w", p.name, p.exitErr())
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return p.exitErr()
	case <-time.After(stopTimeout):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("%s did not stop within %s of SIGTERM: killed", p.name, stopTimeout)
	}
}

// exitErr describes how the process exited; nil for a clean exit.
func (p *process) exitErr() error {
	if p.err != nil {
		return fmt.Errorf("%s: %w", p.name, p.err)
	}
	return nil
}

// waitReady polls url until it answers 200, the process exits, or
// readyTimeout passes.
func (p *process) waitReady(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited while starting (%v); its log:\n%s", p.name, p.err, tail(p.logPath, 20))
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("%s did not answer %s within %s; its log:\n%s", p.name, url, readyTimeout, tail(p.logPath, 20))
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// runOnce runs bin with args to completion, its output in logDir/name.log,
// and returns the end of that log with the error if it fails.
func runOnce(ctx context.Context, name, bin string, args, env []string, logDir string) error {
	logPath := filepath.Join(logDir, name+".log")
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	if werr := os.WriteFile(logPath, out.Bytes(), 0o644); werr != nil && err == nil {
		return fmt.Errorf("%s: write log: %w", name, werr)
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", bin, strings.Join(args, " "), err, tail(logPath, 20))
	}
	return nil
}

// tail returns the last n lines of the file at path, indented.
func tail(path string, n int) string {
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

// freeAddr returns 127.0.0.1:port with a port nobody listens on right now.
// Another process could take it before the child binds it; on this machine
// that is unlikely enough for a demo.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}
