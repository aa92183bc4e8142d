package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisServer is the private redis-server of the ZSet baseline: Debian's
// binary on a free port of 127.0.0.1, persistence off (no RDB snapshots, no
// AOF: the seed's design keeps the timer only in memory), stopped when the
// benchmark ends. It dies with the benchmark too (PR_SET_PDEATHSIG), so a
// killed run leaves no server behind.
type redisServer struct {
	cmd     *exec.Cmd
	addr    string
	version string
	dir     string
	log     bytes.Buffer
	exited  chan struct{}
}

// startRedis starts bin and waits until it answers PING.
func startRedis(ctx context.Context, bin string) (*redisServer, error) {
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("%s not found (tests/bin/ensure-redis installs Debian's redis-server): %w", bin, err)
	}
	dir, err := os.MkdirTemp("", "bench-redis-")
	if err != nil {
		return nil, fmt.Errorf("create redis dir: %w", err)
	}
	for range 3 {
		port, err := freePort()
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		r := &redisServer{addr: "127.0.0.1:" + strconv.Itoa(port), dir: dir, exited: make(chan struct{})}
		r.cmd = exec.Command(path,
			"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", dir,
			"--save", "", "--appendonly", "no", "--daemonize", "no", "--protected-mode", "yes",
			"--loglevel", "warning", "--logfile", "")
		r.cmd.Stdout, r.cmd.Stderr = &r.log, &r.log
		r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := r.cmd.Start(); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("start %s: %w", path, err)
		}
		go func() { _ = r.cmd.Wait(); close(r.exited) }()
		if err := r.waitReady(ctx); err != nil {
			r.stop()
			if strings.Contains(r.log.String(), "Address already in use") {
				dir, _ = os.MkdirTemp("", "bench-redis-")
				continue
			}
			return nil, fmt.Errorf("redis-server did not start: %w: %s", err, strings.TrimSpace(r.log.String()))
		}
		return r, nil
	}
	return nil, errors.New("redis-server: no free port after 3 tries")
}

// waitReady polls PING for up to 10 s and reads the version.
func (r *redisServer) waitReady(ctx context.Context) error {
	c := r.client(1)
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-r.exited:
			return errors.New("exited")
		default:
		}
		if info, err := c.Info(ctx, "server").Result(); err == nil {
			for _, line := range strings.Split(info, "\n") {
				if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
					r.version = v
				}
			}
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("no answer to INFO within 10 s")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// pid is the server's process id.
func (r *redisServer) pid() int {
	if r == nil || r.cmd.Process == nil {
		return 0
	}
	return r.cmd.Process.Pid
}

// client returns a new client of the server with up to conns connections.
func (r *redisServer) client(conns int) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: r.addr, PoolSize: conns, MinIdleConns: 0,
		DisableIdentity: true, Protocol: 2})
}

// stop ends the server (SIGTERM, then SIGKILL after 5 s) and removes its dir.
func (r *redisServer) stop() {
	if r == nil || r.cmd.Process == nil {
		return
	}
	select {
	case <-r.exited:
	default:
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-r.exited:
		case <-time.After(5 * time.Second):
			_ = r.cmd.Process.Kill()
			<-r.exited
		}
	}
	os.RemoveAll(r.dir)
}

// freePort returns a TCP port of 127.0.0.1 that nobody listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
