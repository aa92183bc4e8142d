// Package soak runs ordertimeout under steady load while faults are injected
// at random, and reports whether anything was lost, done twice, or left
// undone: the engine of `make soak` (tests/soak) and of the PostgreSQL restart
// fault test (tests/fault).
//
// Run starts its own PostgreSQL cluster (package pgcluster, so that it can
// restart it), migrates it with `ordertimeout migrate up`, starts the fake
// gateway and the sidecars as processes (package sidecarproc), produces
// orders at a fixed rate (half of them paid, some silently, some late, some
// declined, the rest never paid), and every few seconds injects one fault:
// kill -9 of a sidecar (then a restart), pg_terminate_backend of a sidecar's
// connections, a PostgreSQL restart (fast or immediate), or the gateway down
// or slow for a while. Then it stops producing, waits until every order has
// finished, and checks the money-safety invariants (package invariant) and
// "nothing lost, nothing twice" (package outcome). The Report also gives the
// cancel lag during and outside faults and how long each PostgreSQL restart
// took to recover from, all from database timestamps.
package soak

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ordertimeout/ordertimeout/sidecar/invariant"
	"github.com/ordertimeout/ordertimeout/sidecar/sidecarproc"
	"github.com/ordertimeout/ordertimeout/tests/internal/pgcluster"
)

// Defaults of a Config.
const (
	DefaultDuration      = 10 * time.Minute
	DefaultRate          = 1000
	DefaultSidecars      = 2
	DefaultTimeout       = 3 * time.Second
	DefaultPayingWindow  = 2 * time.Second
	DefaultWorkers       = 32
	DefaultFaultEvery    = 5 * time.Second
	DefaultFaultTail     = 5 * time.Second
	DefaultSlack         = 5 * time.Second
	DefaultDrainTimeout  = 3 * time.Minute
	DefaultCheckEvery    = time.Minute
	DefaultProgressEvery = 10 * time.Second
)

// Config configures a Run. Bin is required; every zero field means its
// default.
type Config struct {
	// Bin is the ordertimeout binary, with ordertimeout-fakegateway next to
	// it (sidecarproc.FakeBinary). It is required.
	Bin string

	// Duration is how long orders are produced and faults injected; the
	// drain comes after.
	Duration time.Duration

	// Rate is how many orders are created per second.
	Rate int

	// Seed makes the run's choices repeatable: which orders are paid and
	// how, which faults come when. If zero, a random seed is used; the
	// Report names it.
	Seed uint64

	// Sidecars is how many sidecars run at once.
	Sidecars int

	// Timeout is every order's payment window (grace is 0).
	Timeout time.Duration

	// PayingWindow is how long a started payment runs before the sidecar
	// asks the gateway.
	PayingWindow time.Duration

	// Workers is how many orders are being created at once.
	Workers int

	// Faults are the kinds of fault drawn from; nil means AllKinds, an
	// empty non-nil slice means none.
	Faults []Kind

	// Sequence injects each kind of Faults once, in order, instead of
	// drawing at random until Duration ends; orders are produced until
	// Duration has passed, the last fault is over, and a second's worth of
	// orders (Rate) has been created since.
	Sequence bool

	// FaultEvery is the mean pause between two faults (drawn between half
	// and one and a half of it).
	FaultEvery time.Duration

	// FaultTail is how long after a fault has ended (and PostgreSQL has
	// recovered) a cancel still counts as "during a fault" in the lag.
	FaultTail time.Duration

	// Slack is how far past its cancel_at a PENDING order may be in the
	// final no_overdue_pending check.
	Slack time.Duration

	// DrainTimeout bounds the wait, after Duration, for every order to
	// finish.
	DrainTimeout time.Duration

	// CheckEvery is how often the invariants are checked while the run is
	// going on; negative disables those checks.
	CheckEvery time.Duration

	// Progress, if set, receives a progress line every ProgressEvery and a
	// line per fault.
	Progress      io.Writer
	ProgressEvery time.Duration

	// LogDir receives the processes' logs. If empty, a temporary directory
	// is used and removed unless the run found a violation or KeepLogs is
	// set.
	LogDir   string
	KeepLogs bool

	// SidecarFlags are extra flags of every `ordertimeout run`.
	SidecarFlags []string
}

func (c *Config) setDefaults() {
	c.Duration = cmp.Or(c.Duration, DefaultDuration)
	c.Rate = cmp.Or(c.Rate, DefaultRate)
	c.Sidecars = cmp.Or(c.Sidecars, DefaultSidecars)
	c.Timeout = cmp.Or(c.Timeout, DefaultTimeout)
	c.PayingWindow = cmp.Or(c.PayingWindow, DefaultPayingWindow)
	c.Workers = cmp.Or(c.Workers, DefaultWorkers)
	c.FaultEvery = cmp.Or(c.FaultEvery, DefaultFaultEvery)
	c.FaultTail = cmp.Or(c.FaultTail, DefaultFaultTail)
	c.Slack = cmp.Or(c.Slack, DefaultSlack)
	c.DrainTimeout = cmp.Or(c.DrainTimeout, DefaultDrainTimeout)
	c.CheckEvery = cmp.Or(c.CheckEvery, DefaultCheckEvery)
	c.ProgressEvery = cmp.Or(c.ProgressEvery, DefaultProgressEvery)
	if c.Faults == nil {
		c.Faults = AllKinds
	}
	if c.Seed == 0 {
		c.Seed = rand.Uint64()
	}
}

// sidecarFlags are the flags of every soak sidecar: jobs stuck on a killed
// sidecar are rescued within seconds rather than minutes, the gateway times
// out quickly, and only warnings are logged.
var sidecarFlags = []string{
	"--job-timeout", "10s",
	"--rescue-after", "20s",
	"--gateway-timeout", "2s",
	"--listen-reconnect", "500ms",
	"--shutdown-timeout", "5s",
	"--log-level", "warn",
}

// SKUs and points accounts of the soak, with more stock and points than a
// run can use. 100 SKUs as in the standard workload (docs/workload.md): with 10,
// every order queued on the same few stock rows and the soak measured that
// queue rather than the faults.
const (
	skus        = 100
	stockPerSKU = 1_000_000_000
	accounts    = 10
	pointsEach  = 1_000_000_000_000
)

// run is one soak run's state.
type run struct {
	cfg      Config
	logDir   string
	cluster  *pgcluster.Cluster
	mon      *pgxpool.Pool // monitoring, checks and fault SQL
	prod     *pgxpool.Pool // the producer's connections
	fake     *sidecarproc.Fake
	fakeLog  *os.File
	sidecars []*slot
	totals   map[string]int64
	start    time.Time

	ledger ledger

	outMu sync.Mutex // one progress line at a time

	// quiet is held by each fault while it is injected and recovered from,
	// and by each invariant check during the run: a check never races a
	// PostgreSQL restart, which would end it.
	quiet sync.Mutex

	mu              sync.Mutex
	faults          []*FaultRecord
	activeFault     *FaultRecord
	unexpectedExits []string
	checkFindings   []string
	checksRun       int
	checksFailed    int // checks that could not run: the database was away
}

// Run runs a soak and returns its report. An error means the run could not
// be carried out (an error wrapping pgcluster.ErrUnsupported: this machine
// cannot run a private PostgreSQL); violations are in the Report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Bin == "" {
		return nil, errors.New("soak: the ordertimeout binary is required")
	}
	cfg.setDefaults()
	r := &run{cfg: cfg, totals: map[string]int64{}}
	rep, err := r.run(ctx)
	if rep != nil {
		rep.LogDir = r.logDir
	}
	return rep, err
}

func (r *run) run(ctx context.Context) (rep *Report, err error) {
	r.logDir = r.cfg.LogDir
	tempLogs := r.logDir == ""
	if tempLogs {
		if r.logDir, err = os.MkdirTemp("", "ordertimeout-soak-"); err != nil {
			return nil, fmt.Errorf("soak: create log directory: %w", err)
		}
	} else if err := os.MkdirAll(r.logDir, 0o755); err != nil {
		return nil, fmt.Errorf("soak: create log directory: %w", err)
	}
	defer func() {
		unused := errors.Is(err, pgcluster.ErrUnsupported)
		clean := err == nil && rep != nil && rep.Violations() == 0 && !r.cfg.KeepLogs
		if tempLogs && (unused || clean) {
			_ = os.RemoveAll(r.logDir)
			r.logDir = ""
		}
	}()

	r.progressf("soak: seed %d, %s at %d orders/s, %d sidecars, timeout %s, faults %s",
		r.cfg.Seed, r.cfg.Duration, r.cfg.Rate, r.cfg.Sidecars, r.cfg.Timeout, kindsString(r.cfg.Faults, r.cfg.Sequence))
	if err := r.setUp(ctx); err != nil {
		r.tearDown()
		return nil, err
	}
	rep = r.soak(ctx)
	rep.StopErrors = r.tearDown()
	return rep, nil
}

// setUp starts the cluster, migrates it, and starts the fake gateway and
// the sidecars.
func (r *run) setUp(ctx context.Context) error {
	c, err := pgcluster.Create(ctx, pgcluster.Options{})
	if err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	r.cluster = c
	r.progressf("soak: PostgreSQL at %s (files in %s), logs in %s", c.URL(), c.Dir(), r.logDir)

	migrate := exec.CommandContext(ctx, r.cfg.Bin, "migrate", "up", "--database-url", c.URL())
	if out, err := migrate.CombinedOutput(); err != nil {
		return fmt.Errorf("soak: ordertimeout migrate up: %w\n%s", err, out)
	}

	if r.mon, err = newPool(ctx, c.URL(), 4); err != nil {
		return err
	}
	if r.prod, err = newPool(ctx, c.URL(), int32(r.cfg.Workers)); err != nil {
		return err
	}
	setup := []string{
		fmt.Sprintf("SELECT ordertimeout.put_stock('S' || g, %d) FROM generate_series(0, %d) AS g", stockPerSKU, skus-1),
		fmt.Sprintf("SELECT ordertimeout.put_points('acct' || g, %d) FROM generate_series(0, %d) AS g", pointsEach, accounts-1),
		fmt.Sprintf("SELECT ordertimeout.configure(grace => interval '0', paying_window => %d * interval '1 millisecond')",
			r.cfg.PayingWindow.Milliseconds()),
	}
	for _, sql := range setup {
		if _, err := r.mon.Exec(ctx, sql); err != nil {
			return fmt.Errorf("soak: set up database: %w", err)
		}
	}
	for i := range skus {
		r.totals["S"+strconv.Itoa(i)] = stockPerSKU
	}

	if r.fakeLog, err = os.Create(filepath.Join(r.logDir, "fakegateway.log")); err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	if r.fake, err = sidecarproc.StartFake(ctx, sidecarproc.FakeConfig{Bin: sidecarproc.FakeBinary(r.cfg.Bin), DatabaseURL: c.URL(),
		Output: r.fakeLog, Flags: []string{"--log-level", "warn"}}); err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	for i := range r.cfg.Sidecars {
		s := &slot{name: fmt.Sprintf("s%d", i+1)}
		if s.log, err = os.Create(filepath.Join(r.logDir, s.name+".log")); err != nil {
			return fmt.Errorf("soak: %w", err)
		}
		r.sidecars = append(r.sidecars, s)
	}
	for _, s := range r.sidecars {
		if err := r.startSidecar(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

func newPool(ctx context.Context, url string, size int32) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("soak: parse database URL: %w", err)
	}
	pc.MaxConns = size
	pc.ConnConfig.RuntimeParams["application_name"] = "ordertimeout-soak"
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("soak: connect: %w", err)
	}
	return pool, nil
}

// slot is one sidecar, restarted under the same name after a kill.
type slot struct {
	name string
	log  *os.File
	mu   sync.Mutex
	cur  *sidecarproc.Sidecar
	down bool  // killed on purpose, not restarted yet
	pids []int // every process that ran as this sidecar, in order
}

func (s *slot) current() (*sidecarproc.Sidecar, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur, s.down
}

func (r *run) startSidecar(ctx context.Context, s *slot) error {
	sc, err := sidecarproc.StartSidecar(ctx, sidecarproc.SidecarConfig{
		Bin:         r.cfg.Bin,
		DatabaseURL: r.cluster.URL(),
		GatewayURL:  r.fake.URL,
		Name:        s.name,
		Flags:       append(append([]string{}, sidecarFlags...), r.cfg.SidecarFlags...),
		Output:      s.log,
	})
	if err != nil {
		return fmt.Errorf("soak: start sidecar %s: %w", s.name, err)
	}
	s.mu.Lock()
	s.cur, s.down = sc, false
	s.pids = append(s.pids, sc.PID())
	s.mu.Unlock()
	return nil
}

// watchSidecars restarts a sidecar that exited although nobody killed it,
// and records the exit: a sidecar must survive every fault but a kill.
func (r *run) watchSidecars(ctx context.Context) {
	for _, s := range r.sidecars {
		sc, down := s.current()
		if down || sc == nil || sc.Running() {
			continue
		}
		msg := fmt.Sprintf("sidecar %s (pid %d) exited by itself: %v", s.name, sc.PID(), sc.Err())
		r.mu.Lock()
		r.unexpectedExits = append(r.unexpectedExits, msg)
		r.mu.Unlock()
		r.progressf("VIOLATION: %s; restarting it", msg)
		if err := r.startSidecar(ctx, s); err != nil {
			r.progressf("soak: %v", err)
		}
	}
}

// soak produces, injects faults, drains and checks.
func (r *run) soak(ctx context.Context) *Report {
	r.start = time.Now()
	produceCtx, stopProducing := context.WithCancel(ctx)
	defer stopProducing()
	// At random, faults come until Duration ends; in sequence, production
	// goes on until the last fault is over.
	faultCtx := produceCtx
	if r.cfg.Sequence {
		faultCtx = ctx
	}

	produced := make(chan struct{})
	go func() {
		defer close(produced)
		r.produce(produceCtx, ctx)
	}()
	faultsDone := make(chan struct{})
	go func() {
		defer close(faultsDone)
		r.injectFaults(faultCtx)
	}()
	monitorCtx, stopMonitor := context.WithCancel(ctx)
	monitorDone := make(chan struct{})
	go func() {
		defer close(monitorDone)
		r.monitor(monitorCtx)
	}()
	sleep(ctx, r.cfg.Duration)
	if r.cfg.Sequence {
		select {
		case <-faultsDone:
		case <-ctx.Done():
		}
		r.produceAfterLastFault(ctx)
	}
	stopProducing()
	<-produced
	<-faultsDone
	producedFor := time.Since(r.start)

	// Every sidecar runs and the gateway behaves before the drain.
	for _, s := range r.sidecars {
		if sc, down := s.current(); down || sc == nil || !sc.Running() {
			if err := r.startSidecar(ctx, s); err != nil {
				r.progressf("soak: %v", err)
			}
		}
	}
	if err := r.fake.SetGateway(ctx, sidecarproc.Normal, 0); err != nil {
		r.progressf("soak: %v", err)
	}
	r.progressf("soak: produced for %s; draining (up to %s)", producedFor.Round(time.Second), r.cfg.DrainTimeout)
	drainStart := time.Now()
	drained := r.drain(ctx)
	drain := time.Since(drainStart)
	stopMonitor()
	<-monitorDone
	r.watchSidecars(ctx)

	return r.report(context.WithoutCancel(ctx), producedFor, drain, drained)
}

// drain waits until no order is PENDING or PAYING and every conflict is
// resolved, or DrainTimeout passes. It waits at least until the last late
// payment the gateway was told of has come in.
func (r *run) drain(ctx context.Context) bool {
	start := time.Now()
	deadline := start.Add(r.cfg.DrainTimeout)
	lastLate := start.Add(r.cfg.Timeout + r.cfg.PayingWindow + 3500*time.Millisecond)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		r.watchSidecars(ctx)
		var open int64
		err := r.mon.QueryRow(ctx, `
			SELECT (SELECT count(*) FROM ordertimeout.orders WHERE status IN ('PENDING', 'PAYING'))
			     + (SELECT count(*) FROM ordertimeout.conflicts WHERE resolution IS NULL)`).Scan(&open)
		if err == nil && open == 0 && time.Now().After(lastLate) {
			return true
		}
		sleep(ctx, 500*time.Millisecond)
	}
	return false
}

// monitor prints progress, checks the invariants now and then, and
// restarts sidecars that exited by themselves.
func (r *run) monitor(ctx context.Context) {
	progress := time.NewTicker(r.cfg.ProgressEvery)
	defer progress.Stop()
	watch := time.NewTicker(time.Second)
	defer watch.Stop()
	var checks <-chan time.Time
	if r.cfg.CheckEvery > 0 {
		t := time.NewTicker(r.cfg.CheckEvery)
		defer t.Stop()
		checks = t.C
	}
	lastCreated, lastAt := int64(0), time.Now()
	var checking sync.WaitGroup
	defer checking.Wait()
	var busy atomic.Bool // a check is under way
	for {
		select {
		case <-ctx.Done():
			return
		case <-watch.C:
			r.watchSidecars(ctx)
		case <-checks:
			if busy.Swap(true) {
				continue
			}
			checking.Add(1)
			go func() {
				defer checking.Done()
				defer busy.Store(false)
				r.checkDuring(ctx)
			}()
		case now := <-progress.C:
			created := r.ledger.createdCount()
			rate := float64(created-lastCreated) / now.Sub(lastAt).Seconds()
			lastCreated, lastAt = created, now
			r.progressf("[%8s] created %d (%.0f/s) | %s | faults %d%s", time.Since(r.start).Round(time.Second),
				created, rate, r.dbLine(ctx), r.faultCount(), r.activeLine())
		}
	}
}

// dbLine summarizes the database for a progress line.
func (r *run) dbLine(ctx context.Context) string {
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var pending, paying, paid, cancelled, overdue, awaiting int64
	err := r.mon.QueryRow(qctx, `
		SELECT count(*) FILTER (WHERE status = 'PENDING'),
		       count(*) FILTER (WHERE status = 'PAYING'),
		       count(*) FILTER (WHERE status = 'PAID'),
		       count(*) FILTER (WHERE status = 'CANCELLED'),
		       count(*) FILTER (WHERE status = 'PENDING' AND check_job_id IS NULL
		                          AND cancel_at < now() - interval '1 second'),
		       count(*) FILTER (WHERE status = 'PENDING' AND check_job_id IS NOT NULL)
		FROM ordertimeout.orders`).Scan(&pending, &paying, &paid, &cancelled, &overdue, &awaiting)
	if err != nil {
		return "database unavailable"
	}
	return fmt.Sprintf("PENDING %d PAYING %d PAID %d CANCELLED %d | overdue>1s %d awaiting check %d",
		pending, paying, paid, cancelled, overdue, awaiting)
}

// checkDuring checks the invariants while work goes on (no slack: a PENDING
// order may be overdue during a fault), between two faults.
func (r *run) checkDuring(ctx context.Context) {
	r.quiet.Lock()
	defer r.quiet.Unlock()
	qctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	start := time.Now()
	// An immediate restart loses PostgreSQL's table statistics counters,
	// so autovacuum may not have analyzed the growing tables; without
	// statistics the check's plan can take minutes instead of a second.
	_, err := r.mon.Exec(qctx, "ANALYZE ordertimeout.orders, ordertimeout.order_items, ordertimeout.events, "+
		"ordertimeout.releases, ordertimeout.payments, ordertimeout.conflicts, ordertimeout.coupon_holds, "+
		"ordertimeout.points_holds, ordertimeout.stock")
	var rep invariant.Report
	if err == nil {
		rep, err = invariant.Check(qctx, r.mon, invariant.Options{StockTotals: r.totals})
	}
	took := time.Since(start)
	if ctx.Err() != nil {
		return // the run is over: the final check follows
	}
	r.mu.Lock()
	if err != nil {
		// The database is away (a fault): check next time.
		r.checksFailed++
		r.mu.Unlock()
		r.progressf("[%8s] invariant check not done (%s): %v", time.Since(r.start).Round(time.Second), took.Round(time.Millisecond), err)
		return
	}
	r.checksRun++
	var finding string
	if !rep.OK() {
		finding = fmt.Sprintf("at %s:\n%s", time.Since(r.start).Round(time.Second), rep)
		r.checkFindings = append(r.checkFindings, finding)
	}
	r.mu.Unlock()
	if finding != "" {
		r.progressf("VIOLATION during the run %s", finding)
	} else {
		r.progressf("[%8s] invariants ok (checked in %s)", time.Since(r.start).Round(time.Second), took.Round(time.Millisecond))
	}
}

// tearDown stops the sidecars (SIGTERM: each must exit 0), the fake and the
// cluster, and returns the sidecars that did not stop cleanly.
func (r *run) tearDown() []string {
	var problems []string
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, s := range r.sidecars {
		sc, _ := s.current()
		if sc == nil || !sc.Running() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := sc.Stop(30 * time.Second); err != nil {
				mu.Lock()
				problems = append(problems, err.Error())
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, s := range r.sidecars {
		if s.log != nil {
			_ = s.log.Close()
		}
	}
	if r.fake != nil {
		_ = r.fake.Stop(10 * time.Second)
	}
	if r.fakeLog != nil {
		_ = r.fakeLog.Close()
	}
	if r.prod != nil {
		r.prod.Close()
	}
	if r.mon != nil {
		r.mon.Close()
	}
	if r.cluster != nil {
		if err := r.cluster.Close(); err != nil {
			r.progressf("soak: %v", err)
		}
	}
	return problems
}

// progressf writes one line to Progress, if set.
func (r *run) progressf(format string, args ...any) {
	if r.cfg.Progress == nil {
		return
	}
	r.outMu.Lock()
	defer r.outMu.Unlock()
	line := fmt.Sprintf(format, args...)
	if !strings.HasSuffix(line, "\n") {
		line += "\n"
	}
	_, _ = io.WriteString(r.cfg.Progress, line)
}

// sleep waits for d or the end of ctx; it reports whether d passed.
// produceAfterLastFault lets production go on, in sequence, until a
// second's worth of orders (Rate) has been created since the last fault was
// over, or ctx ends: a last fault that ends after Duration would otherwise
// stop production at once, and nothing would show that orders are created
// and worked after it.
func (r *run) produceAfterLastFault(ctx context.Context) {
	r.mu.Lock()
	var after int64
	if n := len(r.faults); n > 0 {
		after = r.faults[n-1].CreatedAfter
	}
	r.mu.Unlock()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for r.ledger.createdCount() < after+int64(max(r.cfg.Rate, 1)) {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
