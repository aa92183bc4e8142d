package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// The test repository's first commit: a table, functions and views, and the
// grants of a fresh install. ROLE_A and ROLE_B are replaced by roles of the
// test's own.
var version1 = map[string]string{
	"sql/install.sql": `\ir schema.sql
\ir views.sql
\ir ../plpgsql/items.sql
\ir ../plpgsql/restock.sql
\ir grants.sql
`,
	"sql/schema.sql": `CREATE SCHEMA ordertimeout;
CREATE TABLE ordertimeout.items (
    id integer PRIMARY KEY,
    qty integer NOT NULL
);
`,
	"sql/views.sql": `-- Items, for reading.
CREATE VIEW ordertimeout.item_list AS
SELECT i.id, i.qty
FROM ordertimeout.items AS i;

COMMENT ON VIEW ordertimeout.item_list IS 'every item';

CREATE VIEW ordertimeout.item_count AS
SELECT count(*) AS n FROM ordertimeout.item_list;

CREATE VIEW ordertimeout.item_ids AS
SELECT i.id FROM ordertimeout.items AS i;
`,
	"plpgsql/items.sql": `-- A helper whose body changes.
CREATE FUNCTION ordertimeout._count_items()
RETURNS bigint
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (SELECT count(*) FROM ordertimeout.items);
END
$$;

-- An API function whose parameters and result type change.
CREATE FUNCTION ordertimeout.item_qty(id integer)
RETURNS integer
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (SELECT i.qty FROM ordertimeout.items AS i WHERE i.id = item_qty.id);
END
$$;

COMMENT ON FUNCTION ordertimeout.item_qty(integer) IS 'the quantity of an item';

-- A helper that goes away; a semicolon; in a comment, and one in a string.
CREATE FUNCTION ordertimeout._old_helper(label text)
RETURNS text
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $body$
BEGIN
    RETURN label || ';';
END
$body$;

COMMENT ON FUNCTION ordertimeout._old_helper(text) IS 'gone in version 2; really';
`,
	"plpgsql/restock.sql": `CREATE PROCEDURE ordertimeout.restock(amount integer DEFAULT 1)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    UPDATE ordertimeout.items SET qty = qty + amount;
END
$$;

COMMENT ON PROCEDURE ordertimeout.restock(integer) IS 'adds to every item';
`,
	"sql/grants.sql": `REVOKE ALL ON ALL FUNCTIONS IN SCHEMA ordertimeout FROM PUBLIC;
REVOKE ALL ON ALL PROCEDURES IN SCHEMA ordertimeout FROM PUBLIC;
GRANT USAGE ON SCHEMA ordertimeout TO ROLE_A, ROLE_B;
GRANT EXECUTE ON FUNCTION
    ordertimeout.item_qty(integer)
TO ROLE_B, ROLE_A;
GRANT EXECUTE ON PROCEDURE ordertimeout.restock(integer) TO ROLE_A;
GRANT SELECT ON ordertimeout.item_list TO ROLE_B;
GRANT SELECT ON ALL TABLES IN SCHEMA ordertimeout TO ROLE_A;
`,
	"migrations/000001_create_items.up.sql":   "SELECT 1;\n",
	"migrations/000001_create_items.down.sql": "SELECT 1;\n",
}

// The second commit: _count_items's body changed, item_qty takes another
// parameter and returns bigint, _old_helper is gone, item_list has a new
// column (so it and item_count, which reads it, are dropped and created
// again) and reads a new view (which must come first), item_ids has a new
// WHERE, a new SQL function reads the new view (SQL bodies are checked at
// CREATE: it must come after), a new function has VARIADIC and OUT
// parameters, and only the comment of restock changed.
var version2 = map[string]string{
	"sql/views.sql": `CREATE VIEW ordertimeout.big_items AS
SELECT i.id, i.qty
FROM ordertimeout.items AS i
WHERE i.qty > 100;

COMMENT ON VIEW ordertimeout.big_items IS 'items with more than 100';

-- Items, for reading: a column more, at the end.
CREATE VIEW ordertimeout.item_list AS
SELECT i.id, i.qty, i.id IN (SELECT b.id FROM ordertimeout.big_items AS b) AS big
FROM ordertimeout.items AS i;

COMMENT ON VIEW ordertimeout.item_list IS 'every item, big or not';

CREATE VIEW ordertimeout.item_count AS
SELECT count(*) AS n FROM ordertimeout.item_list;

CREATE VIEW ordertimeout.item_ids AS
SELECT i.id FROM ordertimeout.items AS i WHERE i.qty >= 0;
`,
	"plpgsql/items.sql": `CREATE FUNCTION ordertimeout._count_items()
RETURNS bigint
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (SELECT count(*) FROM ordertimeout.items AS i WHERE i.qty > 0);
END
$$;

CREATE FUNCTION ordertimeout.item_qty(id integer, fallback integer DEFAULT 0)
RETURNS bigint
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN coalesce((SELECT i.qty FROM ordertimeout.items AS i WHERE i.id = item_qty.id), fallback);
END
$$;

COMMENT ON FUNCTION ordertimeout.item_qty(integer, integer) IS 'the quantity of an item, or fallback';

CREATE FUNCTION ordertimeout._big_count()
RETURNS bigint
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT count(*) FROM ordertimeout.big_items;
$$;

CREATE FUNCTION ordertimeout._sum_of(VARIADIC amounts integer[], OUT total bigint)
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    SELECT sum(a) INTO total FROM unnest(amounts) AS a;
END
$$;
`,
	"plpgsql/restock.sql": `CREATE PROCEDURE ordertimeout.restock(amount integer DEFAULT 1)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    UPDATE ordertimeout.items SET qty = qty + amount;
END
$$;

COMMENT ON PROCEDURE ordertimeout.restock(integer) IS 'adds amount to every item';
`,
}

func init() {
	// Version 2's grants: item_qty's new signature, and the new view.
	version2["sql/grants.sql"] = strings.NewReplacer(
		"ordertimeout.item_qty(integer)", "ordertimeout.item_qty(integer, integer)",
		"ON ordertimeout.item_list TO", "ON ordertimeout.item_list, ordertimeout.big_items TO",
	).Replace(version1["sql/grants.sql"])
}

// testRepo is a git repository with version1 and version2 committed.
type testRepo struct {
	dir           string
	first, second string // commit hashes
	roleA, roleB  string
	migrationsDir string
}

func newTestRepo(t *testing.T, roleA, roleB string) *testRepo {
	t.Helper()
	r := &testRepo{dir: t.TempDir(), roleA: roleA, roleB: roleB}
	r.migrationsDir = filepath.Join(r.dir, "migrations")
	r.gitRun(t, "init", "-q", "-b", "main")
	r.write(t, version1)
	r.first = r.commit(t, "version 1")
	r.write(t, version2)
	r.second = r.commit(t, "version 2")
	return r
}

func (r *testRepo) write(t *testing.T, files map[string]string) {
	t.Helper()
	for name, text := range files {
		text = strings.ReplaceAll(strings.ReplaceAll(text, "ROLE_A", r.roleA), "ROLE_B", r.roleB)
		path := filepath.Join(r.dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
	}
}

func (r *testRepo) gitRun(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", r.dir,
		"-c", "user.name=genmigration test", "-c", "user.email=test@example.invalid", "-c", "commit.gpgsign=false"}, args...)...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
}

func (r *testRepo) commit(t *testing.T, msg string) string {
	t.Helper()
	r.gitRun(t, "add", "-A")
	r.gitRun(t, "commit", "-q", "-m", msg)
	return r.gitRun(t, "rev-parse", "HEAD")
}

// gen runs the command in the repository.
func (r *testRepo) gen(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), r.dir, args, &stdout, &stderr)
	return stdout.String() + stderr.String(), err
}

func (r *testRepo) read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.dir, filepath.FromSlash(name)))
	require.NoError(t, err)
	return string(b)
}

func TestGenerateAppliesUpAndDown(t *testing.T) {
	ctx := context.Background()
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		t.Skip("DATABASE_URL is not set (tests/bin/withpg sets it)")
	}
	db, roleA, roleB := throwawayDatabase(t, url)
	repo := newTestRepo(t, roleA, roleB)
	repo.write(t, map[string]string{
		"migrations/hand/up.sql":      "ALTER TABLE ordertimeout.items ADD COLUMN note text;\n",
		"migrations/hand/down.sql":    "ALTER TABLE ordertimeout.items DROP COLUMN note;\n",
		"migrations/hand/comment.txt": "Items get a note.\n",
	})
	// The working tree gets the prelude's column too, as sql/ would.
	repo.write(t, map[string]string{"sql/schema.sql": version1["sql/schema.sql"] + "ALTER TABLE ordertimeout.items ADD COLUMN note text;\n"})

	out, err := repo.gen(t, "-from", repo.first[:7], "-name", "000002_add_item_notes",
		"-up-prelude", "migrations/hand/up.sql", "-down-postlude", "migrations/hand/down.sql", "-comment", "migrations/hand/comment.txt")
	require.NoError(t, err, out)
	up := repo.read(t, "migrations/000002_add_item_notes.up.sql")
	down := repo.read(t, "migrations/000002_add_item_notes.down.sql")
	t.Logf("up:\n%s\ndown:\n%s", up, down)

	require.True(t, strings.HasPrefix(up, "-- Code generated by genmigration; DO NOT EDIT.\n"))
	require.Contains(t, up, "-from "+repo.first[:7])
	require.Contains(t, up, repo.first)
	require.Contains(t, up, "-- Items get a note.\n")
	require.Contains(t, up, "DROP FUNCTION ordertimeout.item_qty(integer);")
	require.Contains(t, up, "DROP FUNCTION ordertimeout._old_helper(text);")
	require.Contains(t, up, "REVOKE ALL ON FUNCTION ordertimeout._sum_of(VARIADIC integer[]) FROM PUBLIC;")
	require.Contains(t, up, "REVOKE ALL ON FUNCTION ordertimeout.item_qty(integer, integer) FROM PUBLIC;")
	require.Contains(t, up, "DROP VIEW ordertimeout.item_count;\nDROP VIEW ordertimeout.item_list;\n", "dependent view first")
	require.Contains(t, up, "CREATE OR REPLACE VIEW ordertimeout.item_ids")
	require.Contains(t, up, "CREATE OR REPLACE FUNCTION ordertimeout._count_items()")
	require.NotContains(t, up, "CREATE OR REPLACE PROCEDURE ordertimeout.restock", "only restock's comment changed")
	require.Contains(t, down, "DROP FUNCTION ordertimeout.item_qty(integer, integer);")
	require.Contains(t, down, "DROP VIEW ordertimeout.big_items;")
	requireOrder(t, up, "ALTER TABLE ordertimeout.items ADD COLUMN note", "DROP VIEW ordertimeout.item_count",
		"CREATE VIEW ordertimeout.big_items", "CREATE VIEW ordertimeout.item_list", "CREATE VIEW ordertimeout.item_count",
		"CREATE FUNCTION ordertimeout._big_count")
	requireOrder(t, down, "DROP VIEW ordertimeout.item_count;\nDROP VIEW ordertimeout.item_list;\n",
		"CREATE VIEW ordertimeout.item_list", "DROP VIEW ordertimeout.big_items",
		"ALTER TABLE ordertimeout.items DROP COLUMN note")
	requireOrder(t, down, "DROP FUNCTION ordertimeout._big_count", "DROP VIEW ordertimeout.big_items")

	conn := connect(t, url, db)
	install := func(files map[string]string, extra string) {
		t.Helper()
		_, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS ordertimeout CASCADE")
		require.NoError(t, err)
		for _, m := range regexp.MustCompile(`\\ir \.{0,2}/?(\S+)`).FindAllStringSubmatch(version1["sql/install.sql"], -1) {
			name := m[1]
			if !strings.HasPrefix(name, "plpgsql/") {
				name = "sql/" + name
			}
			text, ok := files[name]
			if !ok {
				text = version1[name]
			}
			text = strings.ReplaceAll(strings.ReplaceAll(text, "ROLE_A", roleA), "ROLE_B", roleB)
			if name == "sql/schema.sql" {
				text += extra
			}
			_, err := conn.Exec(ctx, text)
			require.NoError(t, err, "install %s", name)
		}
	}
	migrate := func(name, text string) {
		t.Helper()
		tx, err := conn.Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, text)
		require.NoError(t, err, "apply %s", name)
		require.NoError(t, tx.Commit(ctx))
	}

	install(version1, "")
	want1 := describe(t, conn)
	migrate("up", up)
	gotUp := describe(t, conn)
	migrate("down", down)
	gotDown := describe(t, conn)
	install(version2, "ALTER TABLE ordertimeout.items ADD COLUMN note text;\n")
	want2 := describe(t, conn)

	require.Equal(t, want2, gotUp, "version 1 + up differs from a fresh install of version 2")
	require.Equal(t, want1, gotDown, "version 1 + up + down differs from a fresh install of version 1")
	require.Contains(t, gotUp, "function ordertimeout.item_qty(integer,integer) returns bigint", "signature changed")
	require.Regexp(t, `acl ordertimeout.item_qty\(integer,integer\): \{\w+=X/\w+,`+roleB+`=X/\w+,`+roleA+`=X/\w+\}`, gotUp,
		"the re-created function has its grants back, in grants.sql's order")
	require.NotContains(t, gotUp, "_old_helper")
	require.Contains(t, gotDown, "_old_helper")

	// -to: the same migration from two commits instead of the working tree.
	out, err = repo.gen(t, "-from", repo.first, "-to", repo.second, "-name", "000002_add_item_notes", "-force")
	require.NoError(t, err, out)
	require.Contains(t, repo.read(t, "migrations/000002_add_item_notes.up.sql"), "DROP FUNCTION ordertimeout.item_qty(integer);")

	// -exclude: what a later migration changes is left out, and a later
	// migration gets a note.
	repo.write(t, map[string]string{
		"migrations/000003_change_item_qty.up.sql":   "SELECT 1;\n",
		"migrations/000003_change_item_qty.down.sql": "SELECT 1;\n",
	})
	out, err = repo.gen(t, "-from", repo.first, "-name", "000002_add_item_notes", "-exclude", "item_qty, _old_helper", "-force")
	require.NoError(t, err, out)
	require.Contains(t, out, "later migrations sit on top of 000002_add_item_notes (000003_change_item_qty)")
	up = repo.read(t, "migrations/000002_add_item_notes.up.sql")
	require.Contains(t, up, "-exclude item_qty, _old_helper")
	require.NotContains(t, up, "FUNCTION ordertimeout.item_qty")
	require.NotContains(t, up, "_old_helper(")
	require.Contains(t, up, "CREATE OR REPLACE FUNCTION ordertimeout._count_items()")
}

// requireOrder checks that each of parts occurs in text, in this order.
func requireOrder(t *testing.T, text string, parts ...string) {
	t.Helper()
	at := -1
	for _, p := range parts {
		i := strings.Index(text, p)
		require.GreaterOrEqual(t, i, 0, "%q missing", p)
		require.Greater(t, i, at, "%q comes too early", p)
		at = i
	}
}

func TestGenerateRefuses(t *testing.T) {
	t.Parallel()
	repo := newTestRepo(t, "role_a", "role_b")
	repo.write(t, map[string]string{"migrations/hand/comment.txt": "why\n"})
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no revision", []string{"-name", "000002_add_notes"}, "-from is required"},
		{"no name", []string{"-from", "HEAD~1"}, "-name is required"},
		{"unknown revision", []string{"-from", "no-such-branch", "-name", "000002_add_notes"}, `revision "no-such-branch" does not exist`},
		{"option as revision", []string{"-from", "--all", "-name", "000002_add_notes"}, "not a revision name"},
		{"short number", []string{"-from", "HEAD~1", "-name", "2_add_notes"}, "want NNNNNN_verb_object"},
		{"uppercase", []string{"-from", "HEAD~1", "-name", "000002_Add_notes"}, "want NNNNNN_verb_object"},
		{"dash", []string{"-from", "HEAD~1", "-name", "000002-add-notes"}, "want NNNNNN_verb_object"},
		{"path", []string{"-from", "HEAD~1", "-name", "../000002_add_notes"}, "want NNNNNN_verb_object"},
		{"gap", []string{"-from", "HEAD~1", "-name", "000003_add_notes"}, "the next free migration number is 000002"},
		{"taken", []string{"-from", "HEAD~1", "-name", "000001_add_notes"}, "number 000001 is taken by migrations/000001_create_items"},
		{"exists", []string{"-from", "HEAD~1", "-name", "000001_create_items"}, "000001_create_items.up.sql exists: -force"},
		{"nothing changed", []string{"-from", "HEAD", "-name", "000002_add_notes"}, "nothing to migrate"},
		{"missing prelude", []string{"-from", "HEAD~1", "-name", "000002_add_notes", "-up-prelude", "nope.sql"}, "nope.sql does not exist"},
		{"argument", []string{"-from", "HEAD~1", "-name", "000002_add_notes", "extra"}, `unexpected argument "extra"`},
		{"exclude unknown", []string{"-from", "HEAD~1", "-name", "000002_add_notes", "-exclude", "nosuch"}, "-exclude nosuch: no function, procedure or view of that name"},
		{"exclude malformed", []string{"-from", "HEAD~1", "-name", "000002_add_notes", "-exclude", "item_qty;drop"}, `-exclude "item_qty;drop": want names`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := listDir(t, repo.migrationsDir)
			out, err := repo.gen(t, c.args...)
			require.Error(t, err, out)
			require.Contains(t, err.Error(), c.want)
			require.Equal(t, before, listDir(t, repo.migrationsDir), "a refused run wrote files")
		})
	}

	t.Run("force", func(t *testing.T) {
		out, err := repo.gen(t, "-from", "HEAD~1", "-to", "HEAD", "-name", "000001_create_items", "-force")
		require.NoError(t, err, out)
		require.Contains(t, repo.read(t, "migrations/000001_create_items.up.sql"), "-- Code generated by genmigration")
	})

	t.Run("help", func(t *testing.T) {
		out, err := repo.gen(t, "-help")
		require.ErrorIs(t, err, flag.ErrHelp)
		for _, flag := range []string{"-from", "-to", "-name", "-up-prelude", "-down-postlude", "-comment", "-exclude", "-force"} {
			require.Regexp(t, `(?m)^  `+flag+`\b`, out)
		}
	})
}

func TestParseRefusesUnknownStatements(t *testing.T) {
	t.Parallel()
	repo := newTestRepo(t, "role_a", "role_b")
	repo.write(t, map[string]string{"plpgsql/restock.sql": version2["plpgsql/restock.sql"] +
		"\nCREATE TABLE ordertimeout.t (id integer);\n"})
	_, err := repo.gen(t, "-from", "HEAD", "-name", "000002_add_table")
	require.Error(t, err)
	require.Contains(t, err.Error(), "plpgsql/restock.sql at the working tree: line 12: the tool only diffs")

	repo.write(t, map[string]string{"plpgsql/restock.sql": "CREATE FUNCTION public.f() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$;\n"})
	_, err = repo.gen(t, "-from", "HEAD", "-name", "000002_add_table")
	require.ErrorContains(t, err, "line 1: FUNCTION public.f is not in schema ordertimeout")

	repo.write(t, map[string]string{"plpgsql/restock.sql": "CREATE FUNCTION ordertimeout.f() RETURNS int LANGUAGE sql AS $$ SELECT 1;\n"})
	_, err = repo.gen(t, "-from", "HEAD", "-name", "000002_add_table")
	require.ErrorContains(t, err, "unterminated dollar-quoted string $$")
}

func TestSignature(t *testing.T) {
	t.Parallel()
	snap := &snapshot{schema: "s", objects: map[string]*object{}}
	pos := 0
	require.NoError(t, snap.parseFile("f.sql", `
CREATE FUNCTION s.f(
    a   integer,
    OUT b text,
    INOUT c numeric(12, 2) DEFAULT 0,
    double precision,
    d   timestamp with time zone = now(),
    VARIADIC e text[] DEFAULT '{}')
RETURNS record LANGUAGE sql AS 'SELECT 1';
CREATE FUNCTION s.g() RETURNS TABLE (x int, y   text) LANGUAGE sql AS $x$ SELECT 1, ';' $x$;
`, &pos))
	f := snap.objects["f"]
	require.Equal(t, "s.f(integer, numeric(12,2), double precision, timestamp with time zone, VARIADIC text[])", f.signature("s"))
	require.Equal(t, 3, f.defaults)
	require.Equal(t, "record", f.returns)
	require.Equal(t, "table(x int,y text)", snap.objects["g"].returns)
	require.Equal(t, "s.g()", snap.objects["g"].signature("s"))
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		info, err := e.Info()
		require.NoError(t, err)
		names = append(names, e.Name()+" "+info.ModTime().String())
	}
	return names
}

// throwawayDatabase creates an empty database and two roles, dropped when
// the test ends.
func throwawayDatabase(t *testing.T, url string) (db, roleA, roleB string) {
	t.Helper()
	ctx := context.Background()
	suffix := randomHex(t)
	db, roleA, roleB = "genmigration_"+suffix, "genmigration_"+suffix+"_a", "genmigration_"+suffix+"_b"
	admin, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	for _, stmt := range []string{"CREATE DATABASE " + db, "CREATE ROLE " + roleA, "CREATE ROLE " + roleB} {
		_, err := admin.Exec(ctx, stmt)
		require.NoError(t, err, stmt)
	}
	t.Cleanup(func() {
		for _, stmt := range []string{"DROP DATABASE IF EXISTS " + db + " WITH (FORCE)", "DROP ROLE IF EXISTS " + roleA, "DROP ROLE IF EXISTS " + roleB} {
			if _, err := admin.Exec(ctx, stmt); err != nil {
				t.Errorf("%s: %v", stmt, err)
			}
		}
		_ = admin.Close(ctx)
	})
	return db, roleA, roleB
}

func connect(t *testing.T, url, db string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(url)
	require.NoError(t, err)
	cfg.Database = db
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(ctx) })
	return conn
}

func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// describe lists what the test compares of schema ordertimeout: every
// function with its definition, privileges and comment, every relation
// with its columns, view definition, privileges and comment.
func describe(t *testing.T, conn *pgx.Conn) string {
	t.Helper()
	rows, err := conn.Query(context.Background(), `
SELECT 'function ' || p.oid::regprocedure::text || ' returns ' || coalesce(pg_get_function_result(p.oid), 'void')
       || E'\n' || pg_get_functiondef(p.oid)
       || E'\nacl ' || p.oid::regprocedure::text || ': ' || coalesce(p.proacl::text, '(default)')
       || E'\ncomment: ' || coalesce(obj_description(p.oid, 'pg_proc'), '(none)')
FROM pg_proc AS p
WHERE p.pronamespace = 'ordertimeout'::regnamespace
UNION ALL
SELECT 'relation ' || c.oid::regclass::text || ' ' || c.relkind::text
       || ' (' || (SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod), ', ' ORDER BY a.attnum)
                   FROM pg_attribute AS a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped) || ')'
       || E'\n' || coalesce(pg_get_viewdef(c.oid), '')
       || E'\nacl ' || c.oid::regclass::text || ': ' || coalesce(c.relacl::text, '(default)')
       || E'\ncomment: ' || coalesce(obj_description(c.oid, 'pg_class'), '(none)')
FROM pg_class AS c
WHERE c.relnamespace = 'ordertimeout'::regnamespace
  AND c.relkind IN ('r', 'v')
ORDER BY 1`)
	require.NoError(t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return strings.Join(lines, "\n\n")
}

func TestParseGrants(t *testing.T) {
	t.Parallel()
	grants, err := parseGrants(`
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA s FROM PUBLIC;
GRANT USAGE ON SCHEMA s TO a;
GRANT USAGE, SELECT ON SEQUENCE s.seq TO a;
GRANT a TO b;
GRANT EXECUTE ON FUNCTION
    s.f(integer, text),
    s.g()
TO a, b;
GRANT EXECUTE ON ALL ROUTINES IN SCHEMA s TO c;
GRANT SELECT ON s.v, other.w TO b;
GRANT SELECT ON ALL TABLES IN SCHEMA s TO d;
GRANT SELECT ON ALL TABLES IN SCHEMA other TO d;
DO $$ BEGIN EXECUTE 'GRANT SELECT ON s.x TO a'; END $$;
`, "s")
	require.NoError(t, err)
	require.Equal(t, []grant{
		{privileges: "EXECUTE", targets: []string{"f", "g"}, roles: "a, b"},
		{privileges: "EXECUTE", all: []string{kindFunction, kindProcedure}, roles: "c"},
		{privileges: "SELECT", targets: []string{"v"}, roles: "b"},
		{privileges: "SELECT", all: []string{kindView}, roles: "d"},
	}, grants)
}
