package migrations_test

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/migrations"
	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
)

var update = flag.Bool("update", false, "write migrations/fingerprints.txt from the migrations (make fingerprints)")

func TestMain(m *testing.M) { pgtest.Main(m) }

// inexactDowns are the migrations whose down does not give back the schema
// before them: River's v3 and v4 leave river_job.metadata nullable without
// its default, and the job state "pending" that an enum cannot lose. A
// migrate down of one of them killed midway is told by hand (the schema it
// leaves matches no version).
var inexactDowns = map[uint]struct{}{3: {}, 4: {}}

// TestFingerprints walks the migrations down one at a time from the newest
// and up again, fingerprinting the schema after each step. Up, each
// fingerprint must be the one fingerprints.txt holds for its version (which
// `ordertimeout migrate` trusts to tell whether a migration left dirty
// committed); down, the schema a migration's down leaves must be the one of
// the version before it, exactly. Every version's fingerprint must also
// differ from the one before it, but for migrations.Unseen, whose probes
// must answer false before their migration and true after it.
func TestFingerprints(t *testing.T) {
	ctx := t.Context()
	db := pgtest.NewPool(t)
	url := pgtest.URL(t, db)
	versions, err := migrations.Versions()
	require.NoError(t, err)
	latest := versions[len(versions)-1]

	m, err := migrations.New(url)
	require.NoError(t, err)
	defer m.Close()
	// The lines of each schema seen, by fingerprint, to show what differs.
	seen := make(map[string][]string)
	fingerprint := func() string {
		t.Helper()
		lines, err := migrations.FingerprintLines(ctx, db)
		require.NoError(t, err)
		fp, err := migrations.Fingerprint(ctx, db)
		require.NoError(t, err)
		seen[fp] = lines
		return fp
	}
	differ := func(a, b string) string {
		only := func(x, y []string) []string {
			var out []string
			for _, l := range x {
				if !slices.Contains(y, l) {
					out = append(out, l)
				}
			}
			return out
		}
		return fmt.Sprintf("only in the first:\n%s\nonly in the second:\n%s",
			strings.Join(only(seen[a], seen[b]), "\n"), strings.Join(only(seen[b], seen[a]), "\n"))
	}

	down := map[uint]string{latest: fingerprint()}
	for i := len(versions) - 1; i >= 0; i-- {
		require.NoError(t, m.Steps(-1), "down from %d", versions[i])
		prev := uint(0)
		if i > 0 {
			prev = versions[i-1]
		}
		down[prev] = fingerprint()
	}
	committed := func(v uint) bool {
		t.Helper()
		var ok bool
		require.NoError(t, db.QueryRow(ctx, migrations.Unseen[v]).Scan(&ok), "the probe of migration %d", v)
		return ok
	}
	up := map[uint]string{0: fingerprint()}
	for _, v := range versions {
		if migrations.Unseen[v] != "" {
			require.False(t, committed(v), "the probe of migration %d before it", v)
		}
		require.NoError(t, m.Steps(1), "up to %d", v)
		up[v] = fingerprint()
		if migrations.Unseen[v] != "" {
			require.True(t, committed(v), "the probe of migration %d after it", v)
		}
	}

	if *update {
		require.NoError(t, os.WriteFile("fingerprints.txt", []byte(migrations.FormatFingerprints(up)), 0o644))
		t.Logf("wrote fingerprints.txt: %d versions", len(up))
	}
	recorded, err := migrations.Fingerprints()
	require.NoError(t, err)
	require.Equal(t, up[latest], down[latest], "the template database (all migrations at once) is the newest version's")

	// No setting of the session changes the fingerprint: the deparsed text
	// writes intervals in IntervalStyle and quotes names by
	// quote_all_identifiers, which a role or a database may set.
	config, err := pgx.ParseConfig(url)
	require.NoError(t, err)
	for k, v := range map[string]string{"IntervalStyle": "iso_8601", "quote_all_identifiers": "on",
		"DateStyle": "SQL, DMY", "TimeZone": "Asia/Shanghai", "extra_float_digits": "-15", "bytea_output": "escape"} {
		config.RuntimeParams[k] = v
	}
	conn, err := pgx.ConnectConfig(ctx, config)
	require.NoError(t, err)
	defer conn.Close(ctx)
	fp, err := migrations.Fingerprint(ctx, conn)
	require.NoError(t, err)
	require.Equal(t, up[latest], fp, "the fingerprint read with other session settings: %s", differ(up[latest], fp))

	if !*update {
		for _, v := range append([]uint{0}, versions...) {
			require.Equal(t, up[v], recorded[v],
				"the schema after migration %d is not the one migrations/fingerprints.txt holds: run `make fingerprints` after a new migration", v)
		}
		require.Len(t, recorded, len(versions)+1, "fingerprints.txt holds a version no migration has")
	}
	prev := uint(0)
	for _, v := range versions {
		if _, ok := inexactDowns[v]; ok {
			assert.NotEqual(t, up[prev], down[prev], "the down of migration %d now leaves the schema of %d: take it off inexactDowns", v, prev)
		} else {
			assert.Equal(t, up[prev], down[prev], "the down of migration %d does not leave the schema of %d: %s", v, prev, differ(up[prev], down[prev]))
		}
		if _, ok := migrations.Unseen[v]; ok {
			assert.Equal(t, up[prev], up[v], "migration %d changes the schema: take it off migrations.Unseen", v)
		} else {
			assert.NotEqual(t, up[prev], up[v], "migration %d changes nothing the fingerprint sees: add it to migrations.Unseen, with a query that tells whether it committed", v)
		}
		prev = v
	}
}
