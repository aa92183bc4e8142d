package sidecar

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/http"

	"github.com/jackc/pgx/v5/pgxpool"
	"riverqueue.com/riverui"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/console"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/metrics"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/server"
)

// newHTTP builds the HTTP server with River's UI and the console, unless
// HTTPAddr is "-".
func (s *Sidecar) newHTTP(gw gateway.Gateway) error {
	cfg, logger, reg := s.cfg, s.logger, s.reg
	if cfg.HTTPAddr == "-" {
		return nil
	}
	ui, err := riverui.NewHandler(&riverui.HandlerOpts{
		Endpoints: riverui.NewEndpoints(s.river, nil),
		Logger:    logger.With("component", "riverui"),
		Prefix:    "/riverui",
	})
	if err != nil {
		return fmt.Errorf("create River UI: %w", err)
	}
	s.ui = ui
	consoleHandler, err := s.newConsole(gw)
	if err != nil {
		return err
	}
	s.http = &server.Server{
		Addr:         cfg.HTTPAddr,
		Metrics:      metrics.Handler(reg, logger.With("component", "metrics")),
		Ready:        s.Ready,
		RiverUI:      ui,
		UIUser:       cfg.UIUser,
		UIPassword:   cfg.UIPassword,
		AllowedHosts: cfg.HTTPAllowedHosts,
		Logger:       logger.With("component", "http"),
	}
	if consoleHandler != nil {
		s.http.Console = consoleHandler
	}
	return nil
}

// newConsole builds the console's handler, or returns nil when it is not
// served (no users configured and the HTTP server reachable beyond
// loopback).
func (s *Sidecar) newConsole(gw gateway.Gateway) (http.Handler, error) {
	cfg := s.cfg
	viewer, err := console.ParseCredentials(cfg.ConsoleViewer)
	if err != nil {
		return nil, fmt.Errorf("console viewer: %w", err)
	}
	operator, err := console.ParseCredentials(cfg.ConsoleOperator)
	if err != nil {
		return nil, fmt.Errorf("console operator: %w", err)
	}
	anonymous := viewer.User == "" && operator.User == ""
	if anonymous && !isLoopbackAddr(cmp.Or(cfg.HTTPAddr, server.DefaultAddr)) {
		s.logger.Warn("console not served: the HTTP server listens beyond localhost and no console viewer or operator is set")
		return nil, nil
	}
	pool := s.pool
	if cfg.ConsoleDatabaseURL != "" {
		pc, err := pgxpool.ParseConfig(cfg.ConsoleDatabaseURL)
		if err != nil {
			return nil, fmt.Errorf("parse console database URL: %w", err)
		}
		pc.MaxConns = 4
		if pc.ConnConfig.RuntimeParams["application_name"] == "" {
			pc.ConnConfig.RuntimeParams["application_name"] = "ordertimeout console:" + cfg.Name
		}
		if s.consolePool, err = pgxpool.NewWithConfig(context.Background(), pc); err != nil {
			return nil, fmt.Errorf("connect the console to the database: %w", err)
		}
		pool = s.consolePool
	}
	h, err := console.New(console.Config{
		Pool:         pool,
		Viewer:       viewer,
		Operator:     operator,
		Anonymous:    anonymous,
		TrustedHosts: cfg.HTTPAllowedHosts,
		Gateway:      gw,
		Logger:       s.logger.With("component", "console"),
	})
	if err != nil {
		return nil, err
	}
	return h, nil
}

// isLoopbackAddr reports whether a listen address names a loopback host.
func isLoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
