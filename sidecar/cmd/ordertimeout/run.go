package main

import (
	"context"
	"os"
	"strings"
	"time"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/config"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/listener"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/server"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecar"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/sweep"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/worker"
)

const runDescription = `
Runs the sidecar until SIGINT or SIGTERM: sweeps due orders in the database
(ordertimeout.sweep_due, woken by NOTIFY ordertimeout_wake), works River
queue "ordertimeout" (gateway checks before cancels, payment checks, gateway
closes, conflict resolution, reconciliation with the gateway's payments
every --reconcile-every) with --max-workers and queue "ordertimeout_webhook"
(webhooks) with --webhook-workers of its own, listens for late-payment conflicts,
and serves /metrics, /healthz, /readyz, River's UI at /riverui/ and the
ordertimeout console at /console/.
Several sidecars may run against one database; none is special.
It refuses to start on a schema older than itself: run "ordertimeout migrate
up" first. It connects straight to PostgreSQL: given a --database-url through
a connection pooler (PgBouncer), which refuses or drops the session settings
it sends at connect and cannot carry its LISTEN, it refuses to start.
On SIGTERM it stops claiming, lets running jobs finish for up to
--shutdown-timeout (then hands them back), and exits 0.`

func runCmd(ctx context.Context, args []string) error {
	var (
		cfg          sidecar.Config
		log          config.Logging
		allowedHosts string
		stripeKeyEnv string
		// gatewayRetries is the flag's value: 0 is no retry, where
		// sidecar.Config's zero means the default.
		gatewayRetries int
		// metricsInterval is a deprecated flag, accepted so that existing
		// command lines still start.
		metricsInterval time.Duration
	)
	f := config.New("run", "ordertimeout run [flags]", runDescription)
	f.String(&cfg.DatabaseURL, "database-url", "", "PostgreSQL connection string (URL or key=value), straight to PostgreSQL, not through a connection pooler", "DATABASE_URL", config.EnvName("database-url"))
	f.String(&cfg.Name, "name", "", "this sidecar's name, 1 to 192 plain characters; events it causes record actor \"sidecar:<name>\" (default <hostname>-<pid>)")
	f.String(&cfg.GatewayDriver, "gateway", gateway.DriverHTTP, "gateway driver: http (the JSON contract at --gateway-url) or stripe (Stripe's API, key from --stripe-key-env)")
	f.String(&cfg.GatewayURL, "gateway-url", "", "base URL of the payment gateway (required with --gateway http): http or https with a host name (and a port from 1 to 65535, if any), maybe a path, no query or fragment, e.g. https://pay.example.com")
	f.String(&stripeKeyEnv, "stripe-key-env", "STRIPE_API_KEY", "name of the environment variable holding Stripe's secret API key (--gateway stripe; never a flag, which process listings show)")
	f.String(&cfg.StripeURL, "stripe-api-url", "", "Stripe API base URL (--gateway stripe; default https://api.stripe.com; stripe-mock for tests): http or https, no query or fragment")
	f.Float64(&cfg.GatewayRate, "gateway-rate", 0, "most calls a second from this sidecar to the payment gateway (0: no limit; several sidecars: each its share); a backlog drains at this rate, each job snoozing until a token reserved for it")
	f.Int(&cfg.GatewayBurst, "gateway-burst", 0, "most calls to the payment gateway at once after a quiet spell, the token bucket's size (0: --gateway-rate rounded up); a throttled job may use the token it holds up to burst/rate late (at least 2×(--fetch-poll-interval + --fetch-cooldown), at most 1 s); needs --gateway-rate")
	f.String(&cfg.GatewayToken, "gateway-token", "", "bearer token sent to the payment gateway, if any")
	f.Duration(&cfg.GatewayTimeout, "gateway-timeout", gateway.DefaultTimeout, "timeout of one request to the payment gateway")
	f.Int(&gatewayRetries, "gateway-retries", gateway.DefaultRetries, "how many times a gateway request that finds the gateway unavailable is sent again at once, before its job snoozes: 2 is up to 3 requests; 0: no retry, one request (a negative value, the former way to say it, means the same)")
	f.String(&cfg.WebhookURL, "webhook-url", "", "http(s) URL receiving webhooks (POST JSON) when settings.webhooks is on; needs --webhook-secret (or --webhook-unsigned); redirects are not followed")
	f.String(&cfg.WebhookSecret, "webhook-secret", "", "secret signing webhooks (header Ordertimeout-Signature: t=<unix>,v1=<hex HMAC-SHA256 of \"<t>.<body>\">)")
	f.Bool(&cfg.WebhookUnsigned, "webhook-unsigned", false, "send webhooks unsigned on purpose (without it, --webhook-url without --webhook-secret is refused)")
	f.Duration(&cfg.WebhookTimeout, "webhook-timeout", sidecar.DefaultWebhookTimeout, "timeout of one webhook delivery (keep it below --job-timeout)")
	f.Int(&cfg.SweepBatch, "sweep-batch", sweep.DefaultBatch, "most due orders one sweep_due call claims (one transaction): 1 to 100000 (0: the default)")
	f.Int(&cfg.SweepSessions, "sweep-sessions", sweep.DefaultSessions, "database sessions sweeping at once while full batches come back")
	f.Duration(&cfg.MaxSleep, "max-sleep", sweep.DefaultMaxSleep, "longest pause between sweeps, at most 1h; bounds the delay a missed wake-up can cause")
	f.Bool(&cfg.NoSweep, "no-sweep", false, "do not sweep (work River jobs only)")
	f.Duration(&cfg.ListenReconnect, "listen-reconnect", listener.DefaultReconnectDelay, "pause before re-LISTENing after a lost LISTEN connection")
	f.Duration(&cfg.ConflictRescan, "conflict-rescan", sidecar.DefaultConflictRescan, "how often open conflicts are re-read besides after each (re)connect (0: the default)")
	f.Int(&cfg.MaxWorkers, "max-workers", sidecar.DefaultMaxWorkers, "River jobs of queue ordertimeout (gateway checks, closes, refunds) worked at once")
	f.Int(&cfg.WebhookWorkers, "webhook-workers", sidecar.DefaultWebhookWorkers, "webhook deliveries (queue ordertimeout_webhook) worked at once, apart from --max-workers")
	f.Duration(&cfg.FetchCooldown, "fetch-cooldown", sidecar.DefaultFetchCooldown, "River: least time between two fetches of queue ordertimeout")
	f.Duration(&cfg.FetchPollInterval, "fetch-poll-interval", sidecar.DefaultFetchPollInterval, "River: how often queue ordertimeout is polled (the database inserts jobs without notifying)")
	f.Duration(&cfg.JobTimeout, "job-timeout", sidecar.DefaultJobTimeout, "River: longest a job may run")
	f.Duration(&cfg.RescueAfter, "rescue-after", sidecar.DefaultRescueAfter, "a River job still running this long by the database's clock (its sidecar died) is handed back; 1s to 24h, at least --job-timeout")
	f.Duration(&cfg.CloseAfter, "close-after", 0, "every minute, move CANCELLED orders cancelled longer ago than this to CLOSED (close_cancelled); 0: never")
	f.Duration(&cfg.PurgeAfter, "purge-after", 0, "every minute, delete CLOSED orders closed longer ago than this with every row about them (purge_orders); 0: never")
	f.Duration(&cfg.PurgePaidAfter, "purge-paid-after", 0, "with --purge-after, also delete PAID orders paid longer ago than this; 0: keep them")
	f.Duration(&cfg.JobRetention, "job-retention", sidecar.DefaultJobRetention, "how long River keeps completed and cancelled jobs (payment checks, closes, webhooks) before deleting them, 1m to 720h; discarded ones are kept 7 days")
	f.Int(&cfg.DBMaxConns, "db-max-conns", 0, "size of the connection pool (default: sweep sessions + max workers + webhook workers + 6)")
	f.String(&cfg.HTTPAddr, "http", server.DefaultAddr, "address of the HTTP server (/metrics, /healthz, /readyz, /riverui/, /console/); \"-\" disables it")
	f.String(&allowedHosts, "http-allowed-hosts", "", "comma-separated host names the HTTP server may be reached at besides IP addresses, localhost and the host of --http (requests naming any other Host get 403: DNS rebinding)")
	f.String(&cfg.UIUser, "ui-user", "", "user for HTTP basic auth on /riverui/ (with --ui-password); without both, the UI is served on localhost only, read-only")
	f.String(&cfg.UIPassword, "ui-password", "", "password for HTTP basic auth on /riverui/")
	f.String(&cfg.ConsoleViewer, "console-viewer", "", "user:password of the console's viewer, who may read /console/ (HTTP basic auth)")
	f.String(&cfg.ConsoleOperator, "console-operator", "", "user:password of the console's operator, who may also resolve conflicts; recorded as actor \"console:<user>\".\nWithout --console-viewer and --console-operator the console is served read-only on localhost only")
	f.String(&cfg.ConsoleDatabaseURL, "console-database-url", "", "PostgreSQL connection string for the console (default: the sidecar's), straight to PostgreSQL too: its pool keeps prepared statements, which a transaction-mode pooler loses; a role in ordertimeout_admin also shows resolved conflicts, holds and releases")
	f.Duration(&metricsInterval, "metrics-interval", 0, "deprecated and ignored: /metrics reads the database's statistics at each scrape")
	f.Duration(&cfg.ShutdownTimeout, "shutdown-timeout", sidecar.DefaultShutdownTimeout, "on SIGTERM, how long running jobs may finish before they are cancelled and handed back")
	f.Duration(&cfg.ReconcileEvery, "reconcile-every", sidecar.DefaultReconcileEvery, "how often the River leader asks the gateway for its payments (GET /v1/payments) since the last watermark and reconciles them (job ordertimeout_reconcile): 100ms to 24h; 0 turns it off")
	f.String(&cfg.ReconcileSource, "reconcile-source", "", "name of the watermark of continuous reconciliation (ordertimeout.reconcile_watermark); default gateway:<--gateway>, e.g. gateway:http")
	f.Duration(&cfg.ReconcileOverlap, "reconcile-overlap", worker.DefaultReconcileOverlap, "each reconciliation asks again from this long before the watermark (late or skewed gateway timestamps); at most 24h (0: the default)")
	f.Duration(&cfg.ReconcileLookback, "reconcile-lookback", worker.DefaultReconcileLookback, "how far back the first reconciliation of a source asks; at most 8760h (365 days; 0: the default)")
	log.AddFlags(f)
	var showVersion bool
	f.Bool(&showVersion, "version", false, "print the version (as 'ordertimeout version') and exit")
	f.CommandLineOnly("version")
	if err := f.Parse(args, os.Getenv); err != nil {
		return err
	}
	if showVersion {
		return versionCmd(nil, os.Stdout)
	}
	switch {
	case gatewayRetries <= 0:
		// Negative was the only way to turn retries off before 0 meant it:
		// kept, so that a deployment that says -1 still starts.
		cfg.GatewayRetries = gateway.NoRetries
	default:
		cfg.GatewayRetries = gatewayRetries
	}
	for _, h := range strings.Split(allowedHosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			cfg.HTTPAllowedHosts = append(cfg.HTTPAllowedHosts, h)
		}
	}
	if stripeKeyEnv != "" {
		cfg.StripeKey = os.Getenv(stripeKeyEnv)
	}
	logger, err := log.Logger(os.Stderr)
	if err != nil {
		return err
	}
	cfg.Logger = logger
	if metricsInterval != 0 {
		logger.Warn("--metrics-interval is deprecated and ignored: /metrics reads the database's statistics at each scrape")
	}

	s, err := sidecar.New(ctx, cfg)
	if err != nil {
		return err
	}
	return s.Run(ctx)
}
