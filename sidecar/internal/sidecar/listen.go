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
func (s *Sidecar) newListeners() {
	cfg, logger, reg := s.cfg, s.logger, s.reg

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
	reg.NewCounterFunc("ordertimeout_conflict_notifications_total", "NOTIFYs on ordertimeout_conflict this sidecar handled.",
		func() float64 { return float64(s.listen.Stats().Notifications) })

	if cfg.NoSweep {
		return
	}
	s.sweeper = &sweep.Sweeper{
		Pool:     s.pool,
		Batch:    cfg.SweepBatch,
		Sessions: cfg.SweepSessions,
		MaxSleep: cfg.MaxSleep,
		Logger:   logger.With("component", "sweep"),
	}
	s.listen.Handle(sweep.WakeChannel, s.sweeper.WakeHandler())
	sw := s.sweeper
	for _, m := range []struct {
		name, help string
		f          func(sweep.Stats) int64
	}{
		{"ordertimeout_sweep_batches_total", "sweep_due calls this sidecar made.", func(st sweep.Stats) int64 { return st.Batches }},
		{"ordertimeout_sweep_claimed_total", "Due timer rows and lost timeouts this sidecar's sweeps claimed.", func(st sweep.Stats) int64 { return st.Claimed }},
		{"ordertimeout_sweep_cancelled_total", "Orders this sidecar's sweeps cancelled (timeouts; gateway-checked cancels are in ordertimeout_jobs_total).", func(st sweep.Stats) int64 { return st.Cancelled }},
		{"ordertimeout_sweep_caught_by_sweep_total", "Overdue orders this sidecar's sweeps cancelled without their timer row (lost timers).", func(st sweep.Stats) int64 { return st.CaughtBySweep }},
		{"ordertimeout_sweep_checks_total", "Due orders this sidecar's sweeps handed to a gateway check.", func(st sweep.Stats) int64 { return st.Checks }},
		{"ordertimeout_sweep_moot_total", "Claimed timer rows that could no longer act (order paid, paying or given more time).", func(st sweep.Stats) int64 { return st.Moot }},
		{"ordertimeout_sweep_retries_total", "Sweeps repeated after a serialization failure or deadlock.", func(st sweep.Stats) int64 { return st.Retries }},
		{"ordertimeout_sweep_errors_total", "Sweeps that failed.", func(st sweep.Stats) int64 { return st.Errors }},
		{"ordertimeout_sweep_wakeups_total", "Wake-ups received on channel ordertimeout_wake.", func(st sweep.Stats) int64 { return st.Wakeups }},
	} {
		reg.NewCounterFunc(m.name, m.help, func() float64 { return float64(m.f(sw.Stats())) })
	}
}
