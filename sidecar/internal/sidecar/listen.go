package sidecar

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/listener"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/sweep"
)

// ListenerName is the application_name of the sidecar's one LISTEN
// connection (channels ordertimeout_wake and ordertimeout_conflict).
const ListenerName = "ordertimeout-listen"

// newListeners builds the sweep and the listener, whose one connection
// LISTENs for the conflicts and for the sweep's wake-ups.
func (s *Sidecar) newListeners() error {
	cfg, logger := s.cfg, s.logger

	// The LISTEN connection is dedicated (not from the pool) and named, so
	// that an operator can tell it apart in pg_stat_activity.
	connConfig := s.pool.Config().ConnConfig
	s.listen = &listener.Listener{
		Connect: func(ctx context.Context) (*pgx.Conn, error) {
			c := connConfig.Copy()
			c.RuntimeParams["application_name"] = ListenerName
			return pgx.ConnectConfig(ctx, c)
		},
		River:          s.river,
		ReconnectDelay: cfg.ListenReconnect,
		Rescan:         cfg.ConflictRescan,
		Pool:           s.pool,
		Logger:         logger.With("component", "listener"),
	}
	if err := s.listen.RegisterMetrics(s.reg); err != nil {
		return err
	}

	if cfg.NoSweep {
		return nil
	}
	s.sweeper = &sweep.Sweeper{
		Pool:     s.pool,
		Batch:    cfg.SweepBatch,
		Sessions: cfg.SweepSessions,
		MaxSleep: cfg.MaxSleep,
		Logger:   logger.With("component", "sweep"),
	}
	s.listen.Handle(sweep.WakeChannel, s.sweeper.WakeHandler())
	return s.sweeper.RegisterMetrics(s.reg)
}
