package sidecar_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecar"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecartest"
)

// A --sweep-batch or --max-sleep the database refuses (sweep_due takes 1 to
// 100,000 orders, plan_sleep 0 to 1 hour) must stop the sidecar from
// starting. Before, it started, answered /readyz, and then every sweep
// failed with OT140 (nothing was ever cancelled by a timeout), or every
// plan_sleep failed with OT141 and the sweeper slept the whole --max-sleep
// after each sweep (an order due in 300 ms waited up to that long).
func TestNewRefusesSweepSettingsTheDatabaseRefuses(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		set  func(*sidecar.Config)
		flag string
	}{
		{"batch above 100000", func(c *sidecar.Config) { c.SweepBatch = 100001 }, "--sweep-batch"},
		{"max sleep above 1h", func(c *sidecar.Config) { c.MaxSleep = 2 * time.Hour }, "--max-sleep"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, false)
			cfg := e.config("s1")
			c.set(&cfg)
			s, err := sidecar.New(t.Context(), cfg)
			if err == nil {
				// What such a sidecar does: it runs and looks ready, and
				// the order is not cancelled on time.
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan error, 1)
				go func() { done <- s.Run(ctx) }()
				t.Cleanup(func() { cancel(); <-done })
				sidecartest.CreateOrder(t, e.db, "O1", 300*time.Millisecond, `{"precheck": "never"}`)
				deadline := time.Now().Add(5 * time.Second)
				for time.Now().Before(deadline) && sidecartest.Status(t, e.db, "O1") != "CANCELLED" {
					time.Sleep(20 * time.Millisecond) // polling a database condition
				}
				t.Fatalf("sidecar.New accepted %s; the order due in 300 ms is %s 5 s later", c.flag, sidecartest.Status(t, e.db, "O1"))
			}
			require.ErrorContains(t, err, c.flag)
		})
	}
	// The bounds themselves are accepted.
	e := newEnv(t, false)
	cfg := e.config("s1")
	cfg.SweepBatch, cfg.MaxSleep = 100000, time.Hour
	sidecartest.Start(t, cfg)
}

// A negative --gateway-timeout or --webhook-timeout is no timeout at all for
// Go's HTTP client: a gateway or receiver that never answers held a worker
// until the job's timeout. Refused at start.
func TestNewRefusesNegativeHTTPTimeouts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	for flag, set := range map[string]func(*sidecar.Config){
		"--gateway-timeout": func(c *sidecar.Config) { c.GatewayTimeout = -time.Second },
		"--webhook-timeout": func(c *sidecar.Config) { c.WebhookTimeout = -time.Second },
	} {
		cfg := e.config("s1")
		set(&cfg)
		_, err := sidecar.New(t.Context(), cfg)
		require.ErrorContains(t, err, flag)
	}
}

// A gateway call that can outlast the job's timeout (--gateway-timeout times
// 1 + --gateway-retries, not below --job-timeout), and a webhook delivery
// that can, are said at start: River would end such jobs while the gateway
// or the receiver hangs.
func TestConfigWarnsOfCallsLongerThanTheJob(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cfg  sidecar.Config
		warn string
	}{
		{sidecar.Config{GatewayTimeout: 30 * time.Second}, "--gateway-timeout (30s) times the requests of one call (3: 1 + --gateway-retries)"},
		{sidecar.Config{GatewayTimeout: 20 * time.Second}, "--gateway-timeout (20s)"}, // exactly the job's minute
		{sidecar.Config{}, ""}, // the defaults: 3 × 5 s
		{sidecar.Config{GatewayTimeout: 59 * time.Second, GatewayRetries: -1}, ""}, // one request of 59 s
		{sidecar.Config{GatewayTimeout: 4 * time.Second, JobTimeout: 10 * time.Second}, "--job-timeout (10s)"},
		{sidecar.Config{WebhookURL: "https://hooks.example", WebhookTimeout: time.Minute}, "--webhook-timeout (1m0s) is not below --job-timeout (1m0s)"},
		{sidecar.Config{WebhookTimeout: time.Minute}, ""}, // no webhooks
		{sidecar.Config{PurgeAfter: time.Hour, PurgePaidAfter: time.Minute, ReconcileEvery: time.Minute},
			"--purge-paid-after (1m0s) is below --reconcile-overlap plus --reconcile-every (3m0s)"},
		{sidecar.Config{PurgeAfter: time.Hour, PurgePaidAfter: time.Minute}, ""}, // no reconciliation
		{sidecar.Config{PurgeAfter: time.Hour, PurgePaidAfter: time.Hour, ReconcileEvery: time.Minute}, ""},
	} {
		ws := strings.Join(c.cfg.Warnings(), "\n")
		if c.warn == "" {
			require.Empty(t, ws, "%+v", c.cfg)
		} else {
			require.Contains(t, ws, c.warn, "%+v", c.cfg)
		}
	}
}

// A negative duration is refused at start, naming its flag, instead of
// meaning something its --help does not say: --conflict-rescan and
// --reconcile-every turned their timer off (only --reconcile-every's 0 is
// documented to), --reconcile-overlap and --reconcile-lookback became their
// defaults, --job-timeout reached River as "no timeout". So is
// --gateway-burst without --gateway-rate, which does nothing.
func TestNewRefusesNegativeValues(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		set  func(*sidecar.Config)
		want string
	}{
		{func(c *sidecar.Config) { c.ConflictRescan = -time.Second }, "(--conflict-rescan)"},
		{func(c *sidecar.Config) { c.ReconcileEvery = -time.Second }, "(--reconcile-every)"},
		{func(c *sidecar.Config) { c.ReconcileOverlap = -time.Hour }, "(--reconcile-overlap)"},
		{func(c *sidecar.Config) { c.ReconcileLookback = -time.Hour }, "(--reconcile-lookback)"},
		{func(c *sidecar.Config) { c.ShutdownTimeout = -time.Second }, "(--shutdown-timeout)"},
		{func(c *sidecar.Config) { c.JobTimeout = -time.Nanosecond }, "(--job-timeout)"},
		{func(c *sidecar.Config) { c.ListenReconnect = -time.Second }, "(--listen-reconnect)"},
		{func(c *sidecar.Config) { c.FetchCooldown = -time.Millisecond }, "(--fetch-cooldown)"},
		{func(c *sidecar.Config) { c.FetchPollInterval = -time.Millisecond }, "(--fetch-poll-interval)"},
		{func(c *sidecar.Config) { c.GatewayBurst = 5 }, "--gateway-burst needs --gateway-rate"},
		{func(c *sidecar.Config) { c.MaxWorkers = -1 }, "(--max-workers)"},
		{func(c *sidecar.Config) { c.WebhookWorkers = -1 }, "(--webhook-workers)"},
		{func(c *sidecar.Config) { c.SweepSessions = -1 }, "(--sweep-sessions)"},
		{func(c *sidecar.Config) { c.DBMaxConns = -5 }, "(--db-max-conns)"},
	} {
		t.Run(c.want, func(t *testing.T) {
			cfg := sidecartest.Config("postgres://localhost/x", "http://localhost:1", "s1")
			c.set(&cfg)
			_, err := sidecar.New(t.Context(), cfg)
			require.ErrorContains(t, err, c.want)
			if c.want[0] == '(' {
				require.ErrorContains(t, err, "must not be negative")
			}
		})
	}
}

// Continuous reconciliation settings that would fail every run, or run it
// back to back, are refused at start, naming the flag: a first run asked
// --reconcile-lookback 10000h back, beyond the 400 days reconcile_payments
// takes (every run failed with OT172, logged by River at INFO only), and
// --reconcile-every 1ns reconciled 142 times in 40 s.
func TestNewRefusesReconcileSettingsThatCannotWork(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		set  func(*sidecar.Config)
		want string
	}{
		{func(c *sidecar.Config) { c.ReconcileEvery = time.Nanosecond }, "reconcile-every must be 0 (off) or between 100ms and 24h, got 1ns (--reconcile-every)"},
		{func(c *sidecar.Config) { c.ReconcileEvery = 25 * time.Hour }, "(--reconcile-every)"},
		{func(c *sidecar.Config) { c.ReconcileLookback = 10000 * time.Hour }, "reconcile-lookback must be at most 8760h0m0s (365 days"},
		{func(c *sidecar.Config) { c.ReconcileOverlap = 25 * time.Hour }, "reconcile-overlap must be at most 24h0m0s, got 25h0m0s (--reconcile-overlap)"},
	} {
		t.Run(c.want, func(t *testing.T) {
			cfg := sidecartest.Config("postgres://localhost/x", "http://localhost:1", "s1")
			c.set(&cfg)
			_, err := sidecar.New(t.Context(), cfg)
			require.ErrorContains(t, err, c.want)
		})
	}
}

// The sidecar's name is recorded as actor "sidecar:<name>" on every event,
// which the database refuses unless plain text of at most 200 characters
// (OT148): a sidecar started with another name is refused at start. Before,
// it started, answered /readyz, and failed every sweep, cancelling nothing.
func TestNewRefusesANameTheDatabaseRefuses(t *testing.T) {
	t.Parallel()
	for _, name := range []string{strings.Repeat("n", 193), "a\nb", "a\u202eb", "a\xffb"} {
		cfg := sidecartest.Config("postgres://localhost/x", "http://localhost:1", name)
		_, err := sidecar.New(t.Context(), cfg)
		require.ErrorContains(t, err, "(--name)", "%q", name)
		require.ErrorContains(t, err, "name must be 1 to 192 characters")
	}
	cfg := sidecartest.Config("postgres://localhost/x", "http://localhost:1", strings.Repeat("n", 192))
	if _, err := sidecar.New(t.Context(), cfg); err != nil {
		require.NotContains(t, err.Error(), "(--name)", "192 characters make an actor of 200")
	}
}
