// Command bench runs the standard workload of docs/workload.md against the
// PostgreSQL server named by DATABASE_URL (a superuser: it creates and drops
// databases) and reports what it measured.
//
// Every scenario runs on its own database cloned from a freshly migrated
// template. Each scenario prints one JSON line per measured variant to stdout,
// checks the money-safety invariants on every database it used, and a human
// summary table follows at the end. Figures come from database timestamps
// (events.at, orders.created_at, orders.cancel_at), not from this program's
// clock. The exit code is non-zero when an invariant is violated or a
// scenario fails.
//
//	tests/bin/withpg go run ./tests/bench --scenarios drain --drain-orders 5000
//
// Run `go run ./tests/bench --help` for the flags; `make bench` runs the
// standard sizes, `make bench-quick` small ones.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := realMain(ctx, os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// config holds the flags.
type config struct {
	scenarios   []string
	runs        int
	longRuns    int
	seed        int64
	batch       int
	drainOrders int
	sessions    []int
	backlogRows []int
	loadClients int

	createClients  int
	createDuration time.Duration

	baselines          bool
	naiveWorkers       int
	naiveFetchCooldown time.Duration
	naivePollInterval  time.Duration
	pgbench            string
	pgbenchClients     int

	steadyRate     int
	steadyDuration time.Duration
	steadyTimeout  time.Duration
	steadyConns    int
	steadyRuns     int
	steadyPaid     float64
	steadySettle   time.Duration
	maxOverdue     time.Duration
	sidecar        string
	sidecarArgs    []string

	raceOrders int
	raceLead   time.Duration

	fastSettings bool

	zset          bool
	zsetInstances int
	zsetBatch     int
	zsetPoll      time.Duration
	redisServer   string

	capacityRates    []int
	capacityRuns     int
	capacityDuration time.Duration
	capacityLagP99   time.Duration
	capacityCreated  float64
	capacityOverdue  time.Duration

	retention retentionConfig

	plotDir string
	jsonOut string
	mdOut   string
	quick   bool
	keep    bool
}

var allScenarios = []string{"create", "drain", "steady", "capacity", "race", "backlog", "retention"}

func parseFlags(args []string) (*config, error) {
	cfg := &config{}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: DATABASE_URL=postgres://superuser@host/db bench [flags]\n\n"+
			"Runs the standard workload (docs/workload.md): scenarios %s.\n"+
			"Each scenario gets its own freshly migrated database; one JSON line per result goes to stdout,\n"+
			"then a summary table. Exits non-zero when an invariant is violated.\n\nFlags:\n",
			strings.Join(allScenarios, ", "))
		fs.PrintDefaults()
	}
	scenarios := fs.String("scenarios", strings.Join(allScenarios, ","), "comma-separated scenarios to run, in this order")
	fs.IntVar(&cfg.runs, "runs", 3, "runs of create and drain (and of each drain session count); medians are reported")
	fs.IntVar(&cfg.longRuns, "long-runs", 1, "runs of the long scenarios: race, backlog and the drain baselines (steady: --steady-runs)")
	fs.Int64Var(&cfg.seed, "seed", 1, "seed of the random order contents and payment times")
	fs.IntVar(&cfg.batch, "batch", 1000, "max argument of sweep_due: orders cancelled per transaction")
	fs.IntVar(&cfg.drainOrders, "drain-orders", 100000, "due orders in the drain and backlog data set")
	sessions := fs.String("sessions", "1,2", "comma-separated numbers of concurrent sweep_due sessions for drain")
	backlog := fs.String("backlog-rows", "1000000", "comma-separated sizes of the closed-order backlog (e.g. 1000000,10000000)")
	fs.IntVar(&cfg.loadClients, "load-clients", 4, "connections creating the drain data set through create_order")
	fs.IntVar(&cfg.createClients, "create-clients", 4, "concurrent create_order clients in create")
	fs.DurationVar(&cfg.createDuration, "create-duration", 10*time.Second, "how long create runs")
	fs.BoolVar(&cfg.baselines, "baselines", true, "run the drain baselines (naive River, pgbench) on the drain data set")
	fs.IntVar(&cfg.naiveWorkers, "naive-workers", 50, "naive River baseline: MaxWorkers of its queue")
	fs.DurationVar(&cfg.naiveFetchCooldown, "naive-fetch-cooldown", 5*time.Millisecond, "naive River baseline: FetchCooldown")
	fs.DurationVar(&cfg.naivePollInterval, "naive-fetch-poll-interval", 20*time.Millisecond, "naive River baseline: FetchPollInterval")
	fs.StringVar(&cfg.pgbench, "pgbench", "", "pgbench binary (default $PGBIN/pgbench, PGBIN defaulting to /usr/lib/postgresql/15/bin)")
	fs.IntVar(&cfg.pgbenchClients, "pgbench-clients", 2, "pgbench baseline: clients (-c and -j)")
	fs.IntVar(&cfg.steadyRate, "steady-rate", 1000, "steady: orders created per second")
	fs.DurationVar(&cfg.steadyDuration, "steady-duration", 30*time.Second, "steady: how long the producer runs")
	fs.DurationVar(&cfg.steadyTimeout, "steady-timeout", 3*time.Second, "steady: timeout of every order")
	fs.IntVar(&cfg.steadyRuns, "steady-runs", 3, "steady: runs; the summary shows the median of each figure")
	fs.IntVar(&cfg.steadyConns, "steady-conns", 4, "steady: connections of the producer (and as many for payments); sized to the machine like an application's pool: backends beyond the cores only queue for CPU and for the hot stock rows")
	fs.Float64Var(&cfg.steadyPaid, "steady-paid", 0.5, "steady: fraction of orders that get a payment")
	fs.DurationVar(&cfg.steadySettle, "steady-settle", 3*time.Second, "steady: how long to wait after the last deadline before stopping the sidecar")
	fs.DurationVar(&cfg.maxOverdue, "max-overdue", time.Second, "invariant 4: how long a PENDING order may stay past cancel_at while a canceller runs (the sweep interval)")
	fs.StringVar(&cfg.sidecar, "sidecar", "bin/ordertimeout", "steady: the sidecar binary, built with `go build` when missing")
	sidecarArgs := fs.String("sidecar-args", "", "steady: extra arguments after `run`, space-separated")
	fs.IntVar(&cfg.raceOrders, "race-orders", 2000, "race: orders expiring at the same instant")
	fs.DurationVar(&cfg.raceLead, "race-begin-lead", 20*time.Millisecond, "race: each begin_payment starts a random 0 to this long before the deadline (0: all at the deadline, when begin_payment is refused)")
	fs.BoolVar(&cfg.fastSettings, "fast-settings", false, "expect the server to run with fsync, synchronous_commit and full_page_writes off (the default expects them on: production's settings); make bench starts it accordingly")
	fs.BoolVar(&cfg.zset, "zset", true, "run the Redis sorted-set baseline (the seed's design) next to ordertimeout in create, drain, steady and capacity")
	fs.IntVar(&cfg.zsetInstances, "zset-instances", 8, "ZSet baseline: scanner instances (each ZRANGEBYSCORE + ZREM grab + cancel transaction)")
	fs.IntVar(&cfg.zsetBatch, "zset-batch", 100, "ZSet baseline: LIMIT of each ZRANGEBYSCORE")
	fs.DurationVar(&cfg.zsetPoll, "zset-poll", 100*time.Millisecond, "ZSet baseline: a scanner's sleep when nothing is due")
	fs.StringVar(&cfg.redisServer, "redis-server", "redis-server", "ZSet baseline: the redis-server binary, started on a free port of 127.0.0.1 with persistence off (tests/bin/ensure-redis installs it)")
	capacityRates := fs.String("capacity-rates", "500,750,1000,1250,1500,2000,2500,3000", "capacity: the rising rates (orders/s) of the steady workload, from one this 2-core machine keeps up with; a design stops at its first rate it cannot keep up with")
	fs.IntVar(&cfg.capacityRuns, "capacity-runs", 3, "capacity: ladders, each climbing the rates with each design run; the summary shows each design's median highest rate and, with the ZSet baseline, the median of the ladders' ratios")
	fs.DurationVar(&cfg.capacityDuration, "capacity-duration", 15*time.Second, "capacity: how long the producer runs at each rate")
	fs.DurationVar(&cfg.capacityLagP99, "capacity-lag-p99", 100*time.Millisecond, "capacity: keeps up only with a cancel lag p99 at most this")
	fs.Float64Var(&cfg.capacityCreated, "capacity-created", 0.97, "capacity: keeps up only when at least this fraction of the asked orders was created")
	fs.DurationVar(&cfg.capacityOverdue, "capacity-overdue-after", 5*time.Second, "capacity: keeps up only when no PENDING order is past its deadline this long after the producer stops")
	addRetentionFlags(fs, &cfg.retention)
	fs.StringVar(&cfg.plotDir, "plot-dir", ".cache/bench", "where to write the SVG plots (empty: no plots)")
	fs.StringVar(&cfg.jsonOut, "json-out", "", "also write the JSON lines to this file")
	fs.StringVar(&cfg.mdOut, "md-out", "", "also write the summary as a markdown table to this file")
	fs.BoolVar(&cfg.keep, "keep", false, "keep the databases (for debugging; drop them by hand: bench_<pid>_*)")
	fs.BoolVar(&cfg.quick, "quick", false, "small sizes for a smoke check (flags given explicitly still win)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}

	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if cfg.quick {
		quick := map[string]string{
			"runs":                   "1",
			"drain-orders":           "2000",
			"backlog-rows":           "20000",
			"create-duration":        "3s",
			"steady-rate":            "200",
			"steady-duration":        "5s",
			"steady-settle":          "1s",
			"steady-conns":           "4",
			"steady-runs":            "1",
			"race-orders":            "300",
			"capacity-rates":         "200",
			"capacity-runs":          "1",
			"capacity-duration":      "3s",
			"capacity-overdue-after": "4s",
		}
		maps.Copy(quick, retentionQuick)
		for name, value := range quick {
			if set[name] {
				continue
			}
			if err := fs.Set(name, value); err != nil {
				return nil, err
			}
		}
	}

	for _, s := range splitList(*scenarios) {
		if !slices.Contains(allScenarios, s) {
			return nil, fmt.Errorf("--scenarios: unknown scenario %q (known: %s)", s, strings.Join(allScenarios, ", "))
		}
		cfg.scenarios = append(cfg.scenarios, s)
	}
	var err error
	if cfg.sessions, err = parseInts("sessions", *sessions); err != nil {
		return nil, err
	}
	if cfg.backlogRows, err = parseInts("backlog-rows", *backlog); err != nil {
		return nil, err
	}
	if cfg.capacityRates, err = parseInts("capacity-rates", *capacityRates); err != nil {
		return nil, err
	}
	slices.Sort(cfg.capacityRates)
	cfg.sidecarArgs = strings.Fields(*sidecarArgs)
	switch {
	case cfg.runs < 1 || cfg.longRuns < 1:
		return nil, errors.New("--runs and --long-runs must be at least 1")
	case cfg.batch < 1 || cfg.batch > 100000:
		return nil, errors.New("--batch must be between 1 and 100000")
	case cfg.drainOrders < 1 || cfg.raceOrders < 1:
		return nil, errors.New("--drain-orders and --race-orders must be at least 1")
	case cfg.createClients < 1 || cfg.loadClients < 1 || cfg.pgbenchClients < 1 || cfg.steadyConns < 1 || cfg.steadyRuns < 1 || cfg.naiveWorkers < 1:
		return nil, errors.New("client, connection and worker counts must be at least 1")
	case cfg.zsetInstances < 1 || cfg.zsetBatch < 1 || cfg.zsetPoll <= 0:
		return nil, errors.New("--zset-instances and --zset-batch must be at least 1, --zset-poll more than 0")
	case cfg.capacityRuns < 1:
		return nil, errors.New("--capacity-runs must be at least 1")
	case cfg.capacityDuration <= 0 || cfg.capacityCreated <= 0 || cfg.capacityCreated > 1:
		return nil, errors.New("--capacity-duration must be more than 0 and --capacity-created in (0, 1]")
	case cfg.steadyRate < 1 || cfg.steadyPaid < 0 || cfg.steadyPaid > 1:
		return nil, errors.New("--steady-rate must be at least 1 and --steady-paid between 0 and 1")
	}
	if err := cfg.retention.validate(); err != nil {
		return nil, err
	}
	if cfg.pgbench == "" {
		cfg.pgbench = envOr("PGBIN", "/usr/lib/postgresql/15/bin") + "/pgbench"
	}
	return cfg, nil
}

func realMain(ctx context.Context, args []string) error {
	cfg, err := parseFlags(args)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	slog.SetDefault(logger)

	url := os.Getenv("DATABASE_URL")
	if url == "" {
		return errors.New("DATABASE_URL is not set (a superuser's postgres:// URL); or run me through tests/bin/withpg")
	}
	if cfg.plotDir != "" {
		if err := os.MkdirAll(cfg.plotDir, 0o755); err != nil {
			return fmt.Errorf("create plot dir: %w", err)
		}
	}
	out, err := newReport(cfg.jsonOut)
	if err != nil {
		return err
	}
	defer out.close()

	srv := newServer(url)
	srv.keep = cfg.keep
	defer srv.dropAll()
	b := &bench{cfg: cfg, srv: srv, out: out}

	start := time.Now()
	info, settings, err := srv.describe(ctx)
	if err != nil {
		return err
	}
	want, wantName := durableSettings, "durable"
	if cfg.fastSettings {
		want, wantName = fastSettings, "fast"
	}
	if settings != want {
		return fmt.Errorf("the server runs with %s, not the %s settings (%s) this run asks for: "+
			"start it with them (make bench does: WITHPG_OPTS='-c fsync=%s -c synchronous_commit=%s -c full_page_writes=%s' tests/bin/withpg ...) "+
			"or pass --fast-settings for fsync, synchronous_commit and full_page_writes off",
			settings, wantName, want, want.Fsync, want.SynchronousCommit, want.FullPageWrites)
	}
	b.serverInfo = info
	b.postmaster = srv.postmaster(ctx)
	b.settings = wantName + " (" + settings.String() + ")"
	out.settings = wantName
	slog.Info("preparing the template database", "server", b.serverInfo)
	if err := b.prepareBase(ctx); err != nil {
		return err
	}
	if cfg.zset && slices.ContainsFunc(cfg.scenarios, func(s string) bool {
		return s == "create" || s == "drain" || s == "steady" || s == "capacity"
	}) {
		r, err := startRedis(ctx, cfg.redisServer)
		if err != nil {
			b.zsetSkipped = "no Redis: " + err.Error()
			slog.Warn("the ZSet baseline is skipped", "why", b.zsetSkipped)
			out.add(row{"ZSet baseline", "skipped", "", "", "", b.zsetSkipped})
		} else {
			b.redis = r
			defer r.stop()
			slog.Info("redis-server running", "addr", r.addr, "version", r.version)
		}
	}

	var failed []string
	for _, name := range cfg.scenarios {
		slog.Info("scenario", "name", name)
		out.noteLoad(name)
		var err error
		switch name {
		case "create":
			err = b.runCreate(ctx)
		case "drain":
			err = b.runDrain(ctx)
		case "steady":
			err = b.runSteady(ctx)
		case "race":
			err = b.runRace(ctx)
		case "capacity":
			err = b.runCapacity(ctx)
		case "backlog":
			err = b.runBacklog(ctx)
		case "retention":
			err = b.runRetention(ctx)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			slog.Error("scenario failed", "name", name, "err", err)
			failed = append(failed, fmt.Sprintf("%s: %v", name, err))
			out.add(row{name, "FAILED", "", "", "", firstLine(err.Error())})
		}
	}

	out.summary(os.Stdout, b, time.Since(start))
	if cfg.mdOut != "" {
		if err := out.writeMarkdown(cfg.mdOut, b, time.Since(start)); err != nil {
			return err
		}
	}
	if out.violated {
		failed = append(failed, "an invariant was VIOLATED (see above)")
	}
	if len(failed) > 0 {
		return errors.New(strings.Join(failed, "; "))
	}
	return nil
}

// bench is the state shared by the scenarios of one invocation.
type bench struct {
	cfg *config
	srv *server
	out *report

	serverInfo string // version and durability settings of the server
	settings   string // "durable (fsync=on, ...)" or "fast (...)"
	postmaster int    // the server's postmaster pid when it runs on this host, else 0

	base  string // migrated template: stock and settings, no orders
	drain string // template with the drain data set (made on first use)

	redis       *redisServer // nil when the ZSet baseline does not run
	zsetSkipped string       // why not, when it was wanted
	zsetDrain   string       // template with the ZSet drain data set (made on first use)
	zsetLoad    float64      // the ZSet create rate while its drain data set was made

	// loadRate is create_order's rate (orders/s, 4 clients) while the drain
	// data set was created.
	loadRate float64

	// drainEmpty is the median cancellations/s of one sweep session on the
	// drain data set without backlog, once measured: backlog compares to it.
	drainEmpty *drainStats
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func parseInts(name, s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--%s: %q is not a positive integer", name, f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--%s: empty list", name)
	}
	return out, nil
}

// firstLine returns s up to its first newline.
func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}
