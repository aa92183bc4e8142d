package sidecar

import (
	"github.com/ordertimeout/ordertimeout/sidecar/internal/listener"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/sweep"
	"github.com/prometheus/client_golang/prometheus"
)

// The parts the package's tests inspect; the sidecar itself exposes none.

// Sweeper returns the sidecar's sweeper (nil with NoSweep).
func (s *Sidecar) Sweeper() *sweep.Sweeper { return s.sweeper }

// Listener returns the sidecar's conflict listener.
func (s *Sidecar) Listener() *listener.Listener { return s.listen }

// Registry returns the sidecar's metrics.
func (s *Sidecar) Registry() *prometheus.Registry { return s.reg }

// StartupParams returns the startup parameters of the sidecar's pool.
func (s *Sidecar) StartupParams() map[string]string { return s.pool.Config().ConnConfig.RuntimeParams }
