package server

import (
	"cmp"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// DefaultAddr is where the server listens unless told otherwise.
const DefaultAddr = "127.0.0.1:9090"

// The server's limits. Its clients are scrapers, probes and a few people;
// whatever they do, it must not take from the sidecar the file descriptors
// and database connections the sweep needs. Without them, a client that
// opened connections and left them idle (keep-alive) held them forever: a
// hostile review held 20,000, the sidecar ran out of file descriptors, and
// after the database dropped its connections every sweep failed to
// reconnect; a flood of console requests took the shared pool and the CPU
// (tests/bench/console-flood.sh: cancel lag p50 77-134 ms during a flood of
// 100 clients, 1-2 ms with the limits).
const (
	// DefaultMaxConns is how many connections the server holds open at
	// once. One more makes room by closing the connection idle the longest,
	// else the oldest that has sent no request for DefaultNewConnGrace, else
	// it is closed itself (connLimiter): whoever fills them cannot shut out
	// probes and scrapes.
	DefaultMaxConns     = 256
	DefaultNewConnGrace = time.Second
	// DefaultIdleTimeout closes a keep-alive connection idle this long.
	DefaultIdleTimeout = 30 * time.Second
	// readTimeout bounds reading a whole request (its headers: 10 s);
	// writeTimeout bounds a handler and its answer.
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = 60 * time.Second
	// DefaultDBRequests is how many requests to the pages that read the
	// database (the console and River's UI) are served at once; others
	// wait up to DefaultDBWait for their turn, then get 503.
	DefaultDBRequests = 2
	DefaultDBWait     = 5 * time.Second
	// maxHeldAnswer is the most of an answer a database page keeps in
	// memory, so that its turn ends before the answer is sent: a client
	// that reads slowly then holds its connection, not a turn. A longer
	// answer is sent as it is written, keeping its turn to the end.
	maxHeldAnswer = 1 << 20
	// DefaultHeldBytes bounds the answers held at once, all connections
	// together: past it, an answer is sent as it is written, keeping its
	// turn (as a review found, 200 clients that never read held 217 MiB).
	DefaultHeldBytes = 8 << 20
)

// Server serves the sidecar's HTTP endpoints. Set its fields, then call
// Listen and Serve.
type Server struct {
	// Addr is the TCP address to listen on. If empty, DefaultAddr is used.
	Addr string

	// Metrics serves /metrics. It is required.
	Metrics http.Handler

	// Ready reports whether the sidecar can do its work; /readyz answers
	// 503 with its error. If nil, /readyz always answers 200.
	Ready func(ctx context.Context) error

	// RiverUI, if set, is served at /riverui/ (it must be created with
	// Prefix "/riverui").
	RiverUI http.Handler

	// UIUser and UIPassword, if both set, protect /riverui/ with HTTP
	// basic auth. Without them, the UI is served only when the server
	// listens on loopback, and read-only: a request that would change
	// anything (any method but GET, HEAD and OPTIONS) is refused.
	UIUser, UIPassword string

	// Console, if set, is served at /console/ (package console); it does
	// its own authentication.
	Console http.Handler

	// AllowedHosts are more host names the server may be reached at (the
	// Host header of a request), e.g. "sidecar-1.internal" behind a proxy.
	// Without them a request must name an IP address, "localhost" or the
	// host of Addr; any other name is refused (DNS rebinding). Ports are
	// not compared. Entries are matched case-insensitively; an entry with a
	// port has it ignored.
	AllowedHosts []string

	// Logger logs the address and errors. If nil, slog.Default() is used.
	Logger *slog.Logger

	// MaxConns, NewConnGrace, IdleTimeout, DBRequests, DBWait and
	// HeldBytes are the limits above; zero means the default (tests set
	// them lower).
	MaxConns     int
	NewConnGrace time.Duration
	IdleTimeout  time.Duration
	DBRequests   int
	DBWait       time.Duration
	HeldBytes    int64

	ln       net.Listener
	srv      *http.Server
	dbSlots  chan struct{}
	held     atomic.Int64                   // bytes of answers held (heldAnswer)
	connHook func(net.Conn, http.ConnState) // tests only
}

// Listen opens the listening socket and returns its address (useful with
// port 0).
func (s *Server) Listen() (net.Addr, error) {
	addr := s.Addr
	if addr == "" {
		addr = DefaultAddr
	}
	if (s.UIUser == "") != (s.UIPassword == "") {
		return nil, errors.New("http server: set both the UI user and the UI password, or neither")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("http server: listen on %s: %w", addr, err)
	}
	s.ln = ln
	limiter := newConnLimiter(cmp.Or(s.MaxConns, DefaultMaxConns), cmp.Or(s.NewConnGrace, DefaultNewConnGrace), s.logger())
	s.srv = &http.Server{
		Handler: s.Handler(),
		ConnState: func(c net.Conn, state http.ConnState) {
			limiter.track(c, state)
			if s.connHook != nil {
				s.connHook(c, state)
			}
		},
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       cmp.Or(s.IdleTimeout, DefaultIdleTimeout),
	}
	return ln.Addr(), nil
}

// Handler returns the server's routes behind the Host and Origin guard
// (see guard).
func (s *Server) Handler() http.Handler {
	return s.guard(s.routes())
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", s.Metrics)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if s.Ready != nil {
			ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
			defer cancel()
			if err := s.Ready(ctx); err != nil {
				http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	s.dbSlots = make(chan struct{}, cmp.Or(s.DBRequests, DefaultDBRequests))
	if s.Console != nil {
		mux.Handle("/console/", s.limitDB(s.Console))
	}
	if s.RiverUI != nil {
		// Only River UI's API reads the database; its page and scripts
		// are files in the binary, served without waiting for a turn.
		ui := http.NewServeMux()
		ui.Handle("/riverui/api/", s.limitDB(s.RiverUI))
		ui.Handle("/riverui/", s.RiverUI)
		// Its pages can cancel and delete jobs: never in another site's
		// frame (clickjacking), as the console's.
		switch {
		case s.UIUser != "":
			mux.Handle("/riverui/", noFraming(s.basicAuth(ui)))
		case s.ln == nil || isLoopback(s.ln.Addr()):
			mux.Handle("/riverui/", noFraming(readOnly(ui)))
		default:
			s.logger().Warn("River UI not served: the HTTP server listens beyond localhost and no UI user and password are set")
		}
	}
	return mux
}

// noFraming forbids every answer of h to be shown in a frame of another
// page.
func noFraming(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("Content-Security-Policy", "frame-ancestors 'none'")
		h.ServeHTTP(w, r)
	})
}

// Serve serves until ctx is done, then shuts down, letting requests in
// flight finish for up to a few seconds.
func (s *Server) Serve(ctx context.Context) error {
	if s.srv == nil {
		return errors.New("http server: Listen first")
	}
	s.logger().Info("http server listening", "addr", s.ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(s.ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("http server: shut down: %w", err)
	}
	return nil
}

// limitDB serves at most DBRequests requests of next at once (the console
// and River's UI read the database, on the pool the sweep uses unless the
// console has its own); a request waits up to DBWait for its turn, then
// gets 503 with Retry-After. The turn ends when next returns: its answer
// (up to maxHeldAnswer) is sent after, so a client that reads it slowly
// does not keep others from their turn.
func (s *Server) limitDB(next http.Handler) http.Handler {
	wait := cmp.Or(s.DBWait, DefaultDBWait)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case s.dbSlots <- struct{}{}:
			held := &heldAnswer{w: w, total: &s.held, budget: cmp.Or(s.HeldBytes, DefaultHeldBytes)}
			defer held.release()
			func() {
				defer func() { <-s.dbSlots }()
				next.ServeHTTP(held, r)
			}()
			held.send()
		case <-t.C:
			w.Header().Set("Retry-After", strconv.Itoa(max(1, int(wait.Seconds()))))
			http.Error(w, fmt.Sprintf("busy: the console and the River UI serve %d requests at a time, so that they never take the database from the sweep; try again", cap(s.dbSlots)),
				http.StatusServiceUnavailable)
		case <-r.Context().Done():
		}
	})
}

// heldAnswer keeps an answer in memory up to maxHeldAnswer bytes, and while
// the answers held by all connections (total) stay within budget; then it
// sends what it holds and the rest as it comes. The budget is charged with
// the memory of body (its capacity, which grows here rather than in append,
// so that the charge is what was allocated), not only the bytes written.
type heldAnswer struct {
	w       http.ResponseWriter
	code    int
	body    []byte
	sending bool
	total   *atomic.Int64
	budget  int64
}

// release gives back the bytes held to the budget.
func (h *heldAnswer) release() {
	h.total.Add(-int64(cap(h.body)))
	h.body = nil
}

func (h *heldAnswer) Header() http.Header { return h.w.Header() }

func (h *heldAnswer) WriteHeader(code int) {
	if h.code == 0 {
		h.code = code
	}
}

func (h *heldAnswer) Write(p []byte) (int, error) {
	if h.code == 0 {
		h.code = http.StatusOK
	}
	if need := len(h.body) + len(p); !h.sending && need <= maxHeldAnswer {
		if need <= cap(h.body) {
			h.body = append(h.body, p...)
			return len(p), nil
		}
		grown := max(need, min(2*cap(h.body), maxHeldAnswer))
		more := int64(grown - cap(h.body))
		if h.total.Add(more) <= h.budget {
			body := make([]byte, len(h.body), grown)
			copy(body, h.body)
			h.body = append(body, p...)
			return len(p), nil
		}
		h.total.Add(-more)
	}
	if !h.sending {
		h.sending = true
		h.w.WriteHeader(h.code)
		_, err := h.w.Write(h.body)
		h.release()
		if err != nil {
			return 0, err
		}
	}
	return h.w.Write(p)
}

// send sends the answer held, unless it is being sent already.
func (h *heldAnswer) send() {
	if h.sending {
		return
	}
	h.w.WriteHeader(cmp.Or(h.code, http.StatusOK))
	_, _ = h.w.Write(h.body)
}

func (s *Server) basicAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, password, ok := r.BasicAuth()
		if !ok ||
			subtle.ConstantTimeCompare([]byte(user), []byte(s.UIUser)) != 1 ||
			subtle.ConstantTimeCompare([]byte(password), []byte(s.UIPassword)) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="ordertimeout", charset="UTF-8"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// readOnly refuses every request that could change something: the River UI
// can cancel, retry and delete jobs, and without credentials nobody may.
func readOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !safeMethod(r.Method) {
			forbid(w, "the River UI is read-only without credentials: start the sidecar with --ui-user and --ui-password to cancel, retry or delete jobs")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// guard protects every route against requests a browser makes on behalf of
// another site:
//
//   - DNS rebinding: a page of evil.example whose name now resolves to this
//     server's address sends Host: evil.example. A request is served only
//     if its Host is an IP address, "localhost", the host of Addr, or one of
//     AllowedHosts (ports are not compared: a rebinding attack needs a name,
//     and a name is what is checked).
//   - Cross-site request forgery: a page of another origin POSTs to the
//     server (with cached credentials, if any). A request that may change
//     something (any method but GET, HEAD and OPTIONS) is refused when its
//     Origin is not this server (scheme http or https, host and port as in
//     Host, or a host of AllowedHosts), when it has no Origin but a
//     Sec-Fetch-Site other than same-origin or none, or when it has neither
//     but a Referer of another origin. A request with none of the three is
//     not from a browser and is let through (credentials still apply).
//
// Refused requests get 403 and a body saying why.
func (s *Server) guard(next http.Handler) http.Handler {
	allowed := map[string]bool{"localhost": true}
	if h := Hostname(s.Addr); h != "" {
		allowed[h] = true
	}
	trusted := map[string]bool{} // origins by host name
	for _, h := range s.AllowedHosts {
		allowed[Hostname(h)] = true
		trusted[Hostname(h)] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := Hostname(r.Host)
		if host == "" || (!allowed[host] && !isIP(host)) {
			forbid(w, fmt.Sprintf("Host %q is not one this server is reached at (an IP address, localhost, or a name given with --http-allowed-hosts)", r.Host))
			return
		}
		if !safeMethod(r.Method) {
			if why := CrossOrigin(r, trusted); why != "" {
				forbid(w, why)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// CrossOrigin says why r comes from another origin, or "" if it does not
// (or says nothing about it): an Origin that is not r's Host or a trusted
// host, a Sec-Fetch-Site other than same-origin or none, or, without both,
// a Referer of another origin. trusted holds Hostname()s. The console
// checks its forms with it too.
func CrossOrigin(r *http.Request, trusted map[string]bool) string {
	sameOrigin := func(raw string) bool {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return false
		}
		return strings.EqualFold(u.Host, r.Host) || trusted[Hostname(u.Host)]
	}
	if origin, ok := r.Header["Origin"]; ok {
		if len(origin) != 1 || !sameOrigin(origin[0]) {
			return fmt.Sprintf("cross-origin request refused: Origin %q is not this server (%s)", strings.Join(origin, ", "), r.Host)
		}
		return ""
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		if site != "same-origin" && site != "none" {
			return fmt.Sprintf("cross-origin request refused: Sec-Fetch-Site is %q", site)
		}
		return ""
	}
	if referer := r.Header.Get("Referer"); referer != "" && !sameOrigin(referer) {
		return fmt.Sprintf("cross-origin request refused: Referer %q is not this server (%s)", referer, r.Host)
	}
	return ""
}

func safeMethod(method string) bool {
	return method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions
}

// Hostname returns the lower-case host of a "host", "host:port", "[v6]" or
// "[v6]:port", without brackets and without a trailing dot.
func Hostname(hostport string) string {
	h := hostport
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		h = host
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

func isIP(host string) bool {
	return net.ParseIP(host) != nil
}

func forbid(w http.ResponseWriter, why string) {
	http.Error(w, "forbidden: "+why, http.StatusForbidden)
}

func isLoopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

func (s *Server) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.Default()
}
