// Package demo runs a small web shop against ordertimeout for about a minute
// and reports what happened: the whole lifecycle of unpaid orders, on a real
// PostgreSQL, with the real sidecar and a fake payment gateway as child
// processes.
//
// The shop places a few orders a second. Most buyers pay in time, many walk
// away (their orders are cancelled at the deadline and the stock, coupons and
// points come back), and a handful of scripted stories show what can go
// wrong with money: a payment the gateway never reports, a declined card, a
// deadline extension, and bank transfers that land after the cancel (one
// reinstated, one refunded because the last unit was sold meanwhile). At the
// end the report reads everything back from the database and checks the
// money-safety invariants.
//
// Deadlines scale with the run's length (see newTiming), so a 15 second run in
// a test tells the same stories as the one minute `make demo`.
package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ordertimeout/ordertimeout/sidecar/sidecarproc"
)

// intro says what is about to happen; its verbs take the run's length and
// the deadlines.
const intro = `
ordertimeout demo: a small web shop on PostgreSQL for at most %s.
Every order reserves stock (some also a coupon or loyalty points) and must be
paid within %s. %s later (the grace for callbacks in flight) the sidecar
cancels it and gives everything back, exactly once. Most buyers pay in time,
many walk away. Seven scripted orders show the hard cases: a payment the gateway
never reports (the sidecar asks the gateway %s after the payment started),
a declined card, a deadline extension, two bank transfers that land after
the cancel, and a QR code paid after the cancel whose callback never comes
(the sidecar's reconciliation finds it in the gateway's records). The report
at the end is read back from the database.

`

// MinDuration is the shortest run that still has time for every story.
const MinDuration = 12 * time.Second

// settleTimeout bounds the wait, after the run, for the last orders to reach
// a final state.
const settleTimeout = 15 * time.Second

// Config configures a demo run.
type Config struct {
	// DatabaseURL names the database the demo migrates and fills. It is
	// required; use a throwaway database.
	DatabaseURL string

	// SidecarBin is the ordertimeout binary: it migrates the database and
	// runs the sidecar. It is required.
	SidecarBin string

	// FakeGatewayBin is the ordertimeout-fakegateway binary. If empty, the
	// one next to SidecarBin (as make build puts them).
	FakeGatewayBin string

	// Duration is how long the shop runs. If zero, one minute.
	Duration time.Duration

	// Rate is how many background orders the shop places per second. If zero,
	// 3.
	Rate float64

	// HTTPAddr is where the sidecar serves metrics and River's UI. If empty,
	// a free port of 127.0.0.1.
	HTTPAddr string

	// GatewayAddr is where the fake gateway listens. If empty, a free port of
	// 127.0.0.1.
	GatewayAddr string

	// LogDir receives the logs of the child processes. If empty, a new
	// temporary directory, which is left in place for reading.
	LogDir string

	// Keep leaves the sidecar and the gateway running after the report, until
	// ctx ends.
	Keep bool

	// Stdout receives the report, Stderr the progress line and notes. If nil,
	// os.Stdout and os.Stderr.
	Stdout, Stderr io.Writer
}

// Run migrates the database, starts the fake gateway and the sidecar, runs
// the shop, prints the report and returns what it found. It stops its child
// processes before it returns. An error means the demo could not run; a
// violated invariant is not an error (see Result.OK).
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	timing := newTiming(cfg.Duration)
	fmt.Fprintf(cfg.Stderr, intro, cfg.Duration, timing.timeout, timing.grace, timing.payingWindow)
	fmt.Fprintf(cfg.Stderr, "demo: logs in %s\n", cfg.LogDir)

	env := append(os.Environ(), "DATABASE_URL="+cfg.DatabaseURL)
	fmt.Fprintf(cfg.Stderr, "demo: migrating the database (%s migrate up)\n", cfg.SidecarBin)
	if err := runOnce(ctx, "migrate", cfg.SidecarBin, []string{"migrate", "up"}, env, cfg.LogDir); err != nil {
		return nil, err
	}

	db, err := connect(ctx, cfg.DatabaseURL, "shop")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	s := &shop{
		db:     db,
		timing: timing,
		rate:   cfg.Rate,
		scale:  max(1, int64(timing.produceFor/(35*time.Second))),
	}
	if err := s.setup(ctx); err != nil {
		return nil, err
	}
	totals := s.stockTotals()
	fmt.Fprintf(cfg.Stderr, "demo: %d units of stock on %d SKUs, points for %d accounts; new orders for %s, %g a second\n",
		sum(totals), len(totals), len(pointsAccounts), timing.produceFor.Round(time.Second), cfg.Rate)

	gw, sidecar, err := startChildren(ctx, cfg, env)
	// Stopped in reverse order: the sidecar first, then the gateway it asks.
	if gw != nil {
		defer stopChild(cfg.Stderr, gw.Process)
	}
	if sidecar != nil {
		defer stopChild(cfg.Stderr, sidecar.Process)
	}
	if err != nil {
		return nil, err
	}
	s.gw = gw

	start := time.Now()
	stories := newStories(timing)
	if err := runShop(ctx, cfg, s, stories, gw.Process, sidecar.Process); err != nil {
		return nil, err
	}
	result, err := collect(ctx, db, s, stories, time.Since(start))
	if err != nil {
		return nil, err
	}
	result.Print(cfg.Stdout)
	fmt.Fprintf(cfg.Stdout, "\nLogs: %s/{sidecar,fakegateway,migrate}.log\n", cfg.LogDir)

	if cfg.Keep {
		keepRunning(ctx, cfg, gw, sidecar)
	}
	return result, nil
}

// startChildren starts the fake gateway and then the sidecar, each once the
// one before answers HTTP. It returns those it started, also on error.
func startChildren(ctx context.Context, cfg Config, env []string) (gw *sidecarproc.Fake, sc *sidecarproc.Sidecar, err error) {
	// The gateway calls back into the database as the shop's payment callback
	// handler would (its events name actor "gateway:fake").
	gw, err = sidecarproc.StartFake(ctx, sidecarproc.FakeConfig{Bin: cfg.FakeGatewayBin, DatabaseURL: cfg.DatabaseURL,
		Addr: cfg.GatewayAddr, Log: filepath.Join(cfg.LogDir, "fakegateway.log"), OwnGroup: true})
	if err != nil {
		return nil, nil, err
	}
	sc, err = sidecarproc.StartSidecar(ctx, sidecarproc.SidecarConfig{
		Bin: cfg.SidecarBin, DatabaseURL: cfg.DatabaseURL, GatewayURL: gw.URL, Name: "demo", HTTPAddr: cfg.HTTPAddr,
		// Reconcile with the gateway's records twice per order window.
		Flags: []string{"--reconcile-every", (newTiming(cfg.Duration).timeout / 2).String()},
		Env:   env, Log: filepath.Join(cfg.LogDir, "sidecar.log"), OwnGroup: true,
	})
	if err != nil {
		return gw, nil, err
	}
	fmt.Fprintf(cfg.Stderr, "demo: fake gateway on %s, sidecar on %s; the shop opens\n", cfg.GatewayAddr, cfg.HTTPAddr)
	return gw, sc, nil
}

// runShop runs the shop with the progress line following the database, then
// waits for the last orders to settle. A child process that dies ends it
// with an error.
func runShop(ctx context.Context, cfg Config, s *shop, stories []*story, children ...*sidecarproc.Process) error {
	start := time.Now()
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	go watch(ctx, stop, children...)

	fmt.Fprintln(cfg.Stderr, legend)
	progCtx, stopProgress := context.WithCancel(ctx)
	progDone := make(chan struct{})
	go func() {
		defer close(progDone)
		newProgress(s.db, cfg.Stderr).run(progCtx)
	}()

	err := s.run(ctx, stories)
	if err == nil {
		err = settle(ctx, s.db, start.Add(cfg.Duration+settleTimeout))
	}
	stopProgress()
	<-progDone
	if cause := context.Cause(ctx); err != nil && cause != nil && !errors.Is(cause, context.Canceled) {
		return cause // a child died
	}
	return err
}

// keepRunning leaves the sidecar and the gateway running until ctx ends, and
// says where to look meanwhile.
func keepRunning(ctx context.Context, cfg Config, gw *sidecarproc.Fake, sidecar *sidecarproc.Sidecar) {
	w := cfg.Stdout
	fmt.Fprintf(w, "\nThe sidecar and the fake gateway keep running; Ctrl-C stops them (and drops a throwaway database).\n")
	fmt.Fprintf(w, "  metrics   http://%s/metrics\n", cfg.HTTPAddr)
	fmt.Fprintf(w, "  River UI  http://%s/riverui/\n", cfg.HTTPAddr)
	fmt.Fprintf(w, "  gateway   http://%s/_fake/stats\n", cfg.GatewayAddr)
	fmt.Fprintf(w, "  psql      psql '%s'\n", cfg.DatabaseURL)
	fmt.Fprintf(w, "            SELECT * FROM ordertimeout.order_events('%s');\n", StoryLateSold)
	select {
	case <-ctx.Done():
	case <-gw.Exited():
		fmt.Fprintf(cfg.Stderr, "demo: the fake gateway exited: %v\n", gw.Err())
	case <-sidecar.Exited():
		fmt.Fprintf(cfg.Stderr, "demo: the sidecar exited: %v\n", sidecar.Err())
	}
}

func (cfg *Config) setDefaults() error {
	if cfg.DatabaseURL == "" {
		return errors.New("a database URL is required (--database-url or DATABASE_URL)")
	}
	if cfg.SidecarBin == "" {
		return errors.New("the sidecar binary is required (--sidecar-bin)")
	}
	if _, err := os.Stat(cfg.SidecarBin); err != nil {
		return fmt.Errorf("the sidecar binary: %w (make build puts it in bin/ordertimeout)", err)
	}
	if cfg.FakeGatewayBin == "" {
		cfg.FakeGatewayBin = sidecarproc.FakeBinary(cfg.SidecarBin)
	}
	if _, err := os.Stat(cfg.FakeGatewayBin); err != nil {
		return fmt.Errorf("the fake gateway binary: %w (make build puts it in bin/ordertimeout-fakegateway)", err)
	}
	if cfg.Duration == 0 {
		cfg.Duration = time.Minute
	}
	if cfg.Duration < MinDuration {
		return fmt.Errorf("duration must be at least %s, got %s", MinDuration, cfg.Duration)
	}
	if cfg.Rate == 0 {
		cfg.Rate = 3
	}
	if cfg.Rate < 0 || cfg.Rate > 100 {
		return fmt.Errorf("rate must be between 0 and 100 orders per second, got %g", cfg.Rate)
	}
	if cfg.Stdout == nil {
		cfg.Stdout = os.Stdout
	}
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	for _, addr := range []*string{&cfg.HTTPAddr, &cfg.GatewayAddr} {
		if *addr == "" {
			a, err := sidecarproc.FreeAddr()
			if err != nil {
				return err
			}
			*addr = a
		}
	}
	if cfg.LogDir == "" {
		dir, err := os.MkdirTemp("", "ordertimeout-demo-")
		if err != nil {
			return fmt.Errorf("create log directory: %w", err)
		}
		cfg.LogDir = dir
	}
	return nil
}

// connect opens a small pool whose sessions name actor in the events they
// cause.
func connect(ctx context.Context, databaseURL, actor string) (*pgxpool.Pool, error) {
	config, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("parse database URL: %w", err)
	}
	config.ConnConfig.RuntimeParams["ordertimeout.actor"] = actor
	config.ConnConfig.RuntimeParams["application_name"] = "ordertimeout-demo"
	config.MaxConns = 8
	db, err := pgxpool.NewWithConfig(ctx, config)
	if err != nil {
		return nil, fmt.Errorf("connect to database: %w", err)
	}
	return db, nil
}

// watch ends the run when a child process exits before it should.
func watch(ctx context.Context, stop context.CancelCauseFunc, procs ...*sidecarproc.Process) {
	exited := make(chan *sidecarproc.Process, len(procs))
	for _, p := range procs {
		go func() {
			select {
			case <-p.Exited():
				exited <- p
			case <-ctx.Done():
			}
		}()
	}
	select {
	case p := <-exited:
		stop(fmt.Errorf("%s exited during the run (%v); its log:\n%s", p.Name, p.Err(), sidecarproc.Tail(p.Log(), 20)))
	case <-ctx.Done():
	}
}

// settle waits until every order has reached a final state and no conflict
// is open, or until deadline.
func settle(ctx context.Context, db *pgxpool.Pool, deadline time.Time) error {
	for {
		snap, err := takeSnapshot(ctx, db)
		if err != nil {
			return err
		}
		if snap.settled() || time.Now().After(deadline) {
			return nil
		}
		if !sleep(ctx, 250*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// stopChild stops p, saying so if it did not stop cleanly.
func stopChild(w io.Writer, p *sidecarproc.Process) {
	if err := p.Stop(stopTimeout); err != nil {
		fmt.Fprintf(w, "demo: %v\n", err)
	}
}

// stopTimeout is how long a child has to exit after SIGTERM before it is
// killed.
const stopTimeout = 20 * time.Second

// runOnce runs bin with args to completion, its output in logDir/name.log,
// and returns the end of that log with the error if it fails.
func runOnce(ctx context.Context, name, bin string, args, env []string, logDir string) error {
	logPath := filepath.Join(logDir, name+".log")
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	if werr := os.WriteFile(logPath, out.Bytes(), 0o644); werr != nil && err == nil {
		return fmt.Errorf("%s: write log: %w", name, werr)
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", bin, strings.Join(args, " "), err, sidecarproc.Tail(logPath, 20))
	}
	return nil
}
