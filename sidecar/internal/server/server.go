package server

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// DefaultAddr is where the server listens unless told otherwise.
const DefaultAddr = "127.0.0.1:9090"

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
	// basic auth.
	UIUser, UIPassword string

	// Logger logs the address and errors. If nil, slog.Default() is used.
	Logger *slog.Logger

	ln  net.Listener
	srv *http.Server
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
	s.srv = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	return ln.Addr(), nil
}

// Handler returns the server's routes.
func (s *Server) Handler() http.Handler {
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
	if s.RiverUI != nil {
		switch {
		case s.UIUser != "":
			mux.Handle("/riverui/", s.basicAuth(s.RiverUI))
		case s.ln == nil || isLoopback(s.ln.Addr()):
			mux.Handle("/riverui/", s.RiverUI)
		default:
			s.logger().Warn("River UI not served: the HTTP server listens beyond localhost and no UI user and password are set")
		}
	}
	return mux
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
