package sidecar

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"riverqueue.com/riverui"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/console"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/dbclock"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway/stripe"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/listener"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/metrics"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/reconcile"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/rescue"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/server"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/sweep"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/worker"
)

// River's fetch settings for queue "ordertimeout". The database inserts most
// of this queue's jobs with plain SQL (no River insert notification), often as
// state available with a future scheduled_at, so the poll interval is what
// bounds how soon a due check starts: 50 ms keeps a gateway check within
// about a tick of its due time at the cost of one cheap indexed query per
// 50 ms per sidecar; the 10 ms cooldown lets a backlog of checks be fetched
// in quick successive batches. Neither depends on River's 5 s scheduler,
// which only matters for snoozes longer than 5 s.
const (
	DefaultFetchCooldown     = 10 * time.Millisecond
	DefaultFetchPollInterval = 50 * time.Millisecond
)

// Application names of the sidecar's dedicated LISTEN connections.
const (
	WakeListenerName     = "ordertimeout-listen-wake"
	ConflictListenerName = "ordertimeout-listen-conflicts"
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

// Defaults of a Config.
const (
	DefaultMaxWorkers      = 20
	DefaultShutdownTimeout = 10 * time.Second
	DefaultJobTimeout      = time.Minute
	DefaultRescueAfter     = 2 * time.Minute
	DefaultConflictRescan  = 5 * time.Minute
	DefaultRetentionEvery  = time.Minute
)

// riverRescueBackstop is added to RescueAfter for River's own stuck-job
// rescuer, which reads this host's wall clock: a host clock up to this much
// fast cannot make it take a running job for stuck. The rescue that counts
// runs by the database's clock (package rescue).
const riverRescueBackstop = time.Hour

// Config configures a Sidecar. DatabaseURL and GatewayURL are required;
// every zero field means its default.
type Config struct {
	DatabaseURL string
	// Name is recorded as actor "sidecar:<Name>" on every event this
	// sidecar causes. If empty, "<hostname>-<pid>".
	Name string

	// GatewayDriver is gateway.DriverHTTP (the JSON contract at
	// GatewayURL) or gateway.DriverStripe (Stripe's API with StripeKey).
	// If empty, gateway.DriverHTTP.
	GatewayDriver  string
	GatewayURL     string
	GatewayToken   string
	GatewayTimeout time.Duration
	GatewayRetries int
	// StripeKey is Stripe's secret API key (driver stripe), read from the
	// environment by the command. StripeURL, if set, replaces Stripe's API
	// address (stripe-mock in tests).
	StripeKey string
	StripeURL string
	// GatewayRate limits calls to the gateway to this many a second, in
	// bursts of at most GatewayBurst (0: max(1, ceil(rate))). 0: no limit.
	GatewayRate  float64
	GatewayBurst int

	WebhookURL    string
	WebhookSecret string
	// WebhookUnsigned says that webhooks to WebhookURL go out unsigned on
	// purpose. Without it, a WebhookURL without a WebhookSecret is refused.
	WebhookUnsigned bool
	WebhookTimeout  time.Duration

	SweepBatch      int
	SweepSessions   int
	MaxSleep        time.Duration
	ListenReconnect time.Duration
	// NoSweep disables the sweep (for a sidecar that only works River jobs).
	NoSweep bool

	MaxWorkers        int
	FetchCooldown     time.Duration
	FetchPollInterval time.Duration
	JobTimeout        time.Duration
	// RescueAfter is how long, by the database's clock, a job may run
	// before it is taken for stuck (its sidecar died) and handed back. At
	// least JobTimeout.
	RescueAfter    time.Duration
	ConflictRescan time.Duration

	// CloseAfter, PurgeAfter and PurgePaidAfter are the retention: every
	// RetentionEvery the elected leader closes CANCELLED orders older than
	// CloseAfter and purges CLOSED orders older than PurgeAfter and PAID
	// ones older than PurgePaidAfter (worker.RetentionWorker). Zero turns
	// each off; PurgePaidAfter needs PurgeAfter. RetentionEvery defaults to
	// DefaultRetentionEvery.
	CloseAfter     time.Duration
	PurgeAfter     time.Duration
	PurgePaidAfter time.Duration
	RetentionEvery time.Duration

	// HTTPAddr is where the HTTP server listens; "-" disables it. If empty,
	// server.DefaultAddr.
	HTTPAddr string
	// HTTPAllowedHosts are more host names the HTTP server may be reached
	// at (server.Server.AllowedHosts).
	HTTPAllowedHosts []string
	UIUser           string
	UIPassword       string
	MetricsInterval  time.Duration

	// ConsoleViewer and ConsoleOperator are the console's users,
	// "user:password" each (package console). Without either, the console
	// is served read-only to anyone when the HTTP server listens on
	// loopback, and not at all otherwise.
	ConsoleViewer, ConsoleOperator string
	// ConsoleDatabaseURL, if set, is the connection the console reads and
	// acts with, e.g. a role in ordertimeout_admin (to see resolved
	// conflicts, holds and releases) and ordertimeout_sidecar. If empty,
	// the sidecar's own pool.
	ConsoleDatabaseURL string

	ShutdownTimeout time.Duration
	DBMaxConns      int

	// ReconcileEvery is how often the River leader reconciles the gateway's
	// payments (job ordertimeout_reconcile). Unlike the other fields, zero
	// turns continuous reconciliation off (the run command's flag defaults
	// to DefaultReconcileEvery).
	ReconcileEvery time.Duration
	// ReconcileSource names the watermark of continuous reconciliation. If
	// empty, "gateway:<GatewayDriver>" ("gateway:http", "gateway:stripe").
	ReconcileSource string
	// ReconcileOverlap and ReconcileLookback: see package worker; zero
	// means their defaults.
	ReconcileOverlap  time.Duration
	ReconcileLookback time.Duration

	Logger *slog.Logger
}

// DefaultReconcileEvery is the run command's default period of continuous
// reconciliation.
const DefaultReconcileEvery = time.Minute

// DefaultName returns "<hostname>-<pid>".
func DefaultName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "sidecar"
	}
	return fmt.Sprintf("%s-%d", host, os.Getpid())
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
	poller  *metrics.DBPoller
	reg     *metrics.Registry
	http    *server.Server
	ui      *riverui.Handler
	// consolePool is the console's own pool (ConsoleDatabaseURL), or nil.
	consolePool *pgxpool.Pool

	httpAddr     net.Addr
	riverRunning atomic.Bool
}

// New connects to the database and builds every part of the sidecar without
// starting any.
func New(ctx context.Context, cfg Config) (*Sidecar, error) {
	if cfg.DatabaseURL == "" {
		return nil, errors.New("database URL is required (--database-url or DATABASE_URL)")
	}
	switch cfg.GatewayDriver {
	case "", gateway.DriverHTTP:
		if cfg.GatewayURL == "" {
			return nil, errors.New("gateway URL is required (--gateway-url)")
		}
	case gateway.DriverStripe:
		if cfg.StripeKey == "" {
			return nil, errors.New("gateway stripe needs Stripe's secret API key in the environment (--stripe-key-env, default STRIPE_API_KEY)")
		}
	default:
		return nil, fmt.Errorf("gateway must be http or stripe, got %q", cfg.GatewayDriver)
	}
	if cfg.GatewayRate < 0 || cfg.GatewayBurst < 0 {
		return nil, fmt.Errorf("gateway-rate and gateway-burst must not be negative, got %v and %d", cfg.GatewayRate, cfg.GatewayBurst)
	}
	if err := checkWebhook(cfg); err != nil {
		return nil, err
	}
	if cfg.Name == "" {
		cfg.Name = DefaultName()
	}
	if cfg.MaxWorkers <= 0 {
		cfg.MaxWorkers = DefaultMaxWorkers
	}
	if cfg.SweepSessions <= 0 {
		cfg.SweepSessions = sweep.DefaultSessions
	}
	cfg.FetchCooldown = cmpOr(cfg.FetchCooldown, DefaultFetchCooldown)
	cfg.FetchPollInterval = cmpOr(cfg.FetchPollInterval, DefaultFetchPollInterval)
	cfg.ShutdownTimeout = cmpOr(cfg.ShutdownTimeout, DefaultShutdownTimeout)
	cfg.JobTimeout = cmpOr(cfg.JobTimeout, DefaultJobTimeout)
	cfg.RescueAfter = cmpOr(cfg.RescueAfter, DefaultRescueAfter)
	cfg.ConflictRescan = cmpOr(cfg.ConflictRescan, DefaultConflictRescan)
	if cfg.RescueAfter < cfg.JobTimeout {
		return nil, fmt.Errorf("rescue-after (%s) must be at least job-timeout (%s): a job still within its timeout is not stuck", cfg.RescueAfter, cfg.JobTimeout)
	}
	if cfg.RescueAfter < time.Second || cfg.RescueAfter > 24*time.Hour {
		return nil, fmt.Errorf("rescue-after must be between 1s and 24h, got %s", cfg.RescueAfter)
	}
	if err := checkRetention(&cfg); err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	logger = logger.With("sidecar", cfg.Name)

	poolConfig, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("parse database URL: %w", err)
	}
	// Every event this sidecar causes names it.
	poolConfig.ConnConfig.RuntimeParams["ordertimeout.actor"] = "sidecar:" + cfg.Name
	if poolConfig.ConnConfig.RuntimeParams["application_name"] == "" {
		poolConfig.ConnConfig.RuntimeParams["application_name"] = ApplicationName(cfg.Name)
	}
	// Sweep sessions, workers, and River's own (fetch, completer, leader,
	// notifier) connections.
	poolConfig.MaxConns = int32(cmpOr(cfg.DBMaxConns, cfg.SweepSessions+cfg.MaxWorkers+6))
	pool, err := pgxpool.NewWithConfig(ctx, poolConfig)
	if err != nil {
		return nil, fmt.Errorf("connect to database: %w", err)
	}
	s := &Sidecar{cfg: cfg, logger: logger, pool: pool, reg: &metrics.Registry{}, clock: &dbclock.Clock{}}
	if err := s.build(); err != nil {
		pool.Close()
		if s.consolePool != nil {
			s.consolePool.Close()
		}
		return nil, err
	}
	return s, nil
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

func (s *Sidecar) build() error {
	cfg, logger, reg := s.cfg, s.logger, s.reg

	gatewayCalls := reg.NewCounter("ordertimeout_gateway_calls_total",
		"Calls this sidecar made to the payment gateway, by operation (order, close, refund, payments) and result (ok, unavailable, bad_answer, bad_request).",
		"op", "result")
	gatewaySeconds := reg.NewHistogram("ordertimeout_gateway_call_seconds",
		"Duration of this sidecar's calls to the payment gateway.",
		[]float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}, "op")
	gw, err := s.gateway(func(op, result string, d time.Duration) {
		gatewayCalls.Inc(op, result)
		gatewaySeconds.Observe(d.Seconds(), op)
	})
	if err != nil {
		return err
	}

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
	err = worker.Register(workers, &worker.Deps{
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
		WebhookClient:     &http.Client{Timeout: cmpOr(cfg.WebhookTimeout, 10*time.Second)},
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
		args := worker.ReconcileArgs{Source: cmpOr(cfg.ReconcileSource, "gateway:"+cmpOr(cfg.GatewayDriver, gateway.DriverHTTP))}
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
		PeriodicJobs:         periodic,
		Workers:              workers,
		Test:                 river.TestConfig{Time: s.clock},
	})
	if err != nil {
		return fmt.Errorf("create River client: %w", err)
	}
	s.river = rc

	// The LISTEN connections are dedicated (not from the pool) and named, so
	// that an operator can tell them apart in pg_stat_activity.
	connConfig := s.pool.Config().ConnConfig
	connect := func(applicationName string) func(ctx context.Context) (*pgx.Conn, error) {
		return func(ctx context.Context) (*pgx.Conn, error) {
			c := connConfig.Copy()
			c.RuntimeParams["application_name"] = applicationName
			return pgx.ConnectConfig(ctx, c)
		}
	}

	if !cfg.NoSweep {
		s.sweeper = &sweep.Sweeper{
			Pool:           s.pool,
			Connect:        connect(WakeListenerName),
			Batch:          cfg.SweepBatch,
			Sessions:       cfg.SweepSessions,
			MaxSleep:       cfg.MaxSleep,
			ReconnectDelay: cfg.ListenReconnect,
			Logger:         logger.With("component", "sweep"),
		}
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

	s.listen = &listener.Listener{
		Connect:        connect(ConflictListenerName),
		River:          rc,
		ReconnectDelay: cfg.ListenReconnect,
		Rescan:         cfg.ConflictRescan,
		Pool:           s.pool,
		Logger:         logger.With("component", "listener"),
	}
	reg.NewCounterFunc("ordertimeout_conflict_notifications_total", "NOTIFYs on ordertimeout_conflict this sidecar handled.",
		func() float64 { return float64(s.listen.Stats().Notifications) })

	s.poller = metrics.NewDBPoller(reg, s.pool, cfg.MetricsInterval, 0, logger.With("component", "metrics"))
	reg.NewGaugeFunc("ordertimeout_river_running", "1 while this sidecar's River client is working jobs.", func() float64 {
		if s.riverRunning.Load() {
			return 1
		}
		return 0
	})

	if cfg.HTTPAddr != "-" {
		ui, err := riverui.NewHandler(&riverui.HandlerOpts{
			Endpoints: riverui.NewEndpoints(rc, nil),
			Logger:    logger.With("component", "riverui"),
			Prefix:    "/riverui",
		})
		if err != nil {
			return fmt.Errorf("create River UI: %w", err)
		}
		s.ui = ui
		consoleHandler, err := s.newConsole()
		if err != nil {
			return err
		}
		s.http = &server.Server{
			Addr:         cfg.HTTPAddr,
			Metrics:      reg.Handler(),
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
	}
	return nil
}

// newConsole builds the console's handler, or returns nil when it is not
// served (no users configured and the HTTP server reachable beyond
// loopback).
func (s *Sidecar) newConsole() (http.Handler, error) {
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
	if anonymous && !isLoopbackAddr(cmpOr(cfg.HTTPAddr, server.DefaultAddr)) {
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

// Pool returns the sidecar's database pool.
func (s *Sidecar) Pool() *pgxpool.Pool { return s.pool }

// River returns the sidecar's River client.
func (s *Sidecar) River() *river.Client[pgx.Tx] { return s.river }

// Sweeper returns the sidecar's sweeper (nil with NoSweep).
func (s *Sidecar) Sweeper() *sweep.Sweeper { return s.sweeper }

// Listener returns the sidecar's conflict listener.
func (s *Sidecar) Listener() *listener.Listener { return s.listen }

// Registry returns the sidecar's metrics.
func (s *Sidecar) Registry() *metrics.Registry { return s.reg }

// HTTPAddr returns the address the HTTP server listens on, once Run has
// started it (nil before, or when disabled).
func (s *Sidecar) HTTPAddr() net.Addr { return s.httpAddr }

// Ready reports nil when the database answers and River is working.
func (s *Sidecar) Ready(ctx context.Context) error {
	if !s.riverRunning.Load() {
		return errors.New("River client is not running")
	}
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("database: %w", err)
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

	// River runs on its own context: it is stopped explicitly below, with a
	// timeout, after the sweep has stopped.
	riverCtx, cancelRiver := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRiver()
	if err := s.river.Start(riverCtx); err != nil {
		return fmt.Errorf("start River client: %w", err)
	}
	s.riverRunning.Store(true)
	logger.Info("sidecar started", "queue", worker.Queue, "max_workers", s.cfg.MaxWorkers,
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
	run(func(ctx context.Context) error { s.poller.Run(ctx); return nil })
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

// checkWebhook refuses a webhook configuration that would send unsigned
// webhooks by mistake, or to a URL that is not http(s).
func checkWebhook(cfg Config) error {
	if cfg.WebhookURL == "" {
		return nil
	}
	u, err := url.Parse(cfg.WebhookURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("webhook URL %q must be an absolute http or https URL (--webhook-url)", cfg.WebhookURL)
	}
	switch {
	case cfg.WebhookSecret == "" && !cfg.WebhookUnsigned:
		return errors.New("a webhook URL without a webhook secret would send unsigned webhooks: set --webhook-secret, or --webhook-unsigned if unsigned webhooks are intended")
	case cfg.WebhookSecret != "" && cfg.WebhookUnsigned:
		return errors.New("--webhook-unsigned and --webhook-secret contradict each other: set one")
	}
	return nil
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// checkRetention checks the retention settings of cfg and sets the default
// of RetentionEvery.
func checkRetention(cfg *Config) error {
	const most = 100 * 365 * 24 * time.Hour // purge_orders' bound
	for _, d := range []struct {
		name  string
		value time.Duration
	}{{"close-after", cfg.CloseAfter}, {"purge-after", cfg.PurgeAfter}, {"purge-paid-after", cfg.PurgePaidAfter}} {
		if d.value < 0 || d.value > most {
			return fmt.Errorf("%s must be between 0 (off) and 100 years, got %s", d.name, d.value)
		}
	}
	if cfg.PurgePaidAfter > 0 && cfg.PurgeAfter == 0 {
		return errors.New("purge-paid-after needs purge-after")
	}
	cfg.RetentionEvery = cmpOr(cfg.RetentionEvery, DefaultRetentionEvery)
	if cfg.RetentionEvery < time.Second || cfg.RetentionEvery > 24*time.Hour {
		return fmt.Errorf("retention interval must be between 1s and 24h, got %s", cfg.RetentionEvery)
	}
	return nil
}
