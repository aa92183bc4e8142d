package server

import (
	"log/slog"
	"net"
	"sync"
	"time"
)

// limitListener accepts at most a number of connections open at once: when
// that many are open, Accept waits until one of them closes (the clients
// that come meanwhile wait in the kernel's accept queue). It says so in a
// warning, at most once a minute.
type limitListener struct {
	net.Listener
	slots  chan struct{}
	closed chan struct{}
	once   sync.Once
	logger *slog.Logger

	mu     sync.Mutex
	warned time.Time
}

func newLimitListener(ln net.Listener, n int, logger *slog.Logger) *limitListener {
	return &limitListener{Listener: ln, slots: make(chan struct{}, n), closed: make(chan struct{}), logger: logger}
}

// Accept waits for a free slot, then for a connection.
func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	default:
		l.warnFull()
		select {
		case l.slots <- struct{}{}:
		case <-l.closed:
			return nil, net.ErrClosed
		}
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitConn{Conn: c, release: sync.OnceFunc(func() { <-l.slots })}, nil
}

// Close closes the listener and ends an Accept waiting for a slot.
func (l *limitListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

func (l *limitListener) warnFull() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if time.Since(l.warned) < time.Minute {
		return
	}
	l.warned = time.Now()
	l.logger.Warn("http server: as many connections open as it holds; new ones wait until one closes (idle ones close after the idle timeout)",
		"max_conns", cap(l.slots))
}

// limitConn gives its slot back when it is closed, once.
type limitConn struct {
	net.Conn
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}
