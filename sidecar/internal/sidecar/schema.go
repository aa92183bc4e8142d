package sidecar

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
)

// sweepDueColumn is the column of ordertimeout.sweep_due this sidecar reads
// that the schema before migration 000019_report_deferred_orders lacks.
const sweepDueColumn = "deferred integer"

// errSchemaBehind is wrapped by checkSchema's error for a database whose
// schema is older than this sidecar.
var errSchemaBehind = errors.New("the database schema is older than this sidecar")

// checkSchema makes sure the database has the SQL API this sidecar calls:
// started before `ordertimeout migrate up`, it would otherwise fail on every
// sweep and cancel nothing. A catalog read, which needs no privilege. The
// error wraps errSchemaBehind when the schema is missing or too old; any
// other error means the database could not be asked (not answering yet).
func checkSchema(ctx context.Context, pool *pgxpool.Pool) error {
	var result *string
	if err := pool.QueryRow(ctx,
		`SELECT pg_get_function_result(to_regprocedure('ordertimeout.sweep_due(integer)'))`).Scan(&result); err != nil {
		return fmt.Errorf("check the database schema: %w", err)
	}
	if result == nil {
		return fmt.Errorf("%w: it has no ordertimeout.sweep_due(integer); run `ordertimeout migrate up` first", errSchemaBehind)
	}
	if !strings.Contains(*result, sweepDueColumn) {
		return fmt.Errorf("%w: ordertimeout.sweep_due returns %s, without the column %q of migration "+
			"000019_report_deferred_orders; run `ordertimeout migrate up` first", errSchemaBehind, *result, sweepDueColumn)
	}
	return nil
}
