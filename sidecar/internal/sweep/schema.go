package sweep

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
)

// resultColumns are the columns of ordertimeout.sweep_due that Sweep reads,
// in the order it scans them; CheckSchema looks for the same list.
var resultColumns = []string{"claimed", "cancelled", "caught_by_sweep", "checks", "moot", "deferred"}

// sweepQuery is the one statement a sweep runs.
var sweepQuery = "SELECT " + strings.Join(resultColumns, ", ") + " FROM ordertimeout.sweep_due($1)"

// ErrSchemaBehind is wrapped by CheckSchema's error when the database's
// sweep_due lacks a column this sweeper reads: its schema is older than this
// binary (migrations not run yet).
var ErrSchemaBehind = errors.New("the database schema is older than this sidecar")

// CheckSchema makes sure the database's ordertimeout.sweep_due returns every
// column a sweep reads; started before `ordertimeout migrate up`, a sweeper
// would otherwise fail on every sweep and cancel nothing. It reads the
// function's TABLE columns from the catalog, which needs no privilege. The
// error wraps ErrSchemaBehind when the function or a column is missing; any
// other error means the database could not be asked.
func CheckSchema(ctx context.Context, pool *pgxpool.Pool) error {
	var found bool
	var columns []string
	err := pool.QueryRow(ctx, `
		SELECT p.oid IS NOT NULL,
		       coalesce(array_agg(a.name) FILTER (WHERE a.mode = 't'), '{}')
		FROM (SELECT to_regprocedure('ordertimeout.sweep_due(integer)') AS oid) AS f
		LEFT JOIN pg_catalog.pg_proc AS p ON p.oid = f.oid
		LEFT JOIN LATERAL unnest(p.proargnames, p.proargmodes) AS a(name, mode) ON true
		GROUP BY p.oid`).Scan(&found, &columns)
	if err != nil {
		return fmt.Errorf("check the database schema: %w", err)
	}
	if !found {
		return fmt.Errorf("%w: it has no ordertimeout.sweep_due(integer); run `ordertimeout migrate up` first", ErrSchemaBehind)
	}
	for _, c := range resultColumns {
		if !slices.Contains(columns, c) {
			return fmt.Errorf("%w: ordertimeout.sweep_due returns no column %q (it returns %s); run `ordertimeout migrate up` first",
				ErrSchemaBehind, c, strings.Join(columns, ", "))
		}
	}
	return nil
}
