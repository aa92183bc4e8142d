package fault

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/sidecarproc"
	"github.com/ordertimeout/ordertimeout/tests/internal/outcome"
)

// skewEnv is the environment variable the skewed binary reads: a Go duration
// added to its wall clock ("10m", "-10m").
const skewEnv = "ORDERTIMEOUT_TEST_CLOCK_SKEW"

// nowPatch is the start of time.Now in Go's time package, which the overlay
// changes so that Now adds the skew to the wall clock.
const nowPatch = "\tsec, nsec, mono := runtimeNow()\n\tif mono == 0 {"

// skewFile is added to package time by the overlay.
const skewFile = `package time

import "syscall"

// clockSkew is added to the wall clock by Now: the value of $` + skewEnv + `,
// for the clock-skew fault test only.
var clockSkew = func() int64 {
	v, ok := syscall.Getenv("` + skewEnv + `")
	if !ok || v == "" {
		return 0
	}
	d, err := ParseDuration(v)
	if err != nil {
		panic("` + skewEnv + `: " + err.Error())
	}
	return int64(d / Second)
}()
`

// skewedBinary builds the ordertimeout binary with a time package whose Now
// adds $ORDERTIMEOUT_TEST_CLOCK_SKEW to the wall clock (go build -overlay).
//
// Go reads the clock through the vDSO, not through libc, so faketime and
// LD_PRELOAD cannot skew a Go program, and the system clock is shared with
// PostgreSQL on this machine. Patching time.Now skews every wall-clock
// reading of the sidecar — its own code, River's, pgx's — exactly as a
// badly set system clock would, while the monotonic clock (timers, sleeps,
// durations) stays true, as it does on a machine whose wall clock is off.
func skewedBinary(t *testing.T) string {
	t.Helper()
	bin, err := buildSkewedOnce()
	require.NoError(t, err)
	return bin
}

var buildSkewedOnce = sync.OnceValues(func() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	return buildSkewed(ctx)
})

func buildSkewed(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOROOT").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOROOT: %w", err)
	}
	timeDir := filepath.Join(strings.TrimSpace(string(out)), "src", "time")
	src, err := os.ReadFile(filepath.Join(timeDir, "time.go"))
	if err != nil {
		return "", fmt.Errorf("read time.Now: %w", err)
	}
	if strings.Count(string(src), nowPatch) != 1 {
		return "", fmt.Errorf("time.Now of this Go version does not start as expected (%q): update the overlay in skew_test.go", nowPatch)
	}
	patched := strings.Replace(string(src), nowPatch,
		"\tsec, nsec, mono := runtimeNow()\n\tsec += clockSkew\n\tif mono == 0 {", 1)

	dir := filepath.Join(binDir, "skew")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	files := map[string]string{"time.go": patched, "zz_skew.go": skewFile}
	replace := map[string]string{}
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return "", err
		}
		replace[filepath.Join(timeDir, name)] = path
	}
	overlay, err := json.Marshal(map[string]any{"Replace": replace})
	if err != nil {
		return "", err
	}
	overlayPath := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(overlayPath, overlay, 0o644); err != nil {
		return "", err
	}
	return sidecarproc.Build(ctx, dir, "-overlay", overlayPath)
}

// clientIDTime matches the time in River's client id, which River takes
// from the wall clock when the client starts (hostname_2006_01_02T15_04_05_000000).
var clientIDTime = regexp.MustCompile(`client_id=\S*_(\d{4}_\d{2}_\d{2}T\d{2}_\d{2}_\d{2}_\d{6})`)

// sidecarClock returns how far the sidecar's wall clock is from the
// database's, read from River's client id in its log.
func (e *env) sidecarClock(s *sidecar) time.Duration {
	e.t.Helper()
	var m []string
	eventually(e.t, 10*time.Second, "River's client id in the log", func() bool {
		m = clientIDTime.FindStringSubmatch(s.out.String())
		return m != nil
	})
	stamp := m[1][:19] + "." + m[1][20:] // the fraction's separator is "_"
	at, err := time.Parse("2006_01_02T15_04_05.000000", stamp)
	require.NoError(e.t, err)
	var db time.Time
	require.NoError(e.t, e.db.QueryRow(context.Background(), "SELECT clock_timestamp()").Scan(&db))
	return at.Sub(db)
}

// The sidecar's wall clock 10 minutes fast, then 10 minutes slow, while
// PostgreSQL's is right: timeouts are still cancelled on time by the
// database's clock, never early, exactly once.
//
// What makes this a proof: the sidecar binary is built with a time.Now that
// adds the skew (see skewedBinary), and the test first reads the skew back
// from the running sidecar (River's client id carries its start time). An
// order due in 5 minutes would be cancelled at once if any deadline came
// from a sidecar 10 minutes fast; the cancels of the short orders would be
// 10 minutes late if any came from a sidecar 10 minutes slow. Neither
// happens: cancel lateness stays within the sweep's pause, because the
// sweeper's only time decisions are plan_next_sweep's wake-up and
// clock_timestamp(), both read from the database in one query, and their
// difference is slept with the monotonic clock.
//
// Work River schedules is covered by TestClockSkewRiverSchedule.
func TestClockSkew(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the sidecar with a patched time package: not in -short mode")
	}
	bin := skewedBinary(t)
	for _, skew := range []time.Duration{10 * time.Minute, -10 * time.Minute} {
		t.Run(skew.String(), func(t *testing.T) {
			t.Parallel()
			e := newTestEnv(t)
			ctx := t.Context()
			s := e.startSidecarBin(bin, "skew", []string{skewEnv + "=" + skew.String()})
			measured := e.sidecarClock(s)
			t.Logf("the sidecar's wall clock is %s off the database's", measured.Round(time.Second))
			require.InDelta(t, skew.Seconds(), measured.Seconds(), 30, "the skew must be in effect")

			// 120 orders due within 0.3–3.3 s, 20 due in 5 minutes.
			const short, long = 120, 20
			shortIDs := ids("short", short)
			for i, id := range shortIDs {
				e.createOrder(id, 300*time.Millisecond+time.Duration(i)*25*time.Millisecond, "")
			}
			e.createMany("long", long, 5*time.Minute, "")
			eventually(t, 30*time.Second, "every short order cancelled", func() bool {
				return e.count("SELECT count(*) FROM ordertimeout.orders WHERE order_id LIKE 'short%' AND status = 'CANCELLED'") == short
			})
			var early, p99, maxLate float64
			require.NoError(t, e.db.QueryRow(ctx, `
				SELECT count(*) FILTER (WHERE o.cancelled_at < o.cancel_at),
				       extract(epoch FROM percentile_disc(0.99) WITHIN GROUP (ORDER BY l.lateness)),
				       extract(epoch FROM max(l.lateness))
				FROM ordertimeout.cancel_lag AS l
				JOIN ordertimeout.orders AS o ON o.order_id = l.order_id`).Scan(&early, &p99, &maxLate))
			t.Logf("cancel lateness: p99 %.3fs, max %.3fs", p99, maxLate)
			require.Zero(t, early, "no order cancelled before its cancel_at")
			require.Less(t, maxLate, 3.0, "cancels on time by the database's clock (the sweep pauses at most 1 s)")
			// Let the sweeper sleep and wake a few more times.
			time.Sleep(2 * time.Second)
			require.EqualValues(t, long, e.count("SELECT count(*) FROM ordertimeout.orders WHERE order_id LIKE 'long%' AND status = 'PENDING'"),
				"orders due in 5 minutes are not cancelled early")
			require.Zero(t, e.count(`SELECT count(*) FROM ordertimeout.events
			   WHERE at > clock_timestamp() OR at < clock_timestamp() - interval '1 minute'`),
				"every event carries the database's time")
			require.True(t, s.Running())

			e.check(0, outcome.Expect{Created: append(ids("long", long), shortIDs...), Cancelled: shortIDs})
		})
	}
}

// A gateway check snoozed while the gateway is down must come back about a
// second later by the database's clock, whatever the sidecar's clock says;
// and a job whose sidecar died must be handed back --rescue-after after it
// started by the database's clock, never while it is still being worked.
//
// River computes a snoozed or retried job's next run from its time
// generator, and its rescuer's "stuck since" horizon from the host's wall
// clock. Left alone, a sidecar 10 minutes fast would bring a snoozed check
// back 10 minutes late (the order overdue all that time) and rescue every
// running check at once (a second worker asking the gateway while the first
// still waits); 10 minutes slow, a snooze would be over before it started (a
// tight loop against a down gateway) and a dead sidecar's checks would wait
// 10 minutes for rescue. The sidecar gives River the database's time
// (package dbclock) and rescues its jobs by the database's clock (package
// rescue); this test proves each of these cases does not happen.
func TestClockSkewRiverSchedule(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the sidecar with a patched time package: not in -short mode")
	}
	bin := skewedBinary(t)
	skews := []time.Duration{0, 10 * time.Minute, -10 * time.Minute}
	for _, skew := range skews {
		t.Run("snooze/"+skew.String(), func(t *testing.T) {
			t.Parallel()
			e := newTestEnv(t)
			ctx := t.Context()
			s := e.startSidecarBin(bin, "skew", []string{skewEnv + "=" + skew.String()})
			t.Logf("the sidecar's wall clock is %s off the database's", e.sidecarClock(s).Round(time.Second))

			require.NoError(t, e.fake.SetGateway(ctx, sidecarproc.Down, 0))
			e.createOrder("checked", 300*time.Millisecond, `{"precheck": "always"}`)
			eventually(t, 30*time.Second, "the check snoozed", func() bool {
				return e.count(`SELECT count(*) FROM river_job WHERE kind = 'ordertimeout_precancel_check'
				                 AND (metadata->>'snoozes')::int >= 1`) == 1
			})
			var ahead float64
			require.NoError(t, e.db.QueryRow(ctx, `SELECT extract(epoch FROM scheduled_at - clock_timestamp())
			   FROM river_job WHERE kind = 'ordertimeout_precancel_check'`).Scan(&ahead))
			// An observation window, not a synchronization: snoozes of 1, 2,
			// 4 s... make about 3 in 6 s; a tight loop would make dozens.
			time.Sleep(6 * time.Second)
			snoozes := e.count(`SELECT (metadata->>'snoozes')::int FROM river_job WHERE kind = 'ordertimeout_precancel_check'`)
			t.Logf("after the first snooze the check was due in %.1fs; 6 s later it had snoozed %d times", ahead, snoozes)
			require.NoError(t, e.fake.SetGateway(ctx, sidecarproc.Normal, 0))

			require.Less(t, ahead, 30.0, "a snooze of seconds must not last minutes")
			require.Greater(t, ahead, 0.0, "a snooze must end in the future, or it is no pause at all")
			require.LessOrEqual(t, snoozes, int64(4), "a snoozed check must not ask the down gateway in a tight loop")
			e.waitStatus("checked", "CANCELLED", 30*time.Second)
		})
	}
	for _, skew := range skews {
		t.Run("rescue/"+skew.String(), func(t *testing.T) {
			t.Parallel()
			e := newTestEnv(t)
			ctx := t.Context()
			environ := []string{skewEnv + "=" + skew.String()}
			const rescueAfter = 20 * time.Second
			flags := []string{"--gateway-timeout", "90s", "--job-timeout", rescueAfter.String(), "--rescue-after", rescueAfter.String()}
			e.createOrder("slow", 300*time.Millisecond, `{"precheck": "always"}`)
			require.NoError(t, e.fake.SetOrder(ctx, "slow", sidecarproc.Behaviour{Behaviour: sidecarproc.Slow, DelayMS: 60_000}))
			first := e.startSidecarBin(bin, "skew1", environ, flags...)
			t.Logf("the sidecar's wall clock is %s off the database's", e.sidecarClock(first).Round(time.Second))
			running := `SELECT count(*) FROM river_job WHERE kind = 'ordertimeout_precancel_check' AND state = 'running'`
			eventually(t, 30*time.Second, "the check running", func() bool { return e.count(running) == 1 })
			var attemptedAt time.Time
			require.NoError(t, e.db.QueryRow(ctx, `SELECT attempted_at FROM river_job
			   WHERE kind = 'ordertimeout_precancel_check'`).Scan(&attemptedAt))

			// An observation window: the leader's River rescuer runs at once
			// and the database-clock rescue every 5 s; a check still being
			// worked must not be taken from its worker.
			time.Sleep(rescueAfter / 2)
			require.EqualValues(t, 1, e.count(running), "a check running for half of --rescue-after is not rescued")
			require.Zero(t, e.count(`SELECT count(*) FROM river_job WHERE kind = 'ordertimeout_precancel_check'
			   AND errors IS NOT NULL`), "nothing recorded on the running check")

			// Its sidecar dies; another (as skewed) must rescue it by the
			// database's clock, rescueAfter after it started.
			require.NoError(t, first.Kill())
			require.NoError(t, e.fake.SetOrder(ctx, "slow", sidecarproc.Behaviour{Behaviour: sidecarproc.Instant}))
			e.startSidecarBin(bin, "skew2", environ, flags...)
			e.waitStatus("slow", "CANCELLED", 60*time.Second)
			var rescuedAfter float64
			require.NoError(t, e.db.QueryRow(ctx, `SELECT extract(epoch FROM (errors[1]->>'at')::timestamptz - $1)
			   FROM river_job WHERE kind = 'ordertimeout_precancel_check'
			    AND errors[1]->>'error' LIKE 'Stuck job rescued%'`, attemptedAt).Scan(&rescuedAfter))
			t.Logf("the dead sidecar's check was rescued %.1fs after it started (--rescue-after %s)", rescuedAfter, rescueAfter)
			require.GreaterOrEqual(t, rescuedAfter, rescueAfter.Seconds(), "not rescued before --rescue-after")
			require.Less(t, rescuedAfter, rescueAfter.Seconds()+20, "rescued soon after --rescue-after, by the database's clock")
			e.check(0, outcome.Expect{Created: []string{"slow"}, Cancelled: []string{"slow"}})
		})
	}
}
