package sidecar

import (
	"cmp"
	"fmt"
	"net/http"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway/stripe"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/metrics"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/reconcile"
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
	s.newListeners()

	s.rescuer = &rescue.Rescuer{
		Pool:   s.pool,
		After:  cfg.RescueAfter,
		Logger: logger.With("component", "rescue"),
	}
	reg.NewCounterFunc("ordertimeout_jobs_rescued_total",
		"Jobs of queue ordertimeout this sidecar handed back after they ran longer than --rescue-after by the database's clock (their worker died).",
		func() float64 { return float64(s.rescuer.Rescued()) })
	reg.NewGaugeFunc("ordertimeout_clock_offset_seconds",
		"How far the database's clock is ahead of this host's (negative: behind). The sidecar follows the database's; alert above a few seconds, as the host's clock needs fixing.",
		func() float64 { o, _ := s.clock.Offset(); return o.Seconds() })

	s.poller = metrics.NewDBPoller(reg, s.pool, cfg.MetricsInterval, 0, logger.With("component", "metrics"))
	reg.NewGaugeFunc("ordertimeout_river_running", "1 while this sidecar's River client is working jobs.", func() float64 {
		if s.riverRunning.Load() {
			return 1
		}
		return 0
	})
	return s.newHTTP()
}

// newGateway builds the gateway driver of the configuration with its
// metrics.
func (s *Sidecar) newGateway() (gateway.Gateway, error) {
	reg := s.reg
	gatewayCalls := reg.NewCounter("ordertimeout_gateway_calls_total",
		"Calls this sidecar made to the payment gateway, by operation (order, close, refund, payments) and result (ok, unavailable, bad_answer, bad_request).",
		"op", "result")
	gatewaySeconds := reg.NewHistogram("ordertimeout_gateway_call_seconds",
		"Duration of this sidecar's calls to the payment gateway.",
		[]float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}, "op")
	return s.gateway(func(op, result string, d time.Duration) {
		gatewayCalls.Inc(op, result)
		gatewaySeconds.Observe(d.Seconds(), op)
	})
}

// gateway builds the gateway driver of the configuration, rate-limited
// when GatewayRate is set.
func (s *Sidecar) gateway(observe func(op, result string, d time.Duration)) (gateway.Gateway, error) {
	cfg := s.cfg
	var gw gateway.Gateway
	if cfg.GatewayDriver == gateway.DriverStripe {
		d, err := stripe.New(stripe.Config{Key: cfg.StripeKey, URL: cfg.StripeURL, Timeout: cfg.GatewayTimeout, Retries: cfg.GatewayRetries, Observe: observe})
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
			Observe: observe,
		}
	}
	if cfg.GatewayRate == 0 {
		return gw, nil
	}
	l, err := gateway.NewLimited(gw, cfg.GatewayRate, cfg.GatewayBurst)
	if err != nil {
		return nil, err
	}
	throttled := s.reg.NewCounter("ordertimeout_gateway_throttled_total",
		"Calls to the payment gateway the rate limit (--gateway-rate) held back, by operation and result: waited (sent after a wait) or snoozed (not sent: the job asks later).",
		"op", "result")
	waits := s.reg.NewHistogram("ordertimeout_gateway_throttle_wait_seconds",
		"How long calls to the payment gateway waited for the rate limit.",
		[]float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5}, "op")
	l.Observe = func(op string, waited time.Duration, sent bool) {
		if sent {
			throttled.Inc(op, "waited")
		} else {
			throttled.Inc(op, "snoozed")
		}
		if waited > 0 {
			waits.Observe(waited.Seconds(), op)
		}
	}
	return l, nil
}

// newRiver builds the River client with the workers of package worker, the
// retention and the continuous reconciliation.
func (s *Sidecar) newRiver(gw gateway.Gateway) error {
	cfg, logger, reg := s.cfg, s.logger, s.reg
	jobOutcomes := reg.NewCounter("ordertimeout_jobs_total",
		"River jobs this sidecar worked, by kind and outcome (e.g. payment_check paid, precancel_check cancelled, resolve_conflict reinstated or refunded, snoozed, error).",
		"kind", "outcome")
	conflictsResolved := reg.NewCounter("ordertimeout_conflicts_resolved_total",
		"Late or double payments this sidecar resolved, by outcome (reinstated, refunded, manual_pending, already_resolved, refunded_after_resolution).",
		"outcome")
	badAnswers := reg.NewCounter("ordertimeout_gateway_bad_answers_total",
		"Gateway answers a job of this sidecar could not use (malformed, ambiguous, outside the contract, or paid without the order's amount), by job kind: nothing changed, the job asks again later. Alert on any increase.",
		"kind")
	reconciled := reg.NewCounter("ordertimeout_reconcile_transactions_total",
		"Gateway transactions this sidecar's continuous reconciliation judged, by outcome (ok, confirmed, late_payment, double_payment, amount_mismatch, known_conflict, amount_differs, refund_unknown, unknown_order, other_order).",
		"outcome")
	lostCallbacks := reg.NewCounter("ordertimeout_reconcile_lost_callbacks_total",
		"Payments this sidecar's reconciliation found at the gateway whose callback never came: confirmed on a live order, or a new conflict with cause reconcile. A direct measure of lost callbacks; alert on any increase.")
	mismatches := reg.NewCounter("ordertimeout_reconcile_mismatches_total",
		"Gateway transactions whose amount or currency differs from this database's (amount_differs, amount_mismatch).")
	reported := reg.NewCounter("ordertimeout_reconcile_reported_total",
		"Gateway transactions reported for a person, by outcome (amount_differs, refund_unknown, unknown_order, other_order): nothing in the database resolves them.",
		"outcome")
	workers := river.NewWorkers()
	err := worker.Register(workers, &worker.Deps{
		Reconciled: func(outcome string) {
			reconciled.Inc(outcome)
			if reconcile.IsLostCallback(outcome) {
				lostCallbacks.Inc()
			}
			if reconcile.IsMismatch(outcome) {
				mismatches.Inc()
			}
			if reconcile.NeedsPerson(outcome) {
				reported.Inc(outcome)
			}
		},
		ReconcileOverlap:  cfg.ReconcileOverlap,
		ReconcileLookback: cfg.ReconcileLookback,
		Pool:              s.pool,
		Gateway:           gw,
		WebhookURL:        cfg.WebhookURL,
		WebhookSecret:     cfg.WebhookSecret,
		WebhookClient:     &http.Client{Timeout: cmp.Or(cfg.WebhookTimeout, 10*time.Second)},
		Now:               s.clock.Now,
		Logger:            logger,
		Outcome: func(kind, outcome string) {
			jobOutcomes.Inc(kind, outcome)
			if outcome == "bad_answer" {
				badAnswers.Inc(kind)
			}
			if kind == (worker.ResolveConflictArgs{}).Kind() && outcome != "error" && outcome != "snoozed" && outcome != "interrupted" && outcome != "bad_answer" && outcome != "bad_request" {
				conflictsResolved.Inc(outcome)
			}
		},
	})
	if err != nil {
		return err
	}
	var periodic []*river.PeriodicJob
	if cfg.CloseAfter > 0 || cfg.PurgeAfter > 0 {
		retention := &worker.RetentionWorker{Deps: &worker.Deps{Pool: s.pool, Logger: logger, Outcome: func(kind, outcome string) {
			jobOutcomes.Inc(kind, outcome)
		}}, CloseAfter: cfg.CloseAfter, PurgeAfter: cfg.PurgeAfter, PurgePaidAfter: cfg.PurgePaidAfter}
		if err := river.AddWorkerSafely(workers, retention); err != nil {
			return fmt.Errorf("register retention worker: %w", err)
		}
		periodic = append(periodic, retention.PeriodicJob(cfg.RetentionEvery))
	}

	// Only queue "ordertimeout". Never add queue "ordertimeout_expire": its
	// rows are timers that only ordertimeout.sweep_due may claim.
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
		Logger:               logger.With("component", "river"),
		Queues:               map[string]river.QueueConfig{worker.Queue: {MaxWorkers: cfg.MaxWorkers}},
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
