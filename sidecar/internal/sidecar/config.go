package sidecar

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/listener"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/sweep"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/text"
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

// Defaults of a Config.
const (
	DefaultMaxWorkers = 20
	// DefaultWebhookWorkers serves queue ordertimeout_webhook.
	DefaultWebhookWorkers  = 4
	DefaultShutdownTimeout = 10 * time.Second
	DefaultJobTimeout      = time.Minute
	DefaultWebhookTimeout  = 10 * time.Second
	DefaultRescueAfter     = 2 * time.Minute
	DefaultConflictRescan  = 5 * time.Minute
	DefaultRetentionEvery  = time.Minute
	// DefaultJobRetention is River's own default for finished jobs.
	DefaultJobRetention = 24 * time.Hour
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
	GatewayDriver string
	// GatewayURL is the base URL of the http driver: http or https with a
	// host, maybe a path, no query or fragment (the calls' paths are
	// appended to it). StripeURL follows the same rule.
	GatewayURL     string
	GatewayToken   string
	GatewayTimeout time.Duration
	// GatewayRetries is how many times a request that finds the gateway
	// unavailable is sent again at once. If zero, gateway.DefaultRetries;
	// negative (gateway.NoRetries): none.
	GatewayRetries int
	// StripeKey is Stripe's secret API key (driver stripe), read from the
	// environment by the command. StripeURL, if set, replaces Stripe's API
	// address (stripe-mock in tests).
	StripeKey string
	StripeURL string
	// GatewayRate limits calls to the gateway to this many a second, in
	// bursts of at most GatewayBurst (0: max(1, ceil(rate))). 0: no limit
	// (and then GatewayBurst must be 0).
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

	MaxWorkers int
	// WebhookWorkers is how many webhook deliveries run at once, in queue
	// worker.WebhookQueue, apart from MaxWorkers.
	WebhookWorkers    int
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
	// JobRetention is how long River keeps completed and cancelled jobs of
	// queue ordertimeout before its cleaner deletes them (discarded ones
	// are kept River's 7 days). If zero, DefaultJobRetention.
	JobRetention time.Duration

	// HTTPAddr is where the HTTP server listens; "-" disables it. If empty,
	// server.DefaultAddr.
	HTTPAddr string
	// HTTPAllowedHosts are more host names the HTTP server may be reached
	// at (server.Server.AllowedHosts).
	HTTPAllowedHosts []string
	UIUser           string
	UIPassword       string

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

// MaxReconcileOverlap is the longest --reconcile-overlap (checkReconcile);
// the longest --reconcile-lookback is worker.MaxReconcilePeriod.
const MaxReconcileOverlap = 24 * time.Hour

// DefaultName returns "<hostname>-<pid>".
func DefaultName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "sidecar"
	}
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}

// withDefaults checks cfg and returns it with every zero field set to its
// default.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.DatabaseURL == "" {
		return Config{}, errors.New("database URL is required (--database-url or DATABASE_URL)")
	}
	switch cfg.GatewayDriver {
	case "", gateway.DriverHTTP:
		if cfg.GatewayURL == "" {
			return Config{}, errors.New("gateway URL is required (--gateway-url)")
		}
		if err := checkBaseURL("gateway URL", cfg.GatewayURL, "--gateway-url"); err != nil {
			return Config{}, err
		}
	case gateway.DriverStripe:
		if cfg.StripeKey == "" {
			return Config{}, errors.New("gateway stripe needs Stripe's secret API key in the environment (--stripe-key-env, default STRIPE_API_KEY)")
		}
		if cfg.StripeURL != "" {
			if err := checkBaseURL("Stripe API URL", cfg.StripeURL, "--stripe-api-url"); err != nil {
				return Config{}, err
			}
		}
	default:
		return Config{}, fmt.Errorf("gateway must be http or stripe, got %q", cfg.GatewayDriver)
	}
	if cfg.GatewayRate < 0 || cfg.GatewayBurst < 0 {
		return Config{}, fmt.Errorf("gateway-rate and gateway-burst must not be negative, got %v and %d", cfg.GatewayRate, cfg.GatewayBurst)
	}
	if cfg.GatewayBurst > 0 && cfg.GatewayRate == 0 {
		return Config{}, fmt.Errorf("--gateway-burst needs --gateway-rate: without a rate there is no limit, and a burst of %d does nothing", cfg.GatewayBurst)
	}
	if err := checkNotNegative(cfg); err != nil {
		return Config{}, err
	}
	if err := checkWebhook(cfg); err != nil {
		return Config{}, err
	}
	if cfg.Name == "" {
		cfg.Name = DefaultName()
	}
	// Every event the sidecar writes names it as actor "sidecar:<name>",
	// which the database refuses (OT148) unless plain text of at most 200
	// characters: a sidecar started with another name would fail every
	// sweep and cancel nothing.
	if !text.Plain(ActorPrefix+cfg.Name, MaxActor) {
		return Config{}, fmt.Errorf("name must be 1 to %d characters without control, format or line-separator characters (it is recorded as actor %q on every event), got %d characters (--name)",
			MaxActor-len(ActorPrefix), ActorPrefix+"<name>", utf8.RuneCountInString(cfg.Name))
	}
	// The database's bounds: sweep_due refuses any other batch (OT140) and
	// plan_next_sweep any other pause (OT141). A sidecar started with such a
	// value would fail every sweep, or sleep the whole value after each.
	if cfg.SweepBatch < 0 || cfg.SweepBatch > sweep.MaxBatch {
		return Config{}, fmt.Errorf("sweep-batch must be between 1 and %d (what sweep_due takes), got %d (--sweep-batch)", sweep.MaxBatch, cfg.SweepBatch)
	}
	if cfg.MaxSleep < 0 || cfg.MaxSleep > sweep.MaxMaxSleep {
		return Config{}, fmt.Errorf("max-sleep must be at most %s (what plan_next_sweep takes) and not negative (0: the default, %s), got %s (--max-sleep)", sweep.MaxMaxSleep, sweep.DefaultMaxSleep, cfg.MaxSleep)
	}
	if cfg.MaxWorkers == 0 {
		cfg.MaxWorkers = DefaultMaxWorkers
	}
	if cfg.WebhookWorkers == 0 {
		cfg.WebhookWorkers = DefaultWebhookWorkers
	}
	if cfg.SweepSessions == 0 {
		cfg.SweepSessions = sweep.DefaultSessions
	}
	cfg.FetchCooldown = cmp.Or(cfg.FetchCooldown, DefaultFetchCooldown)
	cfg.FetchPollInterval = cmp.Or(cfg.FetchPollInterval, DefaultFetchPollInterval)
	cfg.ShutdownTimeout = cmp.Or(cfg.ShutdownTimeout, DefaultShutdownTimeout)
	cfg.JobTimeout = cmp.Or(cfg.JobTimeout, DefaultJobTimeout)
	cfg.RescueAfter = cmp.Or(cfg.RescueAfter, DefaultRescueAfter)
	cfg.ConflictRescan = cmp.Or(cfg.ConflictRescan, DefaultConflictRescan)
	if cfg.RescueAfter < cfg.JobTimeout {
		return Config{}, fmt.Errorf("rescue-after (%s) must be at least job-timeout (%s): a job still within its timeout is not stuck (--rescue-after, --job-timeout)", cfg.RescueAfter, cfg.JobTimeout)
	}
	if cfg.RescueAfter < time.Second || cfg.RescueAfter > 24*time.Hour {
		return Config{}, fmt.Errorf("rescue-after must be between 1s and 24h, got %s (--rescue-after)", cfg.RescueAfter)
	}
	cfg.JobRetention = cmp.Or(cfg.JobRetention, DefaultJobRetention)
	if cfg.JobRetention < time.Minute || cfg.JobRetention > 30*24*time.Hour {
		return Config{}, fmt.Errorf("job-retention must be between 1m and 720h, got %s (--job-retention)", cfg.JobRetention)
	}
	if err := checkRetention(&cfg); err != nil {
		return Config{}, err
	}
	if err := checkReconcile(cfg); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// checkReconcile refuses continuous reconciliation settings that would fail
// every run, or run it back to back: reconcile_payments takes periods of at
// most 400 days (OT172), and a first run asks --reconcile-lookback back (a
// review's 10000h started, and every run failed, logged by River at INFO
// only); --reconcile-every 1ns reconciled 142 times in 40 s.
func checkReconcile(cfg Config) error {
	if cfg.ReconcileEvery != 0 && (cfg.ReconcileEvery < 100*time.Millisecond || cfg.ReconcileEvery > 24*time.Hour) {
		return fmt.Errorf("reconcile-every must be 0 (off) or between 100ms and 24h, got %s (--reconcile-every)", cfg.ReconcileEvery)
	}
	if cfg.ReconcileLookback > worker.MaxReconcilePeriod {
		return fmt.Errorf("reconcile-lookback must be at most %s (365 days: reconcile_payments takes periods of at most 400 days), got %s (--reconcile-lookback)",
			worker.MaxReconcilePeriod, cfg.ReconcileLookback)
	}
	if cfg.ReconcileOverlap > MaxReconcileOverlap {
		return fmt.Errorf("reconcile-overlap must be at most %s, got %s (--reconcile-overlap)", MaxReconcileOverlap, cfg.ReconcileOverlap)
	}
	return nil
}

// checkNotNegative refuses a negative duration or count, which would mean
// something its flag's --help does not say: the timers of --conflict-rescan
// and --reconcile-every off, the defaults of --reconcile-overlap,
// --reconcile-lookback, --max-workers, --webhook-workers and --sweep-sessions, no timeout at all
// for River's --job-timeout and for the HTTP clients' timeouts, a negative
// pool size for pgx.
func checkNotNegative(cfg Config) error {
	for _, d := range []struct {
		flag  string
		value time.Duration
		zero  string // what 0 means
	}{
		{"conflict-rescan", cfg.ConflictRescan, "the default, " + DefaultConflictRescan.String()},
		{"reconcile-every", cfg.ReconcileEvery, "off"},
		{"reconcile-overlap", cfg.ReconcileOverlap, "the default, " + worker.DefaultReconcileOverlap.String()},
		{"reconcile-lookback", cfg.ReconcileLookback, "the default, " + worker.DefaultReconcileLookback.String()},
		{"shutdown-timeout", cfg.ShutdownTimeout, "the default, " + DefaultShutdownTimeout.String()},
		{"job-timeout", cfg.JobTimeout, "the default, " + DefaultJobTimeout.String()},
		{"listen-reconnect", cfg.ListenReconnect, "the default, " + listener.DefaultReconnectDelay.String()},
		{"fetch-cooldown", cfg.FetchCooldown, "the default, " + DefaultFetchCooldown.String()},
		{"fetch-poll-interval", cfg.FetchPollInterval, "the default, " + DefaultFetchPollInterval.String()},
		{"gateway-timeout", cfg.GatewayTimeout, "the default, " + gateway.DefaultTimeout.String()},
		{"webhook-timeout", cfg.WebhookTimeout, "the default, " + DefaultWebhookTimeout.String()},
	} {
		if d.value < 0 {
			return fmt.Errorf("%s must not be negative (0: %s), got %s (--%s)", d.flag, d.zero, d.value, d.flag)
		}
	}
	for _, n := range []struct {
		flag  string
		value int
		zero  string
	}{
		{"max-workers", cfg.MaxWorkers, fmt.Sprintf("the default, %d", DefaultMaxWorkers)},
		{"webhook-workers", cfg.WebhookWorkers, fmt.Sprintf("the default, %d", DefaultWebhookWorkers)},
		{"sweep-sessions", cfg.SweepSessions, fmt.Sprintf("the default, %d", sweep.DefaultSessions)},
		{"db-max-conns", cfg.DBMaxConns, "sweep sessions + max workers + webhook workers + 6"},
	} {
		if n.value < 0 {
			return fmt.Errorf("%s must not be negative (0: %s), got %d (--%s)", n.flag, n.zero, n.value, n.flag)
		}
	}
	return nil
}

// checkBaseURL refuses a base URL that the gateway calls' paths cannot be
// appended to: without the http or https scheme or a host, every call would
// fail as "unavailable" forever; with a query or fragment, the paths would
// land in it. what names the URL and flag its flag in the error.
func checkBaseURL(what, raw, flag string) error {
	u, ok := httpURL(raw)
	if !ok || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(raw, "#") {
		return fmt.Errorf("%s %s must be an absolute http or https URL without a query or fragment (%s)", what, shownURL(raw), flag)
	}
	if problem := hostProblem(u); problem != "" {
		return fmt.Errorf("%s %s %s (%s)", what, shownURL(raw), problem, flag)
	}
	return nil
}

// hostProblem says what makes the host of u one no connection can go to
// ("http://:80", "http://127.0.0.1:99999"), or "" if nothing does.
func hostProblem(u *url.URL) string {
	if u.Hostname() == "" {
		return "has no host name"
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Sprintf("port must be between 1 and 65535, got %s", p)
		}
	}
	return ""
}

// shownURL quotes raw for an error without its userinfo (a password in the
// URL, sent as basic auth, must not reach the logs), or says that it is not a
// URL at all: url.Parse's own error quotes it whole.
func shownURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(not a URL)"
	}
	u.User = nil
	return strconv.Quote(u.String())
}

// httpURL parses raw as an absolute http or https URL with a host: what the
// gateway, Stripe and webhook URLs must all be.
func httpURL(raw string) (*url.URL, bool) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, false
	}
	return u, true
}

// checkWebhook refuses a webhook configuration that would send unsigned
// webhooks by mistake, or to a URL that is not http(s).
func checkWebhook(cfg Config) error {
	if cfg.WebhookURL == "" {
		return nil
	}
	u, ok := httpURL(cfg.WebhookURL)
	if !ok {
		return fmt.Errorf("webhook URL %s must be an absolute http or https URL (--webhook-url)", shownURL(cfg.WebhookURL))
	}
	if problem := hostProblem(u); problem != "" {
		return fmt.Errorf("webhook URL %s %s (--webhook-url)", shownURL(cfg.WebhookURL), problem)
	}
	switch {
	case cfg.WebhookSecret == "" && !cfg.WebhookUnsigned:
		return errors.New("a webhook URL without a webhook secret would send unsigned webhooks: set --webhook-secret, or --webhook-unsigned if unsigned webhooks are intended")
	case cfg.WebhookSecret != "" && cfg.WebhookUnsigned:
		return errors.New("--webhook-unsigned and --webhook-secret contradict each other: set one")
	}
	return nil
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
	cfg.RetentionEvery = cmp.Or(cfg.RetentionEvery, DefaultRetentionEvery)
	if cfg.RetentionEvery < time.Second || cfg.RetentionEvery > 24*time.Hour {
		return fmt.Errorf("retention interval must be between 1s and 24h, got %s", cfg.RetentionEvery)
	}
	return nil
}

// Warnings are what New logs about a configuration it takes but that works
// against itself: timeouts that let River's job timeout end the calls they
// bound, so that such a job runs again, later or at once.
func (c Config) Warnings() []string {
	var ws []string
	job := cmp.Or(c.JobTimeout, DefaultJobTimeout)
	// A gateway call makes its request and, while the gateway is down, up
	// to GatewayRetries more, each up to GatewayTimeout.
	calls := 1 + max(cmp.Or(c.GatewayRetries, gateway.DefaultRetries), 0)
	if gt := cmp.Or(c.GatewayTimeout, gateway.DefaultTimeout); gt*time.Duration(calls) >= job {
		ws = append(ws, fmt.Sprintf("--gateway-timeout (%s) times the requests of one call (%d: 1 + --gateway-retries) is not below --job-timeout (%s): a gateway that hangs makes jobs end at the job's timeout and run again",
			gt, calls, job))
	}
	if wt := cmp.Or(c.WebhookTimeout, DefaultWebhookTimeout); c.WebhookURL != "" && wt >= job {
		ws = append(ws, fmt.Sprintf("--webhook-timeout (%s) is not below --job-timeout (%s): a delivery that hangs ends at the job's timeout, a failed attempt",
			wt, job))
	}
	// A paid order purged before reconciliation has read past its payment
	// leaves the gateway's transaction of an order this database no longer
	// has: reported for a person (unknown_order), for every paid order.
	if reads := cmp.Or(c.ReconcileOverlap, worker.DefaultReconcileOverlap) + c.ReconcileEvery; c.PurgePaidAfter > 0 && c.ReconcileEvery > 0 && c.PurgePaidAfter < reads {
		ws = append(ws, fmt.Sprintf("--purge-paid-after (%s) is below --reconcile-overlap plus --reconcile-every (%s): reconciliation will find the payments of purged paid orders and report each one for a person (unknown_order)",
			c.PurgePaidAfter, reads))
	}
	return ws
}
