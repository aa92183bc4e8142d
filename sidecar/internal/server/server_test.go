package server_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/server"
)

// start runs s on a free loopback port until the test ends and returns its
// address and how many requests reached the River UI handler.
func start(t *testing.T, s *server.Server) (string, *atomic.Int32) {
	t.Helper()
	var reached atomic.Int32
	s.Metrics = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("metrics\n")) })
	s.RiverUI = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		reached.Add(1)
		_, _ = w.Write([]byte("ui\n"))
	})
	if s.Addr == "" {
		s.Addr = "127.0.0.1:0"
	}
	s.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	addr, err := s.Listen()
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return addr.String(), &reached
}

type request struct {
	method, path, host string
	header             map[string]string
	user, password     string
}

func do(t *testing.T, addr string, r request) (int, string) {
	t.Helper()
	req, err := http.NewRequest(r.method, "http://"+addr+r.path, strings.NewReader(`{"ids":["1"]}`))
	require.NoError(t, err)
	if r.host != "" {
		req.Host = r.host
	}
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	if r.user != "" {
		req.SetBasicAuth(r.user, r.password)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// Every route refuses a Host that is not an IP address, localhost, the
// listen host or an allowed name (DNS rebinding), reads included; a request
// that may change something is refused when a browser says it comes from
// another origin, with or without credentials.
func TestGuard(t *testing.T) {
	t.Parallel()
	s := &server.Server{UIUser: "admin", UIPassword: "pw", AllowedHosts: []string{"Ops.Example.com", "sidecar-1.internal:9443"}}
	addr, reached := start(t, s)
	port := addr[strings.LastIndex(addr, ":")+1:]
	self := "http://" + addr
	const user, pw = "admin", "pw"
	post := func(host string, header map[string]string) request {
		return request{method: http.MethodPost, path: "/riverui/api/jobs/delete", host: host, header: header, user: user, password: pw}
	}

	for name, tc := range map[string]struct {
		r        request
		code     int
		contains string
	}{
		// The reproduction: a page of evil.example rebound to us.
		"rebound POST":        {post("evil.example:"+port, map[string]string{"Origin": "https://evil.example", "Content-Type": "text/plain"}), 403, `Host "evil.example:` + port + `" is not one`},
		"rebound GET metrics": {request{method: "GET", path: "/metrics", host: "evil.example:" + port}, 403, "is not one this server is reached at"},
		"rebound GET UI":      {request{method: "GET", path: "/riverui/api/jobs", host: "evil.example", user: user, password: pw}, 403, "is not one"},
		"rebound healthz":     {request{method: "GET", path: "/healthz", host: "localhost.evil.example:" + port}, 403, "is not one"},
		"empty host":          {request{method: "GET", path: "/healthz", host: " "}, 403, `Host "" is not one`},
		"decimal IP host":     {request{method: "GET", path: "/healthz", host: "2130706433:" + port}, 403, "is not one"},
		// A foreign origin, whatever the credentials.
		"foreign Origin":         {post(addr, map[string]string{"Origin": "https://evil.example"}), 403, `Origin "https://evil.example" is not this server`},
		"foreign Origin port":    {post(addr, map[string]string{"Origin": "http://127.0.0.1:1"}), 403, "is not this server"},
		"Origin other scheme":    {post(addr, map[string]string{"Origin": "file://" + addr}), 403, "is not this server"},
		"null Origin":            {post(addr, map[string]string{"Origin": "null"}), 403, `Origin "null"`},
		"cross-site fetch":       {post(addr, map[string]string{"Sec-Fetch-Site": "cross-site"}), 403, `Sec-Fetch-Site is "cross-site"`},
		"same-site fetch":        {post(addr, map[string]string{"Sec-Fetch-Site": "same-site"}), 403, `Sec-Fetch-Site is "same-site"`},
		"foreign Referer":        {post(addr, map[string]string{"Referer": "https://evil.example/page"}), 403, `Referer "https://evil.example/page"`},
		"foreign Origin, PUT":    {request{method: "PUT", path: "/riverui/api/queues/q/pause", host: addr, header: map[string]string{"Origin": "https://evil.example"}, user: user, password: pw}, 403, "cross-origin"},
		"foreign Origin, DELETE": {request{method: "DELETE", path: "/riverui/x", host: addr, header: map[string]string{"Origin": "https://evil.example"}, user: user, password: pw}, 403, "cross-origin"},
		"no credentials":         {request{method: "POST", path: "/riverui/api/jobs/delete", host: addr, header: map[string]string{"Origin": self}}, 401, "unauthorized"},
		"wrong credentials":      {request{method: "POST", path: "/riverui/api/jobs/delete", host: addr, header: map[string]string{"Origin": self}, user: user, password: "x"}, 401, "unauthorized"},
		// A cross-origin GET is fine: the browser does not let the other
		// page read the answer.
		"foreign Origin, GET": {request{method: "GET", path: "/riverui/api/jobs", host: addr, header: map[string]string{"Origin": "https://evil.example"}, user: user, password: pw}, 200, "ui"},
		// Legitimate requests.
		"same origin":            {post(addr, map[string]string{"Origin": self, "Sec-Fetch-Site": "same-origin"}), 200, "ui"},
		"same origin, localhost": {post("localhost:"+port, map[string]string{"Origin": "http://localhost:" + port}), 200, "ui"},
		"same origin, https":     {post(addr, map[string]string{"Origin": "https://" + addr}), 200, "ui"},
		"no browser headers":     {post(addr, nil), 200, "ui"},
		"typed in the browser":   {post(addr, map[string]string{"Sec-Fetch-Site": "none"}), 200, "ui"},
		"same Referer":           {post(addr, map[string]string{"Referer": self + "/riverui/jobs"}), 200, "ui"},
		"IPv6 loopback host":     {request{method: "GET", path: "/healthz", host: "[::1]:" + port}, 200, "ok"},
		"other IP host":          {request{method: "GET", path: "/healthz", host: "10.1.2.3:9090"}, 200, "ok"},
		"allowed name":           {request{method: "GET", path: "/metrics", host: "ops.example.com"}, 200, "metrics"},
		"allowed name, dot":      {request{method: "GET", path: "/metrics", host: "OPS.example.com.:443"}, 200, "metrics"},
		"allowed name with port": {request{method: "GET", path: "/metrics", host: "sidecar-1.internal:9443"}, 200, "metrics"},
		"allowed name as Origin": {post(addr, map[string]string{"Origin": "https://ops.example.com"}), 200, "ui"},
	} {
		t.Run(name, func(t *testing.T) {
			before := reached.Load()
			code, body := do(t, addr, tc.r)
			require.Equal(t, tc.code, code, body)
			require.Contains(t, body, tc.contains)
			if tc.contains != "ui" {
				require.Equal(t, before, reached.Load(), "a refused request never reaches the UI")
			}
		})
	}
}

// Without credentials the River UI is served on loopback only, read-only:
// it can be looked at, but nothing can be cancelled, retried or deleted.
func TestUIReadOnlyWithoutCredentials(t *testing.T) {
	t.Parallel()
	addr, reached := start(t, &server.Server{})
	code, body := do(t, addr, request{method: http.MethodGet, path: "/riverui/api/jobs"})
	require.Equal(t, 200, code, body)
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		code, body := do(t, addr, request{method: method, path: "/riverui/api/jobs/delete", header: map[string]string{"Origin": "http://" + addr}})
		require.Equal(t, 403, code, method)
		require.Contains(t, body, "the River UI is read-only without credentials: start the sidecar with --ui-user and --ui-password")
	}
	require.EqualValues(t, 1, reached.Load())
}

// raw opens a TCP connection to addr and sends a GET of path on it
// (keep-alive).
func raw(t *testing.T, addr, path string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	_, err = c.Write([]byte("GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"))
	require.NoError(t, err)
	return c
}

// answered reads an answer on c within d: its status line, or "" when none
// came (the read timed out), or the error.
func answered(c net.Conn, d time.Duration) (string, error) {
	if err := c.SetReadDeadline(time.Now().Add(d)); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "", nil
	}
	return strings.TrimSpace(line), err
}

// served sends a GET of /healthz on c and says whether it was answered
// 200 within 5 s.
func served(t *testing.T, c net.Conn) bool {
	t.Helper()
	if _, err := c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")); err != nil {
		return false
	}
	if err := c.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return false
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return err == nil && resp.StatusCode == http.StatusOK
}

// closedByServer says whether the server closed c (a read ends with EOF or
// a reset within 5 s).
func closedByServer(c net.Conn) bool {
	if err := c.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return false
	}
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// The server holds at most MaxConns connections open, and whoever holds
// them cannot shut the others out: with that many open and idle
// (keep-alive), a new client is served, and the connection idle the longest
// is closed to make room; the others stay. Before, idle connections were
// held without bound (a review held 20,000 until the sidecar had no file
// descriptor left for the database); a first cap that made new clients wait
// let a client holding 256 connections blind /healthz and /metrics.
func TestConnectionsAreBoundedAndIdleOnesMakeRoom(t *testing.T) {
	t.Parallel()
	addr, _ := start(t, &server.Server{MaxConns: 3, IdleTimeout: time.Minute})
	var idle []net.Conn
	for range 3 {
		c := raw(t, addr, "/healthz")
		line, err := answered(c, 5*time.Second)
		require.NoError(t, err)
		require.Equal(t, "HTTP/1.1 200 OK", line)
		idle = append(idle, c)
	}
	fourth := raw(t, addr, "/healthz")
	line, err := answered(fourth, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "HTTP/1.1 200 OK", line, "a fourth client is served while three connections are open")
	// One of them was closed to make room: the one idle the longest, which
	// is idle[0] unless the server's goroutine marked another idle first.
	closed := -1
	deadline := time.Now().Add(5 * time.Second)
	for closed < 0 && time.Now().Before(deadline) {
		for i, c := range idle {
			if err := c.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
				t.Fatal(err)
			}
			_, err := c.Read(make([]byte, 1))
			var ne net.Error
			if err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
				closed = i
				break
			}
		}
	}
	require.GreaterOrEqual(t, closed, 0, "an idle connection was closed to make room")
	for i, c := range idle {
		if i != closed {
			require.True(t, served(t, c), "the others stay open")
		}
	}
}

// Connections that never send a request make room once older than
// NewConnGrace; before that, a new connection is the one refused, so that a
// flood of connections cannot close a probe that has only just connected.
func TestSilentConnectionsMakeRoomAfterTheirGrace(t *testing.T) {
	t.Parallel()
	s, accepted := newConns(&server.Server{MaxConns: 2, NewConnGrace: time.Hour})
	addr, _ := start(t, s)
	silent := []net.Conn{dial(t, addr), dial(t, addr)}
	waitNew(t, accepted, 2)
	third := raw(t, addr, "/healthz")
	require.True(t, closedByServer(third), "within their grace the silent ones stay, and a new connection is refused")
	for _, c := range silent {
		line, err := answered(c, 200*time.Millisecond)
		require.NoError(t, err)
		require.Empty(t, line, "still open, nothing sent")
	}

	s, accepted = newConns(&server.Server{MaxConns: 2, NewConnGrace: time.Nanosecond})
	addr, _ = start(t, s)
	silent = []net.Conn{dial(t, addr)}
	waitNew(t, accepted, 1)
	silent = append(silent, dial(t, addr))
	waitNew(t, accepted, 1)
	third = raw(t, addr, "/healthz")
	line, err := answered(third, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "HTTP/1.1 200 OK", line, "past their grace, a silent connection makes room")
	require.True(t, closedByServer(silent[0]), "the oldest silent one was closed")
}

// dial opens a TCP connection to addr and sends nothing.
func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// newConns returns a server whose accepted connections are counted on the
// channel, for waitNew.
func newConns(s *server.Server) (*server.Server, chan struct{}) {
	accepted := make(chan struct{}, 64)
	s.SetConnHook(func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			accepted <- struct{}{}
		}
	})
	return s, accepted
}

// waitNew waits until the server has accepted n more connections.
func waitNew(t *testing.T, accepted chan struct{}, n int) {
	t.Helper()
	for range n {
		select {
		case <-accepted:
		case <-time.After(5 * time.Second):
			t.Fatal("the server did not accept the connections")
		}
	}
}

// A keep-alive connection left idle is closed by the server after
// IdleTimeout (before, never).
func TestIdleConnectionsAreClosed(t *testing.T) {
	t.Parallel()
	addr, _ := start(t, &server.Server{IdleTimeout: 200 * time.Millisecond})
	c := raw(t, addr, "/healthz")
	r := bufio.NewReader(c)
	resp, err := http.ReadResponse(r, nil)
	require.NoError(t, err)
	_, err = io.Copy(io.Discard, resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err = r.ReadByte()
	require.ErrorIs(t, err, io.EOF, "the server closed the idle connection")
}

// The console and River's UI, which read the database, serve DBRequests
// requests at once; another waits up to DBWait, then gets 503 with
// Retry-After, while the other routes answer as usual. A flood of console
// requests once took the sweep's pool and CPU (cancel lag p50 from 8 ms to
// 760 ms).
func TestDatabasePagesServeFewAtOnce(t *testing.T) {
	t.Parallel()
	var inside atomic.Int32
	release := make(chan struct{})
	s := &server.Server{DBRequests: 2, DBWait: 200 * time.Millisecond}
	s.Console = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		inside.Add(1)
		<-release
		_, _ = w.Write([]byte("console\n"))
	})
	addr, _ := start(t, s)
	slow := []net.Conn{raw(t, addr, "/console/"), raw(t, addr, "/console/riverui-like")}
	waitEntered(t, &inside, 2)

	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/console/", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.NotEmpty(t, resp.Header.Get("Retry-After"))
	require.Contains(t, string(body), "serve 2 requests at a time")
	require.EqualValues(t, 2, inside.Load(), "the third never reached the console")
	code, _ := do(t, addr, request{method: http.MethodGet, path: "/healthz"})
	require.Equal(t, http.StatusOK, code, "other routes answer meanwhile")

	close(release)
	for _, c := range slow {
		line, err := answered(c, 5*time.Second)
		require.NoError(t, err)
		require.Equal(t, "HTTP/1.1 200 OK", line)
	}
	code, _ = do(t, addr, request{method: http.MethodGet, path: "/console/"})
	require.Equal(t, http.StatusOK, code, "served again once the others are done")
}

// A database page's turn ends when its answer is written, not when the
// client has read it: a client that reads a page slowly (or never) keeps
// its connection, not the turn. Before, the handler's writes blocked on the
// full socket while it held the turn, for up to the write timeout (60 s),
// and two such clients shut everyone out of the console and River's UI.
func TestASlowReaderDoesNotHoldATurn(t *testing.T) {
	t.Parallel()
	s := &server.Server{DBRequests: 1, DBWait: 500 * time.Millisecond}
	addr, entered := pageServer(t, s)
	slow := slowClient(t, addr)
	waitEntered(t, entered, 1)

	code, body := do(t, addr, request{method: http.MethodGet, path: "/console/"})
	require.Equal(t, http.StatusOK, code, "served while the slow client has not read its answer")
	require.Equal(t, page, body)
	require.Equal(t, page, readWhole(t, slow), "the slow client's answer is whole")
}

// page is the console page of pageServer: 128 KiB, more than the two small
// sockets of slowClient hold.
var page = strings.Repeat("0123456789abcdef", 8<<10)

// pageServer starts s with a console that answers page, on connections
// whose send buffer is small, and returns its address and how many
// requests reached the console.
func pageServer(t *testing.T, s *server.Server) (string, *atomic.Int32) {
	t.Helper()
	var entered atomic.Int32
	s.Console = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		entered.Add(1)
		_, _ = w.Write([]byte(page))
	})
	s.SetConnHook(func(c net.Conn, state http.ConnState) {
		if tc, ok := c.(*net.TCPConn); ok && state == http.StateNew {
			_ = tc.SetWriteBuffer(4096)
		}
	})
	addr, _ := start(t, s)
	return addr, &entered
}

// slowClient asks addr for /console/ on a connection with a small receive
// buffer, and does not read the answer.
func slowClient(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.(*net.TCPConn).SetReadBuffer(4096))
	_, err = c.Write([]byte("GET /console/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"))
	require.NoError(t, err)
	return c
}

// waitEntered waits, up to 10 s, for n requests to have reached the console.
func waitEntered(t *testing.T, entered *atomic.Int32, n int32) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for entered.Load() < n {
		require.True(t, time.Now().Before(deadline), "request %d reaches the console", n)
		time.Sleep(5 * time.Millisecond)
	}
}

// readWhole reads the answer on c (with a larger buffer: with both buffers
// this small, each segment waits for a delayed ACK) and returns its body,
// which must come with 200.
func readWhole(t *testing.T, c net.Conn) string {
	t.Helper()
	require.NoError(t, c.(*net.TCPConn).SetReadBuffer(1<<20))
	require.NoError(t, c.SetReadDeadline(time.Now().Add(20*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	got, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return string(got)
}

// River UI's page and scripts are files in the binary: they are served
// while the database pages are busy; its API waits for a turn.
func TestRiverUIFilesNeedNoTurn(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var inside atomic.Int32
	s := &server.Server{DBRequests: 1, DBWait: 200 * time.Millisecond}
	s.Console = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		inside.Add(1)
		<-release
		_, _ = w.Write([]byte("console\n"))
	})
	addr, reached := start(t, s)
	busy := raw(t, addr, "/console/")
	waitEntered(t, &inside, 1)

	code, _ := do(t, addr, request{method: http.MethodGet, path: "/riverui/assets/main.js"})
	require.Equal(t, http.StatusOK, code, "a file of the UI needs no turn")
	code, _ = do(t, addr, request{method: http.MethodGet, path: "/riverui/"})
	require.Equal(t, http.StatusOK, code, "nor does its page")
	require.EqualValues(t, 2, reached.Load())
	code, _ = do(t, addr, request{method: http.MethodGet, path: "/riverui/api/jobs"})
	require.Equal(t, http.StatusServiceUnavailable, code, "the API waits for a turn")
	require.EqualValues(t, 2, reached.Load())

	close(release)
	line, err := answered(busy, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "HTTP/1.1 200 OK", line)
	code, _ = do(t, addr, request{method: http.MethodGet, path: "/riverui/api/jobs"})
	require.Equal(t, http.StatusOK, code)
}

// The answers held for clients that read slowly have a budget, all
// connections together: past it, an answer is sent as it is written,
// keeping its turn. Found by a review of the first version, whose only bound
// was the connection count: 200 clients that never read a page of 1 MiB
// held 217 MiB.
func TestHeldAnswersHaveABudget(t *testing.T) {
	t.Parallel()
	s := &server.Server{DBRequests: 1, DBWait: 300 * time.Millisecond, HeldBytes: 200 << 10}
	addr, entered := pageServer(t, s)

	first := slowClient(t, addr)
	waitEntered(t, entered, 1)
	code, _ := do(t, addr, request{method: http.MethodGet, path: "/console/"})
	require.Equal(t, http.StatusOK, code, "the first slow answer is held: its turn is free")
	require.EqualValues(t, len(page), s.Held())

	second := slowClient(t, addr)
	waitEntered(t, entered, 3)
	code, _ = do(t, addr, request{method: http.MethodGet, path: "/console/"})
	require.Equal(t, http.StatusServiceUnavailable, code, "the second is past the budget: sent as written, it keeps its turn")
	require.EqualValues(t, len(page), s.Held(), "held: the first answer only")

	for _, c := range []net.Conn{first, second} {
		require.Equal(t, page, readWhole(t, c), "the answer is whole")
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.Held() != 0 {
		require.True(t, time.Now().Before(deadline), "the budget is given back once the answers are sent: %d held", s.Held())
		time.Sleep(5 * time.Millisecond)
	}
}
