package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/ordertimeout/ordertimeout/sidecar/sidecarproc"
	"github.com/ordertimeout/ordertimeout/tests/internal/pgcluster"
)

// Kind is a kind of fault.
type Kind string

// The kinds of fault.
const (
	// KillSidecar kills a sidecar with SIGKILL, waits 0.5–2 s and starts
	// it again.
	KillSidecar Kind = "kill-sidecar"
	// TerminateConnections ends a sidecar's pool connections and every
	// LISTEN connection with pg_terminate_backend.
	TerminateConnections Kind = "terminate-connections"
	// RestartFast restarts PostgreSQL with shutdown mode fast.
	RestartFast Kind = "pg-restart-fast"
	// RestartImmediate restarts PostgreSQL with shutdown mode immediate
	// (a crash; the start recovers from the WAL).
	RestartImmediate Kind = "pg-restart-immediate"
	// GatewayDown makes the gateway answer 503 for 2–5 s.
	GatewayDown Kind = "gateway-down"
	// GatewaySlow makes the gateway answer after 1–3 s for 2–5 s (the
	// sidecars time out after 2 s).
	GatewaySlow Kind = "gateway-slow"
)

// AllKinds lists every kind of fault.
var AllKinds = []Kind{KillSidecar, TerminateConnections, RestartFast, RestartImmediate, GatewayDown, GatewaySlow}

// ParseKinds reads a comma-separated list of kinds; "all" means AllKinds,
// "none" or "" none.
func ParseKinds(s string) ([]Kind, error) {
	switch s {
	case "all":
		return AllKinds, nil
	case "none", "":
		return []Kind{}, nil
	}
	var kinds []Kind
	for _, name := range strings.Split(s, ",") {
		k := Kind(strings.TrimSpace(name))
		if !slices.Contains(AllKinds, k) {
			return nil, fmt.Errorf("unknown fault %q: want all, none, or some of %s", name, kindsString(AllKinds, false))
		}
		kinds = append(kinds, k)
	}
	return kinds, nil
}

func kindsString(kinds []Kind, sequence bool) string {
	if len(kinds) == 0 {
		return "none"
	}
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = string(k)
	}
	s := strings.Join(names, ",")
	if sequence {
		s += " (once each, in order)"
	}
	return s
}

// recoveryTimeout bounds the wait for the overdue backlog to clear after a
// PostgreSQL restart.
const recoveryTimeout = 2 * time.Minute

// FaultRecord is one injected fault.
type FaultRecord struct {
	Kind   Kind
	Start  time.Time // when it began
	End    time.Time // when it was undone (the sidecar restarted, PostgreSQL accepting connections, the gateway normal again)
	Detail string

	// Recovery is, for a PostgreSQL restart, the time from End until no
	// PENDING order is overdue by more than a second any more; Recovered
	// says it got there within two minutes.
	Recovery  time.Duration
	Recovered bool

	// CreatedAfter is how many orders had been created when the fault was
	// over (and recovered from).
	CreatedAfter int64

	// Failed says the fault could not be injected or undone (Detail says
	// why), e.g. a killed sidecar that would not start again.
	Failed bool
}

// until is when the fault's effects may still show in the cancel lag.
func (f *FaultRecord) until(tail time.Duration) time.Time {
	return f.End.Add(f.Recovery + tail)
}

// injectFaults injects faults until ctx ends: drawn at random (seeded), or
// each kind once with Sequence. A fault under way when ctx ends is undone.
func (r *run) injectFaults(ctx context.Context) {
	if len(r.cfg.Faults) == 0 {
		return
	}
	rng := rand.New(rand.NewPCG(r.cfg.Seed, 0x5eed))
	for i := 0; ; i++ {
		if r.cfg.Sequence && i >= len(r.cfg.Faults) {
			return
		}
		pause := r.cfg.FaultEvery/2 + time.Duration(rng.Int64N(int64(r.cfg.FaultEvery)+1))
		if !sleep(ctx, pause) {
			return
		}
		kind := r.cfg.Faults[rng.IntN(len(r.cfg.Faults))]
		if r.cfg.Sequence {
			kind = r.cfg.Faults[i]
		}
		r.quiet.Lock()
		if ctx.Err() != nil {
			r.quiet.Unlock()
			return
		}
		f := &FaultRecord{Kind: kind, Start: time.Now()}
		r.mu.Lock()
		r.faults = append(r.faults, f)
		r.activeFault = f
		r.mu.Unlock()
		f.Detail = r.inject(ctx, rng, f)
		f.Failed = strings.Contains(f.Detail, "FAILED")
		if f.End.IsZero() {
			f.End = time.Now()
		}
		if kind == RestartFast || kind == RestartImmediate {
			r.awaitRecovery(f)
		}
		f.CreatedAfter = r.ledger.createdCount()
		r.quiet.Unlock()
		r.mu.Lock()
		r.activeFault = nil
		r.mu.Unlock()
		r.progressf("[%8s] fault %s: %s (%s)%s", f.Start.Sub(r.start).Round(time.Second), f.Kind, f.Detail,
			f.End.Sub(f.Start).Round(time.Millisecond), recoveryNote(f))
	}
}

func recoveryNote(f *FaultRecord) string {
	if f.Kind != RestartFast && f.Kind != RestartImmediate {
		return ""
	}
	if !f.Recovered {
		return fmt.Sprintf("; NOT recovered within %s", recoveryTimeout)
	}
	return fmt.Sprintf("; backlog clear %s after", f.Recovery.Round(time.Millisecond))
}

// inject carries out one fault and undoes it; it returns what it did.
func (r *run) inject(ctx context.Context, rng *rand.Rand, f *FaultRecord) string {
	// Undoing must happen even when ctx has ended.
	undo := context.WithoutCancel(ctx)
	switch f.Kind {
	case KillSidecar:
		s := r.sidecars[rng.IntN(len(r.sidecars))]
		sc, _ := s.current()
		s.mu.Lock()
		s.down = true
		s.mu.Unlock()
		_ = sc.Kill()
		down := 500*time.Millisecond + time.Duration(rng.Int64N(int64(1500*time.Millisecond)))
		sleep(ctx, down)
		if err := r.startSidecar(undo, s); err != nil {
			return fmt.Sprintf("killed %s (pid %d); restart FAILED: %v", s.name, sc.PID(), err)
		}
		return fmt.Sprintf("killed %s (pid %d), restarted after %s", s.name, sc.PID(), down.Round(time.Millisecond))

	case TerminateConnections:
		s := r.sidecars[rng.IntN(len(r.sidecars))]
		var n int64
		err := r.mon.QueryRow(undo, `
			SELECT count(pg_terminate_backend(pid))
			FROM pg_stat_activity
			WHERE application_name IN ($1, $2)`,
			sidecarproc.PoolApplicationName(s.name), sidecarproc.ListenerName).Scan(&n)
		if err != nil {
			return fmt.Sprintf("terminate connections of %s FAILED: %v", s.name, err)
		}
		return fmt.Sprintf("terminated %d connections (%s's pool, every LISTEN)", n, s.name)

	case RestartFast, RestartImmediate:
		mode := pgcluster.Fast
		if f.Kind == RestartImmediate {
			mode = pgcluster.Immediate
		}
		if err := r.cluster.Restart(undo, mode); err != nil {
			// Leave nothing down: try to start it.
			_ = r.cluster.Start(undo)
			return fmt.Sprintf("restart (%s) FAILED: %v", mode, err)
		}
		f.End = time.Now()
		return fmt.Sprintf("restarted PostgreSQL (%s), down %s", mode, f.End.Sub(f.Start).Round(time.Millisecond))

	case GatewayDown, GatewaySlow:
		hold := 2*time.Second + time.Duration(rng.Int64N(int64(3*time.Second)))
		behaviour, delay := sidecarproc.Down, time.Duration(0)
		if f.Kind == GatewaySlow {
			behaviour, delay = sidecarproc.Slow, time.Second+time.Duration(rng.Int64N(int64(2*time.Second)))
		}
		if err := r.fake.SetGateway(undo, behaviour, delay); err != nil {
			return fmt.Sprintf("gateway %s FAILED: %v", behaviour, err)
		}
		sleep(ctx, hold)
		err := r.fake.SetGateway(undo, sidecarproc.Normal, 0)
		f.End = time.Now()
		what := fmt.Sprintf("gateway %s for %s", behaviour, f.End.Sub(f.Start).Round(time.Millisecond))
		if delay > 0 {
			what += fmt.Sprintf(" (answers after %s)", delay.Round(time.Millisecond))
		}
		if err != nil {
			what += fmt.Sprintf("; back to normal FAILED: %v", err)
		}
		return what
	}
	return "unknown fault"
}

// awaitRecovery waits until no PENDING order without a gateway check is
// overdue by more than a second (what a working sweeper never leaves), and
// records how long that took after the restart.
func (r *run) awaitRecovery(f *FaultRecord) {
	deadline := f.End.Add(recoveryTimeout)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var overdue int64
		err := r.mon.QueryRow(ctx, `
			SELECT count(*) FROM ordertimeout.orders
			WHERE status = 'PENDING' AND check_job_id IS NULL AND cancel_at < now() - interval '1 second'`).Scan(&overdue)
		cancel()
		if err == nil && overdue == 0 {
			f.Recovery, f.Recovered = time.Since(f.End), true
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	f.Recovery = time.Since(f.End)
}

func (r *run) faultCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.faults)
}

func (r *run) activeLine() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.activeFault == nil {
		return ""
	}
	return fmt.Sprintf(" (now: %s)", r.activeFault.Kind)
}
