package main

import (
	"fmt"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/migrator"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecartest"
	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
)

// mark sets golang-migrate's version mark by hand, as a migrate killed
// between its steps leaves it: dirty at the version a migration goes to.
func mark(t *testing.T, db *pgxpool.Pool, version int) {
	t.Helper()
	sidecartest.Exec(t, db, "UPDATE schema_migrations SET version = $1, dirty = true", version)
}

// markOf reads golang-migrate's version mark.
func markOf(t *testing.T, db *pgxpool.Pool) (version int, dirty bool) {
	t.Helper()
	require.NoError(t, db.QueryRow(t.Context(), "SELECT version, dirty FROM schema_migrations").Scan(&version, &dirty))
	return version, dirty
}

// prebuilt11 builds 000011's indexes as README's Retention advises for large
// tables (concurrently there; 000011 creates them if they are not there).
const prebuilt11 = `CREATE INDEX orders_closed_at ON ordertimeout.orders (closed_at) WHERE status = 'CLOSED';
	CREATE INDEX orders_paid_at ON ordertimeout.orders (paid_at) WHERE status IN ('PAID', 'REFUNDED')`

// A version left marked dirty, by a migrate killed after its migration
// committed and before it marked the version clean, or before the
// migration committed, or by a rollback killed the same ways: `migrate up`
// tells by the schema's fingerprint which version the database has,
// records it, and goes on to the newest; `migrate version` says which one
// it is; `migrate down` records it and rolls nothing back. Each state is
// the one golang-migrate leaves (its mark is written in transactions of
// its own, before and after the migration's), set by hand.
func TestMigrateSettlesADirtyMark(t *testing.T) {
	t.Parallel()
	latest, _ := migrationVersions(t)
	cases := []struct {
		name         string
		schema, mark int
		river        bool
		down         bool   // migrate down 1 instead of up
		settled      int    // the version recorded
		sql          string // run before the mark is set
		says         string // in the settlement's sentence
	}{
		{name: "up killed before its migration committed", schema: 38, mark: 39, settled: 38},
		{name: "up killed after its migration committed", schema: 39, mark: 39, settled: 39},
		{name: "down killed before its rollback committed", schema: 40, mark: 39, down: true, settled: 40},
		{name: "down killed after its rollback committed", schema: 39, mark: 39, down: true, settled: 39},
		// 000021 changes nothing the fingerprint sees and may run again.
		{name: "unseen 21, up killed before", schema: 20, mark: 21, settled: 20},
		{name: "unseen 21, up killed after", schema: 21, mark: 21, settled: 20},
		// River's v8 only records itself, and its probe reads that.
		{name: "unseen 8, up killed before", schema: 7, mark: 8, river: true, settled: 7},
		{name: "unseen 8, up killed after", schema: 8, mark: 8, river: true, settled: 8},
		{name: "first migration killed before", schema: 0, mark: 1, river: true, settled: 0},
		// golang-migrate marks "none" (-1) dirty while it rolls back 000001.
		{name: "first migration's rollback killed before", schema: 1, mark: -1, river: true, settled: 1},
		{name: "unseen 21, down from 22 killed after", schema: 21, mark: 21, down: true, settled: 20,
			says: "the schema is that of versions 20 and 21 alike"},
		// The README tells operators of large tables to build 000011's
		// indexes beforehand, concurrently; 000011 creates them if not there.
		{name: "000011's indexes built beforehand", schema: 10, mark: 11, settled: 10, sql: prebuilt11,
			says: "with a later migration's indexes built beforehand"},
		{name: "000011's indexes built beforehand, two versions before", schema: 9, mark: 10, settled: 9, sql: prebuilt11,
			says: "with a later migration's indexes built beforehand"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			var db *pgxpool.Pool
			var url string
			if c.river {
				db, url = migratedDownTo(t, c.schema)
			} else {
				db, url = databaseAt(t, c.schema)
			}
			if c.sql != "" {
				sidecartest.Exec(t, db, c.sql)
			}
			if c.schema == 0 {
				// down --all leaves golang-migrate's table empty.
				sidecartest.Exec(t, db, "INSERT INTO schema_migrations VALUES ($1, true)", c.mark)
			} else {
				mark(t, db, c.mark)
			}

			err := realMain(ctx, []string{"migrate", "version", "--database-url", url})
			require.ErrorContains(t, err, "dirty", "migrate version reports the dirty mark")
			v, dirty := markOf(t, db)
			require.Equal(t, c.mark, v, "migrate version records nothing")
			require.True(t, dirty)
			m, err := migrator.Open(url, nil)
			require.NoError(t, err)
			diagnosis, err := m.Diagnose(ctx)
			require.NoError(t, m.Close())
			require.NoError(t, err)
			require.Equal(t, c.settled, int(diagnosis.Schema), "what migrate version prints: %s", diagnosis)
			require.False(t, diagnosis.Recorded)
			require.Contains(t, diagnosis.String(), c.says)

			if c.down {
				err := realMain(ctx, []string{"migrate", "down", "1", "--database-url", url})
				require.ErrorContains(t, err, "nothing was rolled back")
				require.ErrorContains(t, err, "recorded version "+strconv.Itoa(c.settled)+" as clean")
				v, dirty := markOf(t, db)
				require.Equal(t, c.settled, v)
				require.False(t, dirty)
				require.NoError(t, realMain(ctx, []string{"migrate", "down", "1", "--database-url", url}),
					"down again, from the version settled")
				v, _ = markOf(t, db)
				require.Equal(t, c.settled-1, v)
				return
			}
			require.NoError(t, realMain(ctx, []string{"migrate", "up", "--database-url", url}))
			v, dirty = markOf(t, db)
			require.Equal(t, latest, v, "up went on to the newest")
			require.False(t, dirty)
			if c.river && c.settled >= 7 {
				require.EqualValues(t, 1, count(t, db, "SELECT count(*) FROM river_migration WHERE version = 8"),
					"River's v8 ran once")
			}
		})
	}
}

// A schema changed by hand, with the version marked dirty: `migrate up`
// cannot tell which version it has, refuses, names the versions it
// compared, and records nothing; `migrate force` is the way out.
func TestMigrateRefusesADirtyMarkItCannotTell(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, url := databaseAt(t, 38)
	sidecartest.Exec(t, db, "CREATE TABLE ordertimeout.made_by_hand (id int)")
	mark(t, db, 39)
	err := realMain(ctx, []string{"migrate", "up", "--database-url", url})
	require.ErrorContains(t, err, "is that of none of versions 38, 39, 40")
	require.ErrorContains(t, err, "nothing was recorded")
	v, dirty := markOf(t, db)
	require.Equal(t, 39, v)
	require.True(t, dirty)
	err = realMain(ctx, []string{"migrate", "down", "1", "--database-url", url})
	require.ErrorContains(t, err, "nothing was rolled back")

	sidecartest.Exec(t, db, "DROP TABLE ordertimeout.made_by_hand")
	require.NoError(t, realMain(ctx, []string{"migrate", "up", "--database-url", url}))
	latest, _ := migrationVersions(t)
	v, dirty = markOf(t, db)
	require.Equal(t, latest, v)
	require.False(t, dirty)
}

// A second `migrate up` while the first one's migration waits for a lock
// that live traffic holds finds the version marked dirty and the schema the
// one before it, which is what a killed migrate leaves too. It must not
// settle that mark under the running migration: it waits for golang-migrate's
// lock, and once the first has finished it has nothing to do. (The test
// fails when Settle does not take the lock.)
func TestMigrateUpWaitsForAMigrateRunning(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, url := databaseAt(t, 38)
	holder := holdConflicts(t, db)

	// The second migrator is open before the first migrate starts:
	// golang-migrate's own open waits for a migrate running, but one
	// already open does not.
	other, err := migrator.Open(url, sidecartest.Logger())
	require.NoError(t, err)
	defer other.Close() //nolint:errcheck // test cleanup

	first := make(chan error, 1)
	go func() { first <- realMain(ctx, []string{"migrate", "up", "--database-url", url}) }()
	sidecartest.Eventually(t, 30*time.Second, "migration 000039 waiting for the lock", func() (bool, error) {
		var waiting bool
		err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND query LIKE '%read_conflicts_to_resolve%' AND wait_event_type = 'Lock')`).Scan(&waiting)
		return waiting, err
	})
	v, dirty := markOf(t, db)
	require.Equal(t, 39, v)
	require.True(t, dirty)

	second := make(chan error, 1)
	go func() {
		_, err := other.Up(ctx)
		second <- err
	}()
	sidecartest.Eventually(t, 30*time.Second, "the second migrate up waiting for the migration lock", func() (bool, error) {
		var waiting int
		err := db.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND query LIKE '%pg_advisory_lock%' AND wait_event_type = 'Lock' AND wait_event = 'advisory'`).Scan(&waiting)
		return waiting == 1, err
	})
	v, dirty = markOf(t, db)
	require.Equal(t, 39, v, "the second migrate up left the mark of the running migration alone")
	require.True(t, dirty)

	require.NoError(t, holder.Commit(ctx))
	for name, ch := range map[string]chan error{"first": first, "second": second} {
		select {
		case err := <-ch:
			require.NoError(t, err, "the %s migrate up", name)
		case <-time.After(90 * time.Second):
			t.Fatalf("the %s migrate up did not return within 90 s of the lock's release", name)
		}
	}
	latest, _ := migrationVersions(t)
	v, dirty = markOf(t, db)
	require.Equal(t, latest, v)
	require.False(t, dirty)
}

// `migrate version` (and every migrate action, which ends with it) compares
// the schema with the version recorded, by its fingerprint: a version forced
// by mistake names the version the schema has; a schema changed by hand
// matches none, which is said before a dirty mark finds it out. Either is a
// warning, not a failure.
func TestMigrateVersionComparesTheSchema(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	bin := build(t)
	db := pgtest.NewPool(t)
	url := pgtest.URL(t, db)
	latest, _ := migrationVersions(t)
	migrate := func(args ...string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, bin, append(append([]string{"migrate"}, args...), "--database-url", url)...).Output()
		require.NoError(t, err, "migrate %v: %s", args, out)
		return string(out)
	}
	require.Equal(t, fmt.Sprintf("version %d (unchanged)\n", latest), migrate("version"))

	out := migrate("force", strconv.Itoa(latest-1))
	require.Contains(t, out, fmt.Sprintf("warning: the schema is not version %d's but version %d's", latest-1, latest))
	migrate("force", strconv.Itoa(latest))

	sidecartest.Exec(t, db, "CREATE INDEX made_by_hand ON ordertimeout.orders (amount)")
	require.Contains(t, migrate("version"), fmt.Sprintf("warning: the schema is not version %d's as its migrations build it, nor any version's", latest))
	sidecartest.Exec(t, db, "DROP INDEX ordertimeout.made_by_hand")
	require.Equal(t, fmt.Sprintf("version %d (unchanged)\n", latest), migrate("version"))

	// 000011's indexes built beforehand, as README advises, are no change
	// by hand; an invalid one (a CREATE INDEX CONCURRENTLY that failed),
	// which 000011's IF NOT EXISTS would keep, is.
	migrate("down", strconv.Itoa(latest-9), "--drop-data")
	db.Reset()
	sidecartest.Exec(t, db, prebuilt11)
	require.Equal(t, "version 9 (unchanged)\n", migrate("version"))
	sidecartest.Exec(t, db, `UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'ordertimeout.orders_paid_at'::regclass`)
	require.Contains(t, migrate("version"), "warning: the schema is not version 9's")
}
