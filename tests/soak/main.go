// Command soak runs ordertimeout for a long while under load and random
// faults, then reports what happened and whether anything was lost, done
// twice or left undone (`make soak`).
//
// It starts its own PostgreSQL cluster (so that it can restart it), migrates
// it with `ordertimeout migrate up`, starts the fake gateway and the sidecars,
// creates orders at --rate per second (half paid 50–500 ms after
// begin_payment through the gateway's callback, some paid silently, some paid
// late, some declined, the rest never paid; timeout --timeout, grace 0), and
// every few seconds injects a fault chosen at random from --faults: kill -9 of
// a sidecar (and a restart), pg_terminate_backend of a sidecar's connections,
// a PostgreSQL restart (fast or immediate), the gateway down or slow for a
// while. The seed is printed; --seed replays a run's choices.
//
// It prints a progress line every --progress and a line per fault, then the
// report: orders by scenario and final state, faults by kind, each
// PostgreSQL restart and how long the backlog took to clear, the cancel lag
// during and outside faults (database timestamps), the invariants after the
// drain and "nothing lost, nothing twice". It exits 1 on any violation.
//
//	soak [--duration 10m] [--rate 1000] [--seed N] [--faults all] [--bin bin/ordertimeout]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ordertimeout/ordertimeout/sidecar/sidecarproc"
	"github.com/ordertimeout/ordertimeout/tests/internal/soak"
)

// errViolations is returned when the run found a violation.
var errViolations = errors.New("the soak found violations")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := realMain(ctx, os.Args[1:], os.Stdout)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

// realMain parses args, runs the soak and prints its progress and report to
// out.
func realMain(ctx context.Context, args []string, out io.Writer) error {
	var (
		cfg    soak.Config
		bin    string
		faults string
		seed   uint64
	)
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&bin, "bin", "", "the ordertimeout binary, with ordertimeout-fakegateway next to it (default: build both into a temporary directory)")
	fs.DurationVar(&cfg.Duration, "duration", soak.DefaultDuration, "how long to produce orders and inject faults (the drain comes after)")
	fs.IntVar(&cfg.Rate, "rate", soak.DefaultRate, "orders created per second")
	fs.Uint64Var(&seed, "seed", 0, "seed of the run's random choices (0: a random seed, printed)")
	fs.IntVar(&cfg.Sidecars, "sidecars", soak.DefaultSidecars, "sidecars running at once")
	fs.DurationVar(&cfg.Timeout, "timeout", soak.DefaultTimeout, "every order's payment window (grace is 0)")
	fs.DurationVar(&cfg.PayingWindow, "paying-window", soak.DefaultPayingWindow, "how long a started payment runs before the sidecar asks the gateway")
	fs.IntVar(&cfg.Workers, "workers", soak.DefaultWorkers, "orders being created at once (database connections of the producer)")
	fs.StringVar(&faults, "faults", "all", "faults to draw from: all, none, or a comma-separated list of kill-sidecar, terminate-connections, pg-restart-fast, pg-restart-immediate, gateway-down, gateway-slow")
	fs.BoolVar(&cfg.Sequence, "sequence", false, "inject each fault of --faults once, in order, instead of at random")
	fs.DurationVar(&cfg.FaultEvery, "fault-every", soak.DefaultFaultEvery, "mean pause between faults")
	fs.DurationVar(&cfg.FaultTail, "fault-tail", soak.DefaultFaultTail, "how long after a fault (and its recovery) a cancel still counts as during the fault")
	fs.DurationVar(&cfg.Slack, "slack", soak.DefaultSlack, "how far past cancel_at a PENDING order may be in the final check")
	fs.DurationVar(&cfg.DrainTimeout, "drain-timeout", soak.DefaultDrainTimeout, "longest wait for every order to finish after --duration")
	fs.DurationVar(&cfg.CheckEvery, "check-every", soak.DefaultCheckEvery, "how often the invariants are checked during the run (negative: never)")
	fs.DurationVar(&cfg.ProgressEvery, "progress", soak.DefaultProgressEvery, "how often a progress line is printed")
	fs.StringVar(&cfg.LogDir, "log-dir", "", "where the processes' logs go (default: a temporary directory, kept only on a violation)")
	fs.BoolVar(&cfg.KeepLogs, "keep-logs", false, "keep the logs' temporary directory even without a violation")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: soak [flags]\n\nRuns ordertimeout under load and random faults on a private PostgreSQL, then\nreports; exits 1 on a violation. Flags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	kinds, err := soak.ParseKinds(faults)
	if err != nil {
		return err
	}
	cfg.Faults, cfg.Seed, cfg.Progress = kinds, seed, out

	if bin == "" {
		dir, err := os.MkdirTemp("", "ordertimeout-soak-bin-")
		if err != nil {
			return fmt.Errorf("create build directory: %w", err)
		}
		defer os.RemoveAll(dir)
		fmt.Fprintln(out, "soak: building the ordertimeout binary")
		buildCtx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		bin, err = sidecarproc.Build(buildCtx, dir)
		cancel()
		if err != nil {
			return err
		}
	}
	cfg.Bin = bin

	rep, err := soak.Run(ctx, cfg)
	if err != nil {
		return err
	}
	rep.Print(out)
	if rep.Violations() > 0 {
		return errViolations
	}
	return nil
}
