package server

import (
	"net"
	"net/http"
)

// SetConnHook has f called after the server tracked each connection's
// state (tests wait on it for the server to have accepted a connection).
func (s *Server) SetConnHook(f func(net.Conn, http.ConnState)) { s.connHook = f }

// Held says how many bytes of answers the server holds now.
func (s *Server) Held() int64 { return s.held.Load() }
