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
// Its now() is the sweep's transaction start (Result.SweptAt).
var sweepQuery = "SELECT " + strings.Join(resultColumns, ", ") + ", now() FROM ordertimeout.sweep_due($1)"

// ErrSchemaBehind is wrapped by CheckSchema's error when the database's
// sweep_due lacks a column this sweeper reads: its schema is older than this
// binary (migrations not run yet).
var ErrSchemaBehind = errors.New("the database schema is older than this sidecar")

// requiredFunctions are the functions the sidecar's sweep, workers, listener
// and retention job call, with the argument types they are called with. A
// function added by a migration goes here with the code that first calls it:
// CheckSchema then refuses a database that lacks it (the binary deployed
// before `migrate up`), instead of a sidecar that starts and fails every
// call of it.
var requiredFunctions = []string{
	"ordertimeout.sweep_due(integer)",
	"ordertimeout.plan_next_sweep(interval, timestamptz, interval)", // 000050
	"ordertimeout.cancel_checked(text, integer)",
	"ordertimeout.confirm_payment(text, text, numeric, text, timestamptz)", // 000064
	"ordertimeout.fail_payment(text, text)",
	"ordertimeout.resolve_conflict(bigint, text, text)",
	"ordertimeout.finish_refund(bigint, text)",
	"ordertimeout.rescue_stuck_jobs(interval, integer)",
	"ordertimeout.reconcile_payments(jsonb, timestamptz, timestamptz, boolean, text)",
	"ordertimeout.reconcile_watermark(text)",
	"ordertimeout.close_cancelled(interval, integer)",
	"ordertimeout.purge_orders(interval, integer, interval)",
	"ordertimeout.conflicts_to_resolve(integer)",    // 000039
	"ordertimeout.conflict_info(bigint)",            // 000039
	"ordertimeout.hand_over_conflict(bigint, text)", // 000058
}

// requiredResults are result columns, added by a migration, of functions
// other than sweep_due that the sidecar reads: function, then column.
var requiredResults = [][2]string{
	{"ordertimeout.order_payments(text)", "method"}, // 000059: the console's order page
}

// CheckSchema makes sure the database has every function the sidecar calls
// (requiredFunctions), that ordertimeout.sweep_due returns every column a
// sweep reads, and that the other functions return the columns
// requiredResults names; started before `ordertimeout migrate up`, a sidecar would
// otherwise fail on every sweep, or on every conflict it should resolve. It
// reads the catalog, which needs no privilege. The error wraps
// ErrSchemaBehind when a function or a column is missing; any other error
// means the database could not be asked.
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
	var missing []string
	err = pool.QueryRow(ctx, `
		SELECT coalesce(array_agg(f.name ORDER BY f.n) FILTER (WHERE to_regprocedure(f.name) IS NULL), '{}')
		FROM unnest($1::text[]) WITH ORDINALITY AS f(name, n)`, requiredFunctions).Scan(&missing)
	if err != nil {
		return fmt.Errorf("check the database schema: %w", err)
	}
	// Everything missing is named at once: a schema several migrations
	// behind lacks functions and result columns both.
	var behind []string
	if len(missing) > 0 {
		behind = append(behind, "it has no "+strings.Join(missing, ", "))
	}
	for _, r := range requiredResults {
		var has bool
		err = pool.QueryRow(ctx, `
			SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_proc AS p,
			                      unnest(p.proargnames, p.proargmodes) AS a(name, mode)
			                WHERE p.oid = to_regprocedure($1) AND a.mode = 't' AND a.name = $2)`, r[0], r[1]).Scan(&has)
		if err != nil {
			return fmt.Errorf("check the database schema: %w", err)
		}
		if !has {
			behind = append(behind, fmt.Sprintf("%s returns no column %q", r[0], r[1]))
		}
	}
	if len(behind) > 0 {
		return fmt.Errorf("%w: %s; run `ordertimeout migrate up` first", ErrSchemaBehind, strings.Join(behind, "; "))
	}
	return nil
}
