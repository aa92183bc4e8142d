package sidecar

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"riverqueue.com/riverui"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/dbclock"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/listener"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/metrics"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/rescue"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/server"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/status"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/sweep"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/worker"
)

// ApplicationName is the application_name of the pool connections of
// sidecar name, as pg_stat_activity shows it (PostgreSQL keeps 63 bytes).
func ApplicationName(name string) string {
	n := "ordertimeout sidecar:" + name
	if len(n) > 63 {
		n = n[:63]
	}
	return n
}

// Sidecar is one running sidecar. Create it with New, run it with Run.
type Sidecar struct {
	cfg     Config
	logger  *slog.Logger
	pool    *pgxpool.Pool
	river   *river.Client[pgx.Tx]
	sweeper *sweep.Sweeper
	listen  *listener.Listener
	clock   *dbclock.Clock
	rescuer *rescue.Rescuer
	reg     *prometheus.Registry
	// limited is the gateway's rate limit (GatewayRate), or nil.
	limited *gateway.Limited
	// deps are the River workers' dependencies.
	deps *worker.Deps
	http *server.Server
	ui   *riverui.Handler
	// consolePool is the console's own pool (ConsoleDatabaseURL), or nil.
	consolePool *pgxpool.Pool

	httpAddr     net.Addr
	riverRunning atomic.Bool
}

// New connects to the database and builds every part of the sidecar without
// starting any.
func New(ctx context.Context, cfg Config) (*Sidecar, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	logger = logger.With("sidecar", cfg.Name)
	for _, w := range cfg.Warnings() {
		logger.Warn(w)
	}

	poolConfig, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("parse database URL: %w", err)
	}
	// Every event this sidecar causes names it, and sweep_due and
	// cancel_checked refuse an older snapshot than READ COMMITTED's (OT154),
	// whatever the database's default. Run checks that they were applied
	// (checkDirect).
	params := poolConfig.ConnConfig.RuntimeParams
	for k, v := range sessionSettings(cfg.Name) {
		setParam(params, k, v, false)
	}
	setParam(params, "application_name", ApplicationName(cfg.Name), true)
	// Sweep sessions, workers, and River's own (fetch, completer, leader,
	// notifier) connections.
	poolConfig.MaxConns = int32(cmp.Or(cfg.DBMaxConns, cfg.SweepSessions+cfg.MaxWorkers+cfg.WebhookWorkers+6))
	// Under a statement_timeout, a lock wait ends at half of it (55P03), so
	// that the sweeper tells it from a batch too large for the timeout.
	poolConfig.AfterConnect = sweep.BoundLockWaits
	pool, err := pgxpool.NewWithConfig(ctx, poolConfig)
	if err != nil {
		return nil, fmt.Errorf("connect to database: %w", err)
	}
	s := &Sidecar{cfg: cfg, logger: logger, pool: pool, reg: metrics.NewRegistry(), clock: &dbclock.Clock{}}
	if err := s.build(); err != nil {
		pool.Close()
		if s.consolePool != nil {
			s.consolePool.Close()
		}
		return nil, err
	}
	return s, nil
}

// HTTPAddr returns the address the HTTP server listens on, once Run has
// started it (nil before, or when disabled).
func (s *Sidecar) HTTPAddr() net.Addr { return s.httpAddr }

// Ready reports nil when the database answers, River is working and the
// sweeper's sweeps are not failing one after another. Its
// error is what /readyz shows, to anyone who can reach it: the database's
// error (which can name its host, user and database) goes to the log only.
func (s *Sidecar) Ready(ctx context.Context) error {
	if !s.riverRunning.Load() {
		return errors.New("River client is not running")
	}
	if err := s.pool.Ping(ctx); err != nil {
		s.logger.Warn("not ready: the database does not answer", "error", err)
		return errors.New("the database does not answer (the sidecar's log has the error)")
	}
	if s.sweeper != nil {
		return s.sweeper.Healthy()
	}
	return nil
}

// Run starts every part and blocks until ctx is done, then shuts down
// gracefully and returns nil. It closes the pool when it returns.
func (s *Sidecar) Run(ctx context.Context) error {
	defer s.pool.Close()
	if s.consolePool != nil {
		defer s.consolePool.Close()
	}
	logger := s.logger

	// Through a connection pooler the sidecar cannot work (checkDirect):
	// refuse to run rather than sweep under another isolation level or
	// name another actor in the audit trail. A database that does not
	// answer stops the start here, as it did at River's start below before
	// this check: the process exits 1 for its supervisor to start it again.
	if err := checkDirect(ctx, s.pool, sessionSettings(s.cfg.Name)); err != nil {
		if ctx.Err() != nil {
			return nil // stopped (SIGTERM) while checking: nothing started
		}
		return err
	}
	// A sidecar started before `ordertimeout migrate up` refuses to run
	// rather than fail on every sweep or every conflict it should resolve
	// (also with --no-sweep: its workers and listener need the schema too).
	// The database answered the check above; an error here (it went away
	// meanwhile) is logged, and River's start decides.
	if err := sweep.CheckSchema(ctx, s.pool); errors.Is(err, sweep.ErrSchemaBehind) {
		return err
	} else if err != nil {
		logger.Warn("could not check the database schema yet", "error", err)
	}

	if s.http != nil {
		addr, err := s.http.Listen()
		if err != nil {
			return err
		}
		s.httpAddr = addr
	}

	// River schedules by the database's clock: measure it before River
	// starts. If the database does not answer yet, the host's clock is used
	// until the clock's loop below measures it; the loop logs the offset.
	if _, err := s.clock.Measure(ctx, s.pool); err != nil {
		logger.Warn("could not read the database's clock yet; using this host's until it answers", "error", err)
	}

	// The gateway tokens an earlier process reserved for snoozed jobs are
	// still honoured when those jobs come back: this process's own calls
	// take their tokens after them, so that together they keep the rate.
	if s.limited != nil {
		s.occupyReservedTokens(ctx)
	}

	// River runs on its own context: it is stopped explicitly below, with a
	// timeout, after the sweep has stopped.
	riverCtx, cancelRiver := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRiver()
	if err := s.river.Start(riverCtx); err != nil {
		return fmt.Errorf("start River client: %w", err)
	}
	s.riverRunning.Store(true)
	logger.Info("sidecar started", "queue", worker.Queue, "max_workers", s.cfg.MaxWorkers,
		"webhook_queue", worker.WebhookQueue, "webhook_workers", s.cfg.WebhookWorkers,
		"fetch_cooldown", s.cfg.FetchCooldown, "fetch_poll_interval", s.cfg.FetchPollInterval)

	// The parts below stop when ctx ends, or when one of them fails.
	ctx, stopParts := context.WithCancel(ctx)
	defer stopParts()
	var wg sync.WaitGroup
	errc := make(chan error, 6)
	run := func(f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx); err != nil {
				errc <- err
			}
		}()
	}
	if s.sweeper != nil {
		run(s.sweeper.Run)
	}
	run(s.listen.Listen)
	run(s.rescuer.Run)
	run(func(ctx context.Context) error {
		s.clock.Run(ctx, s.pool, dbclock.DefaultInterval, logger.With("component", "clock"))
		return nil
	})
	run(func(ctx context.Context) error {
		status.WarnWhilePaused(ctx, s.pool, 0, logger.With("component", "pause"))
		return nil
	})
	if s.http != nil {
		if err := s.ui.Start(ctx); err != nil {
			logger.Error("start River UI", "error", err)
		}
		run(s.http.Serve)
	}

	var runErr error
	select {
	case <-ctx.Done():
		logger.Info("shutting down: sweep stops claiming, River stops fetching")
	case runErr = <-errc:
		logger.Error("sidecar part failed, shutting down", "error", runErr)
	}
	stopParts()
	wg.Wait()

	stopCtx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	if err := s.river.Stop(stopCtx); err != nil {
		logger.Warn("jobs still running after the shutdown timeout: cancelling them; they are handed back", "timeout", s.cfg.ShutdownTimeout)
		hardCtx, cancelHard := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancelHard()
		if err := s.river.StopAndCancel(hardCtx); err != nil {
			logger.Error("River did not stop", "error", err)
		}
	}
	s.riverRunning.Store(false)
	logger.Info("sidecar stopped")
	return runErr
}
