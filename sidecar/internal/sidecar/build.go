package sidecar

import (
	"cmp"
	"context"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway/stripe"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/metrics"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/rescue"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/worker"
)

// build builds every part of the sidecar on its pool, without starting any.
func (s *Sidecar) build() error {
	cfg, logger, reg := s.cfg, s.logger, s.reg
	gw, err := s.newGateway()
	if err != nil {
		return err
	}
	if err := s.newRiver(gw); err != nil {
		return err
	}
	if err := s.newListeners(); err != nil {
		return err
	}

	s.rescuer = &rescue.Rescuer{
		Pool:   s.pool,
		After:  cfg.RescueAfter,
		Logger: logger.With("component", "rescue"),
	}
	if err := s.rescuer.RegisterMetrics(reg); err != nil {
		return err
	}
	if err := s.clock.RegisterMetrics(reg); err != nil {
		return err
	}
	riverRunning := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ordertimeout_river_running",
		Help: "1 while this sidecar's River client is working jobs.",
	}, func() float64 {
		if s.riverRunning.Load() {
			return 1
		}
		return 0
	})
	dbStats := metrics.NewDBCollector(s.pool, 0, 0, logger.With("component", "metrics"))
	if err := metrics.Register(reg, riverRunning, dbStats); err != nil {
		return err
	}
	return s.newHTTP(gw)
}

// newGateway builds the gateway driver of the configuration with its
// metrics, rate-limited when GatewayRate is set.
func (s *Sidecar) newGateway() (gateway.Gateway, error) {
	cfg := s.cfg
	m, err := gateway.NewMetrics(s.reg)
	if err != nil {
		return nil, err
	}
	var gw gateway.Gateway
	if cfg.GatewayDriver == gateway.DriverStripe {
		d, err := stripe.New(stripe.Config{Key: cfg.StripeKey, URL: cfg.StripeURL, Timeout: cfg.GatewayTimeout, Retries: cfg.GatewayRetries, Observe: m.Observe})
		if err != nil {
			return nil, err
		}
		gw = d
	} else {
		gw = &gateway.Client{
			BaseURL: cfg.GatewayURL,
			Token:   cfg.GatewayToken,
			Timeout: cfg.GatewayTimeout,
			Retries: cfg.GatewayRetries,
			Observe: m.Observe,
		}
	}
	if cfg.GatewayRate == 0 {
		return gw, nil
	}
	l, err := gateway.NewLimited(gw, cfg.GatewayRate, cfg.GatewayBurst)
	if err != nil {
		return nil, err
	}
	l.Observe = m.ObserveThrottle
	s.limited = l
	return l, nil
}

// occupyReservedTokens takes from this process's rate limit the gateway
// tokens that jobs hold for their next run (reserved by an earlier process,
// before a restart, or by another sidecar) and that are still to come.
// Without it a sidecar restarted during a throttled backlog sent its own
// calls at the full rate on top of the held tokens: up to twice the rate
// until they had passed. The tokens that came due before this start (during
// the restart) are not used: their jobs reserve new ones after the others
// (worker.Deps.SlotsFrom), instead of all going out at once. A database that
// does not answer yet costs only that protection, with a warning.
func (s *Sidecar) occupyReservedTokens(ctx context.Context) {
	n, last, now, err := worker.ReservedGatewayTokens(ctx, s.pool)
	if err != nil {
		s.logger.Warn("could not read the gateway tokens that snoozed jobs hold; this sidecar's calls may go out on top of them until they pass", "error", err)
		return
	}
	// River has not started: its workers see this before any job runs.
	s.deps.SlotsFrom = now
	if n == 0 {
		return
	}
	s.limited.Occupy(n)
	s.logger.Info("gateway rate limit: tokens held by snoozed jobs come first", "tokens", n, "last_due", last)
}

// newRiver builds the River client with the workers of package worker, the
// retention and the continuous reconciliation.
func (s *Sidecar) newRiver(gw gateway.Gateway) error {
	cfg, logger := s.cfg, s.logger
	m, err := worker.NewMetrics(s.reg)
	if err != nil {
		return err
	}
	workers := river.NewWorkers()
	s.deps = &worker.Deps{
		Reconciled:        m.Reconciled,
		ReconcileOverlap:  cfg.ReconcileOverlap,
		ReconcileLookback: cfg.ReconcileLookback,
		Pool:              s.pool,
		Gateway:           gw,
		WebhookURL:        cfg.WebhookURL,
		WebhookSecret:     cfg.WebhookSecret,
		WebhookClient:     &http.Client{Timeout: cmp.Or(cfg.WebhookTimeout, DefaultWebhookTimeout)},
		Now:               s.clock.Now,
		Logger:            logger,
		Outcome:           m.Outcome,
	}
	if s.limited != nil {
		// A job may use its held token up to a full bucket's refill late
		// (what the limit lets through at once anyway), and never less late
		// than River's fetch normally makes it (worker.Deps.SlotGrace).
		s.deps.SlotGrace = max(s.limited.Refill(), 2*(cfg.FetchPollInterval+cfg.FetchCooldown))
	}
	if err := worker.Register(workers, s.deps); err != nil {
		return err
	}
	var periodic []*river.PeriodicJob
	if cfg.CloseAfter > 0 || cfg.PurgeAfter > 0 {
		retention := &worker.RetentionWorker{Deps: &worker.Deps{Pool: s.pool, Logger: logger, Outcome: m.Outcome},
			CloseAfter: cfg.CloseAfter, PurgeAfter: cfg.PurgeAfter, PurgePaidAfter: cfg.PurgePaidAfter}
		if err := river.AddWorkerSafely(workers, retention); err != nil {
			return fmt.Errorf("register retention worker: %w", err)
		}
		periodic = append(periodic, retention.PeriodicJob(cfg.RetentionEvery))
	}

	// Only queues "ordertimeout" and "ordertimeout_webhook", each with its
	// own workers, so that webhooks never wait for gateway jobs nor gateway
	// jobs for webhooks. Never add the timer queue (timer.Name,
	// "ordertimeout_expire"): its rows are timers that only
	// ordertimeout.sweep_due may claim.
	//
	// River takes the time of a snoozed or retried job's next run, and of
	// the promotion of scheduled jobs, from its time generator: the
	// database's clock (package dbclock), so a host clock minutes off does
	// not stretch or void a snooze. River's interface for this lives in its
	// test config but is meant for production use (rivertype.TimeGenerator).
	if cfg.ReconcileEvery > 0 {
		args := worker.ReconcileArgs{Source: cmp.Or(cfg.ReconcileSource, "gateway:"+cmp.Or(cfg.GatewayDriver, gateway.DriverHTTP))}
		periodic = append(periodic, river.NewPeriodicJob(river.PeriodicInterval(cfg.ReconcileEvery),
			func() (river.JobArgs, *river.InsertOpts) { return args, nil },
			&river.PeriodicJobOpts{RunOnStart: true}))
	}
	rc, err := river.NewClient(riverpgxv5.New(s.pool), &river.Config{
		Logger: logger.With("component", "river"),
		Queues: map[string]river.QueueConfig{
			worker.Queue:        {MaxWorkers: cfg.MaxWorkers},
			worker.WebhookQueue: {MaxWorkers: cfg.WebhookWorkers},
		},
		FetchCooldown:        cfg.FetchCooldown,
		FetchPollInterval:    cfg.FetchPollInterval,
		JobTimeout:           cfg.JobTimeout,
		RescueStuckJobsAfter: cfg.RescueAfter + riverRescueBackstop,
		// Finished jobs are kept for the River UI, then deleted by River's
		// cleaner: bounded storage for River's table too.
		CompletedJobRetentionPeriod: cfg.JobRetention,
		CancelledJobRetentionPeriod: cfg.JobRetention,
		PeriodicJobs:                periodic,
		Workers:                     workers,
		Test:                        river.TestConfig{Time: s.clock},
	})
	if err != nil {
		return fmt.Errorf("create River client: %w", err)
	}
	s.river = rc
	return nil
}
