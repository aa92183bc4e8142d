package security

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
	"github.com/ordertimeout/ordertimeout/sidecar/sqlstate"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The functions each role may execute, by name (every overload).
var (
	appFunctions = []string{
		"begin_payment", "cancel_order", "confirm_payment", "create_order", "extend_deadline",
		"fail_payment", "order_events", "order_info", "order_payments",
	}
	sidecarFunctions = append(slices.Clone(appFunctions),
		"cancel_checked", "cancel_due", "close_cancelled", "conflict_info", "conflicts_to_resolve", "finish_refund", "hand_over_conflict", "next_due", "open_conflicts",
		"plan_next_sweep", "plan_sleep", "preview_due", "purge_orders", "reconcile_payments", "reconcile_watermark", "rescue_stuck_jobs",
		"resolve_conflict", "run_sweeper", "sweep_due")
	adminFunctions = append(slices.Clone(sidecarFunctions), "configure", "put_payment_method", "put_points", "put_stock")
)

// login is a LOGIN role of one test and a connection string for it.
type login struct {
	Name string
	URL  string
}

// newLogin creates a LOGIN role with a name unique to this test, member of
// the given roles, and drops it (with everything it owns in the test's
// database) when the test ends.
func newLogin(t *testing.T, pool *pgxpool.Pool, purpose string, memberOf ...string) login {
	t.Helper()
	ctx := context.Background()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := fmt.Sprintf("ot_sec_%s_%d_%s", purpose, os.Getpid(), hex.EncodeToString(b))
	password := hex.EncodeToString(b) + "-pw"
	_, err := pool.Exec(ctx, fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", pgx.Identifier{name}.Sanitize(), password))
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		id := pgx.Identifier{name}.Sanitize()
		_, err := pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1`, name)
		require.NoError(t, err)
		_, err = pool.Exec(ctx, "DROP OWNED BY "+id)
		require.NoError(t, err)
		_, err = pool.Exec(ctx, "DROP ROLE "+id)
		require.NoError(t, err)
	})
	for _, r := range memberOf {
		_, err := pool.Exec(ctx, fmt.Sprintf("GRANT %s TO %s", pgx.Identifier{r}.Sanitize(), pgx.Identifier{name}.Sanitize()))
		require.NoError(t, err)
	}
	u, err := url.Parse(pgtest.URL(t, pool))
	require.NoError(t, err, "DATABASE_URL must be a postgres:// URL for this test")
	u.User = url.UserPassword(name, password)
	return login{Name: name, URL: u.String()}
}

// connect opens a connection as l, closed when the test ends.
func connect(t *testing.T, l login) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), l.URL)
	require.NoError(t, err, "log in as %s", l.Name)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// code returns the SQLSTATE of err, or "" when err is nil.
func code(t *testing.T, err error) string {
	t.Helper()
	if err == nil {
		return ""
	}
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	return pgErr.Code
}

// exec runs sql on conn, draining any rows, and returns its SQLSTATE ("" when
// it succeeded).
func exec(t *testing.T, conn *pgx.Conn, sql string, args ...any) string {
	t.Helper()
	rows, err := conn.Query(context.Background(), sql, args...)
	if err == nil {
		for rows.Next() {
		}
		rows.Close()
		err = rows.Err()
	}
	return code(t, err)
}

// setupStock gives SKU A plenty of stock.
func setupStock(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `SELECT ordertimeout.put_stock('A', 1000000)`)
	require.NoError(t, err)
}

// relation is a table, view or sequence the roles might touch.
type relation struct {
	Name   string // schema-qualified, quoted
	Kind   string // r table, p partitioned table, v view, m materialized view, S sequence
	Column string // a column an UPDATE may name (not an identity or generated one)
}

// relations lists every relation of schema ordertimeout and River's tables
// and sequences in public.
func relations(t *testing.T, pool *pgxpool.Pool) []relation {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
SELECT format('%I.%I', n.nspname, c.relname), c.relkind::text,
       coalesce((SELECT a.attname::text
                   FROM pg_catalog.pg_attribute AS a
                  WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
                    AND a.attidentity = '' AND a.attgenerated = ''
                  ORDER BY a.attnum
                  LIMIT 1), '')
FROM pg_catalog.pg_class AS c
JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p', 'v', 'm', 'S')
  AND (n.nspname = 'ordertimeout' OR (n.nspname = 'public' AND c.relname LIKE 'river\_%'))
ORDER BY 1`)
	require.NoError(t, err)
	rels, err := pgx.CollectRows(rows, pgx.RowToStructByPos[relation])
	require.NoError(t, err)
	require.NotEmpty(t, rels)
	return rels
}

// requireNoTableAccess checks that conn can neither read nor write any
// relation in rels (except those named in allowSelect, which it may read).
func requireNoTableAccess(t *testing.T, conn *pgx.Conn, rels []relation, allowSelect ...string) {
	t.Helper()
	for _, r := range rels {
		if r.Kind == "S" {
			require.Equal(t, sqlstate.InsufficientPrivilege, exec(t, conn, `SELECT nextval($1::regclass)`, r.Name), "nextval(%s)", r.Name)
			require.Equal(t, sqlstate.InsufficientPrivilege, exec(t, conn, "SELECT * FROM "+r.Name), "read %s", r.Name)
			continue
		}
		wantSelect := sqlstate.InsufficientPrivilege
		if slices.Contains(allowSelect, r.Name) {
			wantSelect = ""
		}
		require.Equal(t, wantSelect, exec(t, conn, "SELECT * FROM "+r.Name+" LIMIT 1"), "SELECT %s", r.Name)
		// A view that cannot be written says so (55000) before any
		// privilege is checked; either way nothing is written.
		refused := []string{sqlstate.InsufficientPrivilege}
		if r.Kind == "v" || r.Kind == "m" {
			refused = append(refused, sqlstate.ObjectNotInPrerequisiteState)
		} else {
			require.Equal(t, sqlstate.InsufficientPrivilege, exec(t, conn, "TRUNCATE "+r.Name), "TRUNCATE %s", r.Name)
		}
		require.Contains(t, refused, exec(t, conn, "INSERT INTO "+r.Name+" DEFAULT VALUES"), "INSERT %s", r.Name)
		require.Contains(t, refused, exec(t, conn, "DELETE FROM "+r.Name+" WHERE false"), "DELETE %s", r.Name)
		col := pgx.Identifier{r.Column}.Sanitize()
		require.Contains(t, refused, exec(t, conn, fmt.Sprintf("UPDATE %s SET %s = %s WHERE false", r.Name, col, col)), "UPDATE %s", r.Name)
	}
}

// function is one function of schema ordertimeout.
type function struct {
	Name string
	Call string // a call of it with NULL arguments, e.g. SELECT ordertimeout.f(NULL::text), CALL for a procedure
}

func functions(t *testing.T, pool *pgxpool.Pool) []function {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
SELECT p.proname::text,
       format('%s ordertimeout.%I(%s)', CASE p.prokind WHEN 'p' THEN 'CALL' ELSE 'SELECT' END, p.proname,
              (SELECT coalesce(string_agg('NULL::' || format_type(a.t, NULL), ', ' ORDER BY a.i), '')
                 FROM unnest(p.proargtypes::oid[]) WITH ORDINALITY AS a(t, i)))
FROM pg_catalog.pg_proc AS p
WHERE p.pronamespace = 'ordertimeout'::regnamespace
ORDER BY 1, 2`)
	require.NoError(t, err)
	fns, err := pgx.CollectRows(rows, pgx.RowToStructByPos[function])
	require.NoError(t, err)
	require.NotEmpty(t, fns)
	return fns
}

// requireExecutable checks that role may execute exactly the functions
// named in allowed, by the catalog, and that calling any other one fails with
// 42501 over conn.
func requireExecutable(t *testing.T, pool *pgxpool.Pool, conn *pgx.Conn, role string, allowed []string) {
	t.Helper()
	var may []string
	require.NoError(t, pool.QueryRow(context.Background(), `
SELECT coalesce(array_agg(DISTINCT p.proname::text ORDER BY p.proname::text), '{}')
FROM pg_catalog.pg_proc AS p
WHERE p.pronamespace = 'ordertimeout'::regnamespace
  AND has_function_privilege($1, p.oid, 'EXECUTE')`, role).Scan(&may))
	want := append([]string{}, allowed...)
	slices.Sort(want)
	require.Equal(t, want, may, "functions of schema ordertimeout that %s may execute", role)

	for _, fn := range functions(t, pool) {
		if slices.Contains(allowed, fn.Name) {
			continue
		}
		require.Equal(t, sqlstate.InsufficientPrivilege, exec(t, conn, fn.Call), "%s calls %s", role, fn.Call)
	}
}

// TestAppRole: the application's role runs the order lifecycle and nothing
// else: no table, no River table, no sweep, no stock, no settings, no private
// helper.
func TestAppRole(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	setupStock(t, pool)
	app := newLogin(t, pool, "app", "ordertimeout_app")
	conn := connect(t, app)
	ctx := context.Background()

	for _, step := range []string{
		`SELECT * FROM ordertimeout.create_order('sec-1', '[{"sku": "A", "qty": 1}]', interval '1 minute')`,
		`SELECT * FROM ordertimeout.create_order('sec-2', '[{"sku": "A", "qty": 2}]')`,
		`SELECT * FROM ordertimeout.begin_payment('sec-1', 'pay-1')`,
		`SELECT ordertimeout.fail_payment('sec-1', 'pay-1')`,
		`SELECT * FROM ordertimeout.extend_deadline('sec-1', interval '1 minute')`,
		`SELECT ordertimeout.confirm_payment('sec-1', 'pay-2')`,
		`SELECT ordertimeout.cancel_order('sec-2')`,
		`SELECT * FROM ordertimeout.order_info('sec-1')`,
		`SELECT * FROM ordertimeout.order_events('sec-1')`,
		`SELECT * FROM ordertimeout.order_payments('sec-1')`,
	} {
		_, err := conn.Exec(ctx, step)
		require.NoError(t, err, step)
	}
	var status string
	require.NoError(t, conn.QueryRow(ctx, `SELECT status FROM ordertimeout.order_info('sec-1')`).Scan(&status))
	require.Equal(t, "PAID", status)

	requireNoTableAccess(t, conn, relations(t, pool))
	requireExecutable(t, pool, conn, app.Name, appFunctions)
	for _, call := range []string{
		`SELECT * FROM ordertimeout.sweep_due(10)`,
		`SELECT ordertimeout.put_stock('A', 1)`,
		`SELECT * FROM ordertimeout.configure(grace => interval '0')`,
		`SELECT ordertimeout._cancel_orders(ARRAY['sec-1'], NULL, ARRAY['requested'], 'x', false)`,
		`SELECT ordertimeout._release(ARRAY['sec-1'], ARRAY['requested'], now())`,
	} {
		require.Equal(t, sqlstate.InsufficientPrivilege, exec(t, conn, call), call)
	}
}

// TestSidecarRole: the sidecar's role sweeps, resolves conflicts and works
// River's tables, reads the stats views, and touches neither stock, points,
// settings nor the ordertimeout tables.
func TestSidecarRole(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	setupStock(t, pool)
	_, err := pool.Exec(context.Background(), `SELECT ordertimeout.configure(grace => interval '0')`)
	require.NoError(t, err)
	sidecar := newLogin(t, pool, "sidecar", "ordertimeout_sidecar")
	conn := connect(t, sidecar)
	ctx := context.Background()

	for _, step := range []string{
		`SELECT * FROM ordertimeout.create_order('sec-1', '[{"sku": "A", "qty": 1}]', interval '1 millisecond')`,
		`SELECT pg_sleep(0.01)`,
		`SELECT * FROM ordertimeout.sweep_due(10)`,
		`SELECT ordertimeout.cancel_due(10)`,
		`SELECT * FROM ordertimeout.preview_due(10)`,
		`SELECT ordertimeout.confirm_payment('sec-1', 'late-1')`,
		`SELECT ordertimeout.resolve_conflict((SELECT conflict_id FROM ordertimeout.open_conflicts(1)), 'refund')`,
		`SELECT ordertimeout.finish_refund((SELECT conflict_id FROM ordertimeout.open_conflicts(1)), 'R-sec-1')`,
		`SELECT ordertimeout.close_cancelled(interval '0', 10)`,
		`SELECT * FROM ordertimeout.sweep_stats`,
		`SELECT * FROM ordertimeout.order_counts`,
		`SELECT * FROM ordertimeout.cancel_lag`,
		`SELECT * FROM ordertimeout.settings`,
	} {
		_, err := conn.Exec(ctx, step)
		require.NoError(t, err, step)
	}
	var status string
	require.NoError(t, conn.QueryRow(ctx, `SELECT status FROM ordertimeout.order_info('sec-1')`).Scan(&status))
	require.Equal(t, "CLOSED", status)

	// River's tables, as River's client uses them.
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	for _, step := range []string{
		`INSERT INTO public.river_job (kind, args, queue) VALUES ('sec_test', '{}', 'sec_test')`,
		`UPDATE public.river_job SET priority = 2 WHERE kind = 'sec_test'`,
		`SELECT count(*) FROM public.river_job`,
		`DELETE FROM public.river_job WHERE kind = 'sec_test'`,
		`SELECT count(*) FROM public.river_leader`,
		`SELECT count(*) FROM public.river_queue`,
	} {
		_, err := tx.Exec(ctx, step)
		require.NoError(t, err, step)
	}
	require.NoError(t, tx.Rollback(ctx))

	var ours []relation
	for _, r := range relations(t, pool) {
		if strings.HasPrefix(r.Name, "ordertimeout.") {
			ours = append(ours, r)
		}
	}
	requireNoTableAccess(t, conn, ours,
		"ordertimeout.order_counts", "ordertimeout.sweep_stats", "ordertimeout.cancel_lag", "ordertimeout.settings",
		"ordertimeout.payment_methods")
	requireExecutable(t, pool, conn, sidecar.Name, sidecarFunctions)
	require.Equal(t, sqlstate.InsufficientPrivilege, exec(t, conn, `SELECT ordertimeout.put_stock('A', 1)`))
}

// TestAdminRole: the administrator manages stock, points and settings and
// reads every table, but writes none directly.
func TestAdminRole(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	admin := newLogin(t, pool, "admin", "ordertimeout_admin")
	conn := connect(t, admin)
	ctx := context.Background()
	for _, step := range []string{
		`SELECT ordertimeout.put_stock('A', 10)`,
		`SELECT ordertimeout.put_points('P', 10)`,
		`SELECT * FROM ordertimeout.configure(grace => interval '5 seconds')`,
		`SELECT * FROM ordertimeout.create_order('sec-1', '[{"sku": "A", "qty": 1}]')`,
		`SELECT count(*) FROM ordertimeout.orders`,
		`SELECT count(*) FROM ordertimeout.events`,
	} {
		_, err := conn.Exec(ctx, step)
		require.NoError(t, err, step)
	}
	requireExecutable(t, pool, conn, admin.Name, adminFunctions)
	for _, table := range []string{"ordertimeout.orders", "ordertimeout.stock", "ordertimeout.releases", "ordertimeout.events"} {
		require.Equal(t, sqlstate.InsufficientPrivilege, exec(t, conn, "DELETE FROM "+table+" WHERE false"), "DELETE %s", table)
	}
}

// TestNothingForPublic: a role with no grants can call nothing of schema
// ordertimeout nor read any of its tables, and no function or table of it
// grants anything to PUBLIC.
func TestNothingForPublic(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	nobody := newLogin(t, pool, "nobody")
	conn := connect(t, nobody)

	var public []string
	require.NoError(t, pool.QueryRow(context.Background(), `
SELECT coalesce(array_agg(x ORDER BY x), '{}') FROM (
    SELECT 'function ' || p.oid::regprocedure::text AS x
    FROM pg_catalog.pg_proc AS p
    WHERE p.pronamespace = 'ordertimeout'::regnamespace
      AND (p.proacl IS NULL  -- the default ACL lets PUBLIC execute
           OR EXISTS (SELECT 1 FROM aclexplode(p.proacl) AS a WHERE a.grantee = 0))
    UNION ALL
    SELECT 'relation ' || c.oid::regclass::text
    FROM pg_catalog.pg_class AS c
    WHERE c.relnamespace = 'ordertimeout'::regnamespace
      AND EXISTS (SELECT 1 FROM aclexplode(c.relacl) AS a WHERE a.grantee = 0)
    UNION ALL
    SELECT 'schema ordertimeout'
    FROM pg_catalog.pg_namespace AS n
    WHERE n.nspname = 'ordertimeout'
      AND (n.nspacl IS NULL OR EXISTS (SELECT 1 FROM aclexplode(n.nspacl) AS a WHERE a.grantee = 0))
) AS granted`).Scan(&public))
	require.Empty(t, public, "granted to PUBLIC")

	requireExecutable(t, pool, conn, nobody.Name, nil)
	requireNoTableAccess(t, conn, relations(t, pool))
}

// TestSearchPathHijack: a role that may create functions where the API's
// functions would look (public, and its own temporary schema) shadows the
// built-ins they call, and the API still behaves: every SECURITY DEFINER
// function pins search_path to pg_catalog, pg_temp, and PostgreSQL never
// looks up functions or operators in pg_temp.
func TestSearchPathHijack(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	setupStock(t, pool)
	ctx := context.Background()
	evil := newLogin(t, pool, "evil", "ordertimeout_app")
	// The worst case: a database where anyone may create in public.
	_, err := pool.Exec(ctx, "GRANT CREATE ON SCHEMA public TO "+pgx.Identifier{evil.Name}.Sanitize())
	require.NoError(t, err)

	// Every function pins its search_path; procedures, which may not carry
	// SET if they commit, run with their caller's rights (checked below).
	// Private IMMUTABLE SQL functions carry no SET so that the planner
	// inlines them into their callers, whose pinned search_path they then
	// run under (they are not executable by any role: checked below too).
	var unpinned []string
	require.NoError(t, pool.QueryRow(ctx, `
SELECT coalesce(array_agg(p.oid::regprocedure::text ORDER BY 1), '{}')
FROM pg_catalog.pg_proc AS p
WHERE p.pronamespace = 'ordertimeout'::regnamespace
  AND NOT coalesce('search_path=pg_catalog, pg_temp' = ANY (p.proconfig), false)
  AND (p.prokind <> 'p' OR p.prosecdef)
  AND NOT (p.proname LIKE '\_%' AND p.prolang = (SELECT l.oid FROM pg_catalog.pg_language AS l WHERE l.lanname = 'sql')
           AND p.provolatile = 'i' AND NOT p.prosecdef AND p.proconfig IS NULL)`).Scan(&unpinned))
	require.Empty(t, unpinned, "functions without SET search_path = pg_catalog, pg_temp")

	conn := connect(t, evil)
	// Shadows of what the API calls, each raising if it ever runs.
	const raise = `BEGIN RAISE EXCEPTION 'hijacked' USING ERRCODE = 'EV001'; END`
	for _, schema := range []string{"public", "pg_temp"} {
		for _, fn := range []string{
			"jsonb_typeof(jsonb) RETURNS text",
			"jsonb_array_length(jsonb) RETURNS integer",
			"jsonb_array_elements(jsonb) RETURNS SETOF jsonb",
			"char_length(text) RETURNS integer",
			"clock_timestamp() RETURNS timestamptz",
			"now() RETURNS timestamptz",
			"nextval(regclass) RETURNS bigint",
			"current_setting(text, boolean) RETURNS text",
			"pg_notify(text, text) RETURNS void",
			"evil_eq(text, text) RETURNS boolean",
		} {
			_, err := conn.Exec(ctx, fmt.Sprintf("CREATE FUNCTION %s.%s LANGUAGE plpgsql AS $$%s$$", schema, fn, raise))
			require.NoError(t, err, "create %s.%s", schema, fn)
		}
		for _, op := range []string{"=", "<>", "<", ">", "~"} {
			_, err := conn.Exec(ctx, fmt.Sprintf(
				"CREATE OPERATOR %s.%s (LEFTARG = text, RIGHTARG = text, FUNCTION = %s.evil_eq)", schema, op, schema))
			require.NoError(t, err, "create operator %s.%s", schema, op)
		}
	}
	// Tables and types named like the API's, in the temporary schema.
	for _, ddl := range []string{
		`CREATE TEMP TABLE orders (order_id text, status text)`,
		`CREATE TEMP TABLE stock (sku text, available bigint, reserved bigint, sold bigint)`,
		`CREATE TEMP TABLE river_job (id bigint)`,
		`CREATE TEMP TABLE settings (grace interval)`,
		`CREATE TYPE pg_temp.order_state AS (evil text)`,
	} {
		_, err := conn.Exec(ctx, ddl)
		require.NoError(t, err, ddl)
	}

	// The shadows are live: in this session, with public first, an
	// unqualified call reaches them.
	_, err = conn.Exec(ctx, `SET search_path = public, pg_catalog, pg_temp`)
	require.NoError(t, err)
	require.Equal(t, "EV001", exec(t, conn, `SELECT jsonb_typeof('[]')`), "the shadow in public is used by an unpinned call")
	require.Equal(t, "EV001", exec(t, conn, `SELECT 'a'::text = 'a'::text`), "the operator in public is used by an unpinned expression")

	// The API does not use them.
	for _, step := range []string{
		`SELECT * FROM ordertimeout.create_order('hj-1', '[{"sku": "A", "qty": 2}]', interval '1 minute', '{"amount": 5}')`,
		`SELECT * FROM ordertimeout.create_order('hj-1', '[{"sku": "A", "qty": 2}]', interval '1 minute', '{"amount": 5}')`,
		`SELECT * FROM ordertimeout.create_order('hj-2', '[{"sku": "A", "qty": 1}]', interval '1 millisecond')`,
		`SELECT * FROM ordertimeout.begin_payment('hj-1', 'pay-1')`,
		`SELECT ordertimeout.fail_payment('hj-1', 'pay-1')`,
		`SELECT * FROM ordertimeout.extend_deadline('hj-1', interval '1 minute')`,
		`SELECT ordertimeout.confirm_payment('hj-1', 'pay-2', 5)`,
		`SELECT ordertimeout.confirm_payment('hj-1', 'pay-3', 5)`,
		`SELECT ordertimeout.cancel_order('hj-2', 'evil')`,
		`SELECT * FROM ordertimeout.order_info('hj-1')`,
		`SELECT * FROM ordertimeout.order_events('hj-1')`,
		`SELECT * FROM ordertimeout.order_payments('hj-1')`,
	} {
		_, err := conn.Exec(ctx, step)
		require.NoError(t, err, "%s with shadowed built-ins on the caller's search_path", step)
	}
	var status, conflicts string
	require.NoError(t, conn.QueryRow(ctx, `SELECT status, open_conflicts::text FROM ordertimeout.order_info('hj-1')`).Scan(&status, &conflicts))
	require.Equal(t, "PAID", status)
	require.Equal(t, "1", conflicts, "the second payment is a double payment")
	var available, reserved, sold int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT available, reserved, sold FROM ordertimeout.stock WHERE sku = 'A'`).
		Scan(&available, &reserved, &sold))
	require.Equal(t, []int64{999998, 0, 2}, []int64{available, reserved, sold})

	// run_sweeper is a procedure that commits, so it cannot pin search_path
	// with SET and runs with its caller's rights. It pins search_path itself:
	// a sweeper role's session with public first and the comparisons it
	// makes shadowed there still sweeps.
	for i, typ := range []string{"integer", "timestamptz", "interval"} {
		fn := fmt.Sprintf("evil_cmp%d", i)
		_, err := conn.Exec(ctx, fmt.Sprintf("CREATE FUNCTION public.%s(%s, %s) RETURNS boolean LANGUAGE plpgsql AS $$%s$$", fn, typ, typ, raise))
		require.NoError(t, err)
		for _, op := range []string{"<", ">", "<=", ">="} {
			_, err := conn.Exec(ctx, fmt.Sprintf("CREATE OPERATOR public.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = public.%s)", op, typ, typ, fn))
			require.NoError(t, err, "create operator %s on %s", op, typ)
		}
	}
	sweeper := connect(t, newLogin(t, pool, "evilsweeper", "ordertimeout_sidecar"))
	_, err = sweeper.Exec(ctx, `SET search_path = public, pg_catalog, pg_temp`)
	require.NoError(t, err)
	require.Equal(t, "EV001", exec(t, sweeper, `SELECT 1 >= 2`), "the shadows are live in the sweeper's session")
	_, err = sweeper.Exec(ctx, `CALL ordertimeout.run_sweeper(duration => interval '300 milliseconds')`)
	require.NoError(t, err, "run_sweeper with shadowed comparisons on the caller's search_path")
}

// injections are SQL injection attempts used as ids, reasons and SKUs.
var injections = []string{
	`'; DROP TABLE ordertimeout.orders; --`,
	`Robert'); DROP TABLE ordertimeout.stock;--`,
	`$$; DROP SCHEMA ordertimeout CASCADE; $$`,
	`" OR ""="`,
	`x' OR '1'='1`,
	`1; SELECT pg_sleep(10)`,
	`%s%s%n%x`,
	`\'; TRUNCATE ordertimeout.events; --`,
	`'||(SELECT string_agg(order_id,',') FROM ordertimeout.orders)||'`,
}

// TestInjectionStringsAreData: injection strings given as order ids, payment
// ids, reasons, coupons and SKUs are stored verbatim and do nothing else.
func TestInjectionStringsAreData(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	app := newLogin(t, pool, "inj", "ordertimeout_app")
	conn := connect(t, app)

	for i, s := range injections {
		sku := s
		_, err := pool.Exec(ctx, `SELECT ordertimeout.put_stock($1, 10)`, sku)
		require.NoError(t, err)
		items := fmt.Sprintf(`[{"sku": %q, "qty": 1}]`, sku) // %q of these strings is JSON
		var id string
		require.NoError(t, conn.QueryRow(ctx, `SELECT order_id FROM ordertimeout.create_order($1, $2::jsonb, NULL, jsonb_build_object('coupon', $3::text))`,
			s, items, s).Scan(&id), "create_order(%q)", s)
		require.Equal(t, s, id)
		payment := fmt.Sprintf("%s #%d", s, i)
		var answer string
		require.NoError(t, conn.QueryRow(ctx, `SELECT ordertimeout.confirm_payment($1, $2)`, s, payment).Scan(&answer))
		require.Equal(t, "paid", answer)

		var coupon, gotSKU, gotPayment string
		require.NoError(t, conn.QueryRow(ctx, `
SELECT i.coupon_id, i.items -> 0 ->> 'sku', p.payment_id
FROM ordertimeout.order_info($1) AS i, ordertimeout.order_payments($1) AS p`, s).Scan(&coupon, &gotSKU, &gotPayment))
		require.Equal(t, []string{s, sku, payment}, []string{coupon, gotSKU, gotPayment})
	}
	_, err := pool.Exec(ctx, `SELECT ordertimeout.put_stock('plain', 10)`)
	require.NoError(t, err)
	for i, s := range injections {
		other := fmt.Sprintf("cancel-%d", i)
		_, err := conn.Exec(ctx, `SELECT ordertimeout.create_order($1, '[{"sku": "plain", "qty": 1}]')`, other)
		require.NoError(t, err)
		var cancelled bool
		require.NoError(t, conn.QueryRow(ctx, `SELECT ordertimeout.cancel_order($1, $2)`, other, s).Scan(&cancelled))
		require.True(t, cancelled)
		var reason string
		require.NoError(t, conn.QueryRow(ctx, `
SELECT detail ->> 'reason' FROM ordertimeout.order_events($1) WHERE to_status = 'CANCELLED'`, other).Scan(&reason))
		require.Equal(t, s, reason)
	}

	// Nothing else happened: every table is there, with what the calls wrote.
	var tables, orders, events int
	require.NoError(t, pool.QueryRow(ctx, `
SELECT (SELECT count(*) FROM pg_catalog.pg_tables WHERE schemaname = 'ordertimeout'),
       (SELECT count(*) FROM ordertimeout.orders),
       (SELECT count(*) FROM ordertimeout.events)`).Scan(&tables, &orders, &events))
	require.GreaterOrEqual(t, tables, 13)
	require.Equal(t, 2*len(injections), orders)
	require.Equal(t, 4*len(injections), events) // created and paid, created and cancelled
}
