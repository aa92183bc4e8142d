package fault

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/migrations"
	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
	"github.com/ordertimeout/ordertimeout/sidecar/sidecarproc"
)

// TestMigrateKilledAtRandomMoments kills `ordertimeout migrate up` (kill -9)
// again and again, each time once golang-migrate has marked a version drawn
// at random (and a random 0–20 ms later), from 000009 to the newest; then
// `migrate down` the same way. The next `migrate up` after each kill must
// settle the dirty mark, whether the killed migration had committed or not
// (both happen: a migration sent runs to its end unless PostgreSQL notices
// the client is gone first), and the last one must end at the newest version
// with the schema the migrations build (its fingerprint). Before, each kill
// needed a person's `migrate force`, and guessing wrong ran a migration
// twice. The seed is logged; FAULT_SEED replays one.
func TestMigrateKilledAtRandomMoments(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	bin := binary(t)
	db := pgtest.NewPool(t)
	url := pgtest.URL(t, db)
	versions, err := migrations.Versions()
	require.NoError(t, err)
	latest := int(versions[len(versions)-1])

	seed := rand.Uint64()
	if s := os.Getenv("FAULT_SEED"); s != "" {
		seed, err = strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
	}
	t.Logf("seed %d (FAULT_SEED replays it)", seed)
	rng := rand.New(rand.NewPCG(seed, 0))

	migrate := func(args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, bin, append(append([]string{"migrate"}, args...), "--database-url", url)...).CombinedOutput()
		return string(out), err
	}
	out, err := migrate("down", strconv.Itoa(latest-9), "--drop-data")
	require.NoError(t, err, out)

	mark := func() (int, bool) {
		var v int
		var dirty bool
		err := db.QueryRow(ctx, "SELECT coalesce(max(version), 0), coalesce(bool_or(dirty), false) FROM schema_migrations").Scan(&v, &dirty)
		require.NoError(t, err)
		return v, dirty
	}
	// settled counts what the ups found of the marks left dirty, from their
	// log lines: the killed migration committed, or not.
	settled := map[string]int{}
	count := func(out string) {
		for _, what := range []string{"committed (told", "did not commit"} {
			settled[what] += strings.Count(out, what)
		}
	}
	// killAt starts migrate with args and kills it once the mark says
	// reached, then a random 0-20 ms later; it reports whether the kill
	// came before migrate ended by itself.
	killAt := func(reached func(v int) bool, args ...string) bool {
		t.Helper()
		cmd := exec.Command(bin, append(append([]string{"migrate"}, args...), "--database-url", url)...)
		buf := &sidecarproc.Buffer{}
		cmd.Stdout, cmd.Stderr = buf, buf
		require.NoError(t, cmd.Start())
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		deadline := time.After(2 * time.Minute)
		for {
			select {
			case err := <-done:
				require.NoError(t, err, "migrate %v ended before the kill: %s", args, buf.String())
				count(buf.String())
				return false
			case <-deadline:
				_ = cmd.Process.Kill()
				t.Fatalf("migrate %v did not reach the version to kill it at within 2 min: %s", args, buf.String())
			default:
			}
			if v, _ := mark(); reached(v) {
				break
			}
			time.Sleep(time.Millisecond) // a poll of the mark, not a wait for an event
		}
		time.Sleep(time.Duration(rng.IntN(21)) * time.Millisecond)
		require.NoError(t, cmd.Process.Kill())
		<-done
		count(buf.String())
		return true
	}

	kills, dirtyAfter := 0, 0
	for v := 9; v < latest; {
		target := v + 1 + rng.IntN(min(8, latest-v))
		if killAt(func(m int) bool { return m >= target }, "up") {
			kills++
		}
		if _, dirty := mark(); dirty {
			dirtyAfter++
		}
		// A dirty mark is settled by the next up: here, by the next
		// round's, once the killed client's backend has let go of the lock.
		// The next target is past the mark, wherever the kill left it.
		m, _ := mark()
		v = max(target, m)
	}
	out, err = migrate("up")
	require.NoError(t, err, "the up after the last kill going up: %s", out)
	count(out)
	// And rolling back, killed the same way, then up to the newest.
	for range 4 {
		from, _ := mark()
		target := from - 1 - rng.IntN(5)
		if killAt(func(m int) bool { return m <= target }, "down", "8", "--drop-data") {
			kills++
		}
		if _, dirty := mark(); dirty {
			dirtyAfter++
		}
		out, err := migrate("up")
		require.NoError(t, err, "the up after a killed down: %s", out)
		count(out)
	}
	out, err = migrate("up")
	require.NoError(t, err, "the up after the last kill: %s", out)
	count(out)
	t.Logf("%d kills, %d of them left the mark dirty; settled: %d committed, %d not",
		kills, dirtyAfter, settled["committed (told"], settled["did not commit"])

	v, dirty := mark()
	require.Equal(t, latest, v)
	require.False(t, dirty)
	requireSchemaOf(ctx, t, db, latest)
	require.Positive(t, kills, "some migrate was killed before it ended")
}

// requireSchemaOf fails unless the database's schema is the one the
// migrations build at version.
func requireSchemaOf(ctx context.Context, t *testing.T, db *pgxpool.Pool, version int) {
	t.Helper()
	fps, err := migrations.Fingerprints()
	require.NoError(t, err)
	fp, err := migrations.Fingerprint(ctx, db)
	require.NoError(t, err)
	require.Equal(t, fps[uint(version)], fp, fmt.Sprintf("the schema is version %d's", version))
}

// TestMigrateKilledWhileItWaitsForALock makes both outcomes of a killed
// migration happen on purpose, which the random kills above leave to
// chance. `migrate up` runs migration 000059 while this test holds
// ordertimeout.payments, which it alters, so that it waits with version 59
// marked dirty. Then either:
//   - the test lets the table go while holding schema_migrations instead:
//     the migration commits, and golang-migrate's clean mark (a TRUNCATE of
//     schema_migrations) waits; migrate is killed (kill -9) there, and its
//     backend, which checks its client every second
//     (client_connection_check_interval), ends without the mark: committed,
//     marked dirty;
//   - or migrate is killed while the migration waits, and its backend ends
//     (its client check, or pg_terminate_backend if that has not come yet,
//     as a crash of the server would): the migration never commits.
//
// The next `migrate up` must say which happened and end at the newest
// version with its schema.
func TestMigrateKilledWhileItWaitsForALock(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	versions, err := migrations.Versions()
	require.NoError(t, err)
	latest := int(versions[len(versions)-1])
	const blocked = 59 // 000059 alters ordertimeout.payments

	for _, tc := range []struct {
		name      string
		committed bool   // kill once the migration has committed
		says      string // what the next up logs of the mark
	}{
		{"after its commit", true, "committed (told"},
		{"while it waits, its backend ended", false, "did not commit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			db := pgtest.NewPool(t)
			url := pgtest.URL(t, db)
			migrate := func(args ...string) string {
				t.Helper()
				out, err := exec.CommandContext(ctx, bin, append(append([]string{"migrate"}, args...), "--database-url", url)...).CombinedOutput()
				require.NoError(t, err, "migrate %v: %s", args, out)
				return string(out)
			}
			migrate("down", strconv.Itoa(latest-blocked+1), "--drop-data")
			hold := func(table string) pgx.Tx {
				t.Helper()
				tx, err := db.Begin(ctx)
				require.NoError(t, err)
				t.Cleanup(func() { _ = tx.Rollback(context.WithoutCancel(ctx)) })
				_, err = tx.Exec(ctx, "LOCK TABLE "+table+" IN ACCESS SHARE MODE")
				require.NoError(t, err)
				return tx
			}
			// waiter is the backend waiting for a lock on table in this
			// database, if any (read from pg_locks alone: a read of
			// schema_migrations would queue behind a TRUNCATE waiting for
			// it). The database is named: the other subtest's, cloned from
			// the same template, has its tables under the same oids.
			waiter := func(table string) (int, bool) {
				var pid int
				err := db.QueryRow(ctx, `
					SELECT l.pid FROM pg_locks AS l
					 WHERE NOT l.granted AND l.relation = $1::regclass
					   AND l.database = (SELECT d.oid FROM pg_database AS d WHERE d.datname = current_database())`, table).Scan(&pid)
				return pid, err == nil
			}
			markedDirty := func() bool {
				var n int
				require.NoError(t, db.QueryRow(ctx, "SELECT count(*) FROM schema_migrations WHERE version = $1 AND dirty", blocked).Scan(&n))
				return n == 1
			}
			payments := hold("ordertimeout.payments")

			cmd := exec.Command(bin, "migrate", "up", "--database-url", url)
			buf := &sidecarproc.Buffer{}
			cmd.Stdout, cmd.Stderr = buf, buf
			require.NoError(t, cmd.Start())
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			var pid int
			eventually(t, time.Minute, "the migration to wait for the held table, version 59 marked dirty", func() bool {
				p, ok := waiter("ordertimeout.payments")
				pid = p
				return ok && markedDirty()
			})
			var marks pgx.Tx
			if tc.committed {
				marks = hold("schema_migrations")
				require.NoError(t, payments.Rollback(ctx))
				// The clean mark may come on another connection of the
				// client's than the migration's: the one to see end is its.
				eventually(t, time.Minute, "the migration to commit and its clean mark to wait", func() bool {
					p, ok := waiter("schema_migrations")
					pid = p
					return ok
				})
			}
			require.NoError(t, cmd.Process.Kill())
			<-done
			if !tc.committed {
				// The backend's own client check (every second) may have
				// ended it already: then there is nothing to terminate.
				_, err := db.Exec(ctx, "SELECT pg_terminate_backend(a.pid) FROM pg_stat_activity AS a WHERE a.pid = $1", pid)
				require.NoError(t, err)
			}
			eventually(t, 30*time.Second, "the killed client's backend to end", func() bool {
				var n int
				require.NoError(t, db.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid).Scan(&n))
				return n == 0
			})
			if tc.committed {
				require.NoError(t, marks.Rollback(ctx))
			} else {
				require.NoError(t, payments.Rollback(ctx))
			}
			var v int
			var dirty bool
			require.NoError(t, db.QueryRow(ctx, "SELECT version, dirty FROM schema_migrations").Scan(&v, &dirty))
			require.Equal(t, blocked, v)
			require.True(t, dirty, "the kill left the mark dirty")

			out := migrate("up")
			require.Contains(t, out, tc.says)
			require.NoError(t, db.QueryRow(ctx, "SELECT version, dirty FROM schema_migrations").Scan(&v, &dirty))
			require.Equal(t, latest, v)
			require.False(t, dirty)
			requireSchemaOf(ctx, t, db, latest)
		})
	}
}
