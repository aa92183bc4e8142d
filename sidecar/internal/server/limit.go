package server

import (
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// connLimiter keeps the server's open connections at most max, without
// letting anyone who fills them shut the others out: a connection that
// comes when max are open makes room by closing the one idle the longest
// (a keep-alive connection between requests), else the oldest that has sent
// no request yet for longer than grace; when neither exists (every one is
// answering a request, or has just connected), the new connection is closed
// at once. So probes and scrapes get through whoever holds connections
// open (a client that keeps 256 keep-alive connections and sends a request
// on each every 20 s once blinded /healthz, /readyz and /metrics), and the
// sidecar never holds more than max+1 descriptors for them. It is
// http.Server's ConnState hook, and warns at most once a minute.
type connLimiter struct {
	max    int
	grace  time.Duration
	logger *slog.Logger

	mu     sync.Mutex
	conns  map[net.Conn]connInfo
	warned time.Time
}

type connInfo struct {
	state http.ConnState
	since time.Time // when it entered state
}

func newConnLimiter(max int, grace time.Duration, logger *slog.Logger) *connLimiter {
	return &connLimiter{max: max, grace: grace, logger: logger, conns: make(map[net.Conn]connInfo)}
}

// track is the ConnState hook.
func (l *connLimiter) track(c net.Conn, state http.ConnState) {
	var victim net.Conn
	var how string
	l.mu.Lock()
	switch state {
	case http.StateClosed, http.StateHijacked:
		delete(l.conns, c)
		l.mu.Unlock()
		return
	case http.StateNew:
		now := time.Now()
		if len(l.conns) >= l.max {
			victim, how = l.victimLocked(now), "closed the connection idle the longest"
			if victim == nil {
				victim, how = c, "refused a new connection: every one open is answering or has just connected"
			}
			delete(l.conns, victim)
		}
		if victim != c {
			l.conns[c] = connInfo{state: state, since: now}
		}
	default:
		if _, ok := l.conns[c]; ok {
			l.conns[c] = connInfo{state: state, since: time.Now()}
		}
	}
	warn := victim != nil && time.Since(l.warned) >= time.Minute
	if warn {
		l.warned = time.Now()
	}
	l.mu.Unlock()
	if victim != nil {
		_ = victim.Close()
	}
	if warn {
		l.logger.Warn("http server: as many connections open as it holds; "+how+" (this warning comes at most once a minute)",
			"max_conns", l.max)
	}
}

// victimLocked returns the connection idle the longest, else the oldest
// that has sent nothing for longer than grace, else nil.
func (l *connLimiter) victimLocked(now time.Time) net.Conn {
	var idle, fresh net.Conn
	var idleSince, freshSince time.Time
	for c, i := range l.conns {
		switch {
		case i.state == http.StateIdle && (idle == nil || i.since.Before(idleSince)):
			idle, idleSince = c, i.since
		case i.state == http.StateNew && now.Sub(i.since) > l.grace && (fresh == nil || i.since.Before(freshSince)):
			fresh, freshSince = c, i.since
		}
	}
	if idle != nil {
		return idle
	}
	return fresh
}
