package migrations

import (
	"bufio"
	"context"
	"crypto/md5" //nolint:gosec // a fingerprint, not a secret
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// fingerprintsFile holds the schema fingerprint after each migration (and 0
// for none), one "NNNNNN md5" line per version, written by
// `make fingerprints` from a database the migrations built one at a time.
//
//go:embed fingerprints.txt
var fingerprintsFile string

// fingerprintQuery describes the schema the migrations build, one line per
// object (NULL for none): the relations, columns,
// constraints, indexes, views, functions, types and triggers of schema
// ordertimeout and River's objects (river_*) in schema $1 (the current one), with
// their comments. It leaves out what differs between two databases built
// by the same migrations: owners and privileges, column numbers (a column
// dropped and added again by down and up gets a new one), storage options
// but fillfactor (an operator tunes autovacuum per table), data, and
// golang-migrate's own table. It must run with the settings Fingerprint
// pins: search_path = pg_catalog, so that every name the deparsed text
// holds is schema-qualified, and those that change how a value is written.
const fingerprintQuery = `
WITH ns AS (
    SELECT oid, nspname FROM pg_namespace WHERE nspname = 'ordertimeout'
), cur AS (
    SELECT oid FROM pg_namespace WHERE nspname = $1
), rel AS (
    SELECT c.oid, c.relname, c.relkind, c.relpersistence, c.reloptions, c.relnamespace
      FROM pg_class AS c
     WHERE c.relnamespace IN (SELECT oid FROM ns)
        OR (c.relnamespace IN (SELECT oid FROM cur) AND c.relname LIKE 'river\_%')
), fn AS (
    SELECT p.oid, p.prokind
      FROM pg_proc AS p
     WHERE p.pronamespace IN (SELECT oid FROM ns)
        OR (p.pronamespace IN (SELECT oid FROM cur) AND p.proname LIKE 'river\_%')
), typ AS (
    SELECT t.oid, t.typname, t.typtype, t.typbasetype, t.typtypmod, t.typnotnull, t.typdefault
      FROM pg_type AS t
     WHERE (t.typnamespace IN (SELECT oid FROM ns)
            OR (t.typnamespace IN (SELECT oid FROM cur) AND t.typname LIKE 'river\_%'))
       AND t.typtype IN ('d', 'e', 'r')
), line AS (
    SELECT format('relation %s %s %s %s', r.oid::regclass, r.relkind, r.relpersistence,
                  (SELECT array_agg(o ORDER BY o) FROM unnest(r.reloptions) AS o WHERE o LIKE 'fillfactor=%')) AS l
      FROM rel AS r
    UNION ALL
    SELECT format('column %s.%I %s %s %s %s %s', r.oid::regclass, a.attname,
                  format_type(a.atttypid, a.atttypmod), a.attnotnull, a.attidentity, a.attgenerated,
                  pg_get_expr(d.adbin, d.adrelid))
      FROM rel AS r
      JOIN pg_attribute AS a ON a.attrelid = r.oid AND a.attnum > 0 AND NOT a.attisdropped
      LEFT JOIN pg_attrdef AS d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
     WHERE r.relkind IN ('r', 'p', 'v', 'm', 'f', 'c')
    UNION ALL
    SELECT format('constraint %s %I %s', coalesce(r.oid::regclass::text, t.oid::regtype::text), c.conname,
                  pg_get_constraintdef(c.oid))
      FROM pg_constraint AS c
      LEFT JOIN rel AS r ON r.oid = c.conrelid
      LEFT JOIN typ AS t ON t.oid = c.contypid
     WHERE r.oid IS NOT NULL OR t.oid IS NOT NULL
    UNION ALL
    SELECT format('index %s%s', pg_get_indexdef(r.oid),
                  (SELECT CASE WHEN NOT x.indisvalid THEN ' INVALID' ELSE '' END FROM pg_index AS x WHERE x.indexrelid = r.oid))
      FROM rel AS r WHERE r.relkind IN ('i', 'I')
    UNION ALL
    SELECT format('view %s %s', r.oid::regclass, pg_get_viewdef(r.oid))
      FROM rel AS r WHERE r.relkind IN ('v', 'm')
    UNION ALL
    SELECT format('trigger %s', pg_get_triggerdef(g.oid))
      FROM pg_trigger AS g JOIN rel AS r ON r.oid = g.tgrelid
     WHERE NOT g.tgisinternal
    UNION ALL
    SELECT format('function %s %s', f.oid::regprocedure,
                  CASE WHEN f.prokind = 'a' THEN 'aggregate' ELSE md5(pg_get_functiondef(f.oid)) END)
      FROM fn AS f
    UNION ALL
    SELECT format('type %s %s %s %s %s %s', t.oid::regtype, t.typtype,
                  CASE WHEN t.typtype = 'd' THEN format_type(t.typbasetype, t.typtypmod) END,
                  t.typnotnull, t.typdefault,
                  (SELECT string_agg(e.enumlabel::text, ',' ORDER BY e.enumsortorder)
                     FROM pg_enum AS e WHERE e.enumtypid = t.oid))
      FROM typ AS t
    UNION ALL
    SELECT format('comment %s %s %s', o.name, d.classoid::regclass, md5(d.description))
      FROM pg_description AS d
      JOIN (SELECT 'pg_class'::regclass::oid, r.oid, 0, r.oid::regclass::text FROM rel AS r
            UNION ALL
            SELECT 'pg_class'::regclass::oid, a.attrelid, a.attnum, format('%s.%I', a.attrelid::regclass, a.attname)
              FROM pg_attribute AS a WHERE a.attrelid IN (SELECT oid FROM rel) AND a.attnum > 0
            UNION ALL
            SELECT 'pg_proc'::regclass::oid, f.oid, 0, f.oid::regprocedure::text FROM fn AS f
            UNION ALL
            SELECT 'pg_type'::regclass::oid, t.oid, 0, t.oid::regtype::text FROM typ AS t
            UNION ALL
            SELECT 'pg_constraint'::regclass::oid, c.oid, 0, format('%s %I', coalesce(c.conrelid::regclass::text, c.contypid::regtype::text), c.conname)
              FROM pg_constraint AS c WHERE c.conrelid IN (SELECT oid FROM rel) OR c.contypid IN (SELECT oid FROM typ)
            UNION ALL
            SELECT 'pg_trigger'::regclass::oid, g.oid, 0, format('%s %I', g.tgrelid::regclass, g.tgname)
              FROM pg_trigger AS g WHERE g.tgrelid IN (SELECT oid FROM rel)
            UNION ALL
            SELECT 'pg_namespace'::regclass::oid, n.oid, 0, quote_ident(n.nspname) FROM ns AS n
           ) AS o (classoid, objoid, objsubid, name)
        ON o.classoid = d.classoid AND o.objoid = d.objoid AND o.objsubid = d.objsubid
)
SELECT l FROM line`

// lockWait bounds how long Fingerprint waits for a lock on a table.
const lockWait = 10 * time.Second

// Querier is what Fingerprint needs of a connection: *pgx.Conn, a
// *pgxpool.Pool, or a transaction.
type Querier interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Fingerprint returns the md5 of the schema the migrations build, as
// fingerprintQuery describes it, read in one read-only transaction of q.
// Two databases with the same fingerprint have the same tables, columns,
// constraints, indexes, views, functions and types, whatever their data.
func Fingerprint(ctx context.Context, q Querier) (string, error) {
	lines, err := FingerprintLines(ctx, q)
	if err != nil {
		return "", err
	}
	return Sum(lines), nil
}

// Sum is the fingerprint of lines as FingerprintLines returns them.
func Sum(lines []string) string {
	sum := md5.Sum([]byte(strings.Join(lines, "\n")))
	return hex.EncodeToString(sum[:])
}

// Prebuilt holds the indexes a migration creates IF NOT EXISTS that the
// README tells operators of large tables to build beforehand with CREATE
// INDEX CONCURRENTLY: the schema before such a migration may have them.
// WithoutIndexes takes them out of its lines to compare it.
var Prebuilt = map[uint][]string{
	11: {"ordertimeout.orders_closed_at", "ordertimeout.orders_paid_at"},
}

// IsVersion reports whether lines, a schema's (FingerprintLines), are
// version's as the migrations build it (fps, Fingerprints), also with the
// indexes of a later migration in Prebuilt built beforehand.
func IsVersion(lines []string, version uint, fps map[uint]string) bool {
	want, ok := fps[version]
	if !ok {
		return false
	}
	if Sum(lines) == want {
		return true
	}
	var later []string
	for m, indexes := range Prebuilt {
		if m > version {
			later = append(later, indexes...)
		}
	}
	return len(later) > 0 && Sum(WithoutIndexes(lines, later)) == want
}

// WithoutIndexes returns lines without those of the indexes named (schema
// qualified), but for an invalid one (a CREATE INDEX CONCURRENTLY that
// failed), which the migration's IF NOT EXISTS would keep as it is.
func WithoutIndexes(lines []string, indexes []string) []string {
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		drop := false
		if strings.HasSuffix(l, " INVALID") {
			out = append(out, l)
			continue
		}
		for _, name := range indexes {
			schema, index, _ := strings.Cut(name, ".")
			if strings.HasPrefix(l, "index CREATE INDEX "+index+" ON "+schema+".") ||
				strings.HasPrefix(l, "index CREATE UNIQUE INDEX "+index+" ON "+schema+".") ||
				strings.HasPrefix(l, "relation "+name+" i ") ||
				strings.HasPrefix(l, "comment "+name+" ") {
				drop = true
				break
			}
		}
		if !drop {
			out = append(out, l)
		}
	}
	return out
}

// FingerprintLines returns the lines Fingerprint sums, sorted byte-wise:
// what to compare when two fingerprints differ.
func FingerprintLines(ctx context.Context, q Querier) ([]string, error) {
	return FingerprintLinesWaiting(ctx, q, lockWait)
}

// FingerprintLinesWaiting is FingerprintLines waiting at most wait for a
// lock another transaction holds on a table of the schema.
func FingerprintLinesWaiting(ctx context.Context, q Querier, wait time.Duration) ([]string, error) {
	tx, err := q.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("fingerprint the schema: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // read only
	if _, err := tx.Exec(ctx, "SET TRANSACTION READ ONLY"); err != nil {
		return nil, fmt.Errorf("fingerprint the schema: %w", err)
	}
	// River's tables are where golang-migrate's is: in the current schema
	// of the connection's own search_path, which is read before it is set.
	var current *string
	if err := tx.QueryRow(ctx, "SELECT current_schema()").Scan(&current); err != nil {
		return nil, fmt.Errorf("fingerprint the schema: %w", err)
	}
	// The deparsed text writes intervals in IntervalStyle and quotes names
	// by quote_all_identifiers, which a role or a database may set; the
	// others are pinned so that no setting of the session can change a
	// line. Deparsing a column's default takes a lock on its table: a
	// transaction that holds one (a migration running, a LOCK TABLE) is
	// waited for at most lockWait.
	if _, err := tx.Exec(ctx, `SET LOCAL search_path = pg_catalog;
		SET LOCAL IntervalStyle = postgres; SET LOCAL quote_all_identifiers = off;
		SET LOCAL DateStyle = 'ISO, MDY'; SET LOCAL TimeZone = 'UTC'; SET LOCAL extra_float_digits = 1;
		SET LOCAL bytea_output = hex; SET LOCAL lock_timeout = `+fmt.Sprint(max(wait.Milliseconds(), 1))); err != nil {
		return nil, fmt.Errorf("fingerprint the schema: %w", err)
	}
	rows, err := tx.Query(ctx, fingerprintQuery, current)
	if err != nil {
		return nil, fmt.Errorf("fingerprint the schema: %w", err)
	}
	all, err := pgx.CollectRows(rows, pgx.RowTo[*string])
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "55P03" {
		return nil, fmt.Errorf("fingerprint the schema: another transaction holds a lock on one of its tables "+
			"(a migration running, a LOCK TABLE; pg_locks names it), waited for %s: try again once it ends: %w", wait, err)
	}
	if err != nil {
		return nil, fmt.Errorf("fingerprint the schema: %w", err)
	}
	lines := make([]string, 0, len(all))
	for _, l := range all {
		if l != nil {
			lines = append(lines, *l)
		}
	}
	slices.Sort(lines)
	return lines, nil
}

var fingerprintLine = regexp.MustCompile(`^([0-9]{6}) ([0-9a-f]{32})$`)

// Fingerprints returns the fingerprint of the schema after each migration,
// by version (0: no migration applied), as `make fingerprints` recorded
// them.
func Fingerprints() (map[uint]string, error) {
	return parseFingerprints(fingerprintsFile)
}

func parseFingerprints(text string) (map[uint]string, error) {
	out := make(map[uint]string)
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := fingerprintLine.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("migrations/fingerprints.txt line %d: want \"NNNNNN <md5>\", got %q", n, line)
		}
		v, _ := strconv.ParseUint(m[1], 10, 32)
		if _, dup := out[uint(v)]; dup {
			return nil, fmt.Errorf("migrations/fingerprints.txt line %d: version %d twice", n, v)
		}
		out[uint(v)] = m[2]
	}
	return out, sc.Err()
}

// FormatFingerprints writes fingerprints by version in the format of
// migrations/fingerprints.txt.
func FormatFingerprints(fps map[uint]string) string {
	var b strings.Builder
	b.WriteString("# The schema's fingerprint (migrations.Fingerprint) after each migration, 0 for none.\n")
	b.WriteString("# Written by `make fingerprints`; `ordertimeout migrate` reads it to tell whether a\n")
	b.WriteString("# migration left dirty (killed, or failed) committed. Do not edit.\n")
	versions := make([]uint, 0, len(fps))
	for v := range fps {
		versions = append(versions, v)
	}
	slices.Sort(versions)
	for _, v := range versions {
		fmt.Fprintf(&b, "%06d %s\n", v, fps[v])
	}
	return b.String()
}

// Unseen holds the migrations whose change Fingerprint cannot see (the
// schema after one is the schema before it), each with a query that
// answers whether it committed, or "" for one that may run again as if it
// had not: 000008, River's v8, only records itself in river_migration;
// 000021 only analyzes, or empties, tables that hold no rows. TestFingerprints
// keeps this list true.
var Unseen = map[uint]string{
	8:  `SELECT EXISTS (SELECT 1 FROM river_migration WHERE line = 'main' AND version = 8)`,
	21: "",
}
