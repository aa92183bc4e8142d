// Package layout checks the rule that says where every SQL function lives, so
// a newcomer finds a function by its name and a River upgrade touches one file.
//
// The rule (README, Development): plpgsql/<name>.sql defines the API function
// <name> and nothing else, and its pgTAP tests are in tests/pgtap/<name>/.
// Every other file of plpgsql/ is named after a concept (conceptFiles) and
// defines private helpers only (names starting with "_"). Every statement that
// reads or writes River's tables is in plpgsql/jobs.sql. sql/install.sql
// includes every file of plpgsql/ once.
package layout

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
	"github.com/ordertimeout/ordertimeout/sidecar/timer"
)

// conceptFiles are the files of private helpers, by what they are about.
var conceptFiles = map[string]string{
	"checks":   "input checks shared by the API functions",
	"events":   "the audit trail (order_events) and its actor",
	"jobs":     "every statement on River's tables: timers, outbound jobs",
	"orders":   "reading, locking and cancelling orders",
	"payments": "payment transitions shared by several API functions",
	"release":  "the stock release log: release, consume, reclaim",
}

var createRE = regexp.MustCompile(`(?m)^CREATE (?:OR REPLACE )?(FUNCTION|PROCEDURE) ordertimeout\.(\w+)\(`)

func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	return dir
}

// definitions maps each plpgsql/ file (without .sql) to the functions it creates.
func definitions(t *testing.T) map[string][]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root(t), "plpgsql", "*.sql"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	defs := map[string][]string{}
	for _, f := range files {
		text, err := os.ReadFile(f)
		require.NoError(t, err)
		name := strings.TrimSuffix(filepath.Base(f), ".sql")
		defs[name] = []string{}
		for _, m := range createRE.FindAllStringSubmatch(string(text), -1) {
			defs[name] = append(defs[name], m[2])
		}
	}
	return defs
}

func TestEveryFunctionIsWhereItsNameSays(t *testing.T) {
	seen := map[string]string{}
	defs := definitions(t)
	for file, fns := range defs {
		_, concept := conceptFiles[file]
		for _, fn := range fns {
			if prev, ok := seen[fn]; ok && prev != file {
				t.Errorf("%s is defined in plpgsql/%s.sql and plpgsql/%s.sql", fn, prev, file)
			}
			seen[fn] = file
			private := strings.HasPrefix(fn, "_")
			switch {
			case concept && !private:
				t.Errorf("plpgsql/%s.sql (%s) defines API function %s: it belongs in plpgsql/%s.sql",
					file, conceptFiles[file], fn, fn)
			case !concept && fn != file:
				t.Errorf("plpgsql/%s.sql defines %s: a file named after an API function defines that function only (helpers go to one of %v)",
					file, fn, sortedKeys(conceptFiles))
			}
		}
		if !concept && len(fns) == 0 {
			t.Errorf("plpgsql/%s.sql defines no function; a file is named after its API function or is one of %v",
				file, sortedKeys(conceptFiles))
		}
		if !concept {
			tests, err := filepath.Glob(filepath.Join(root(t), "tests", "pgtap", file, "*.sql"))
			require.NoError(t, err)
			if len(tests) == 0 {
				t.Errorf("API function %s has no pgTAP tests in tests/pgtap/%s/", file, file)
			}
		}
	}
	for c := range conceptFiles {
		if _, ok := defs[c]; !ok {
			t.Errorf("concept file plpgsql/%s.sql is missing: remove it from conceptFiles", c)
		}
	}
}

func TestInstallIncludesEveryFileOnce(t *testing.T) {
	text, err := os.ReadFile(filepath.Join(root(t), "sql", "install.sql"))
	require.NoError(t, err)
	counts := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^\\ir \.\./plpgsql/(\w+)\.sql$`).FindAllStringSubmatch(string(text), -1) {
		counts[m[1]]++
	}
	for file := range definitions(t) {
		require.Equal(t, 1, counts[file], "sql/install.sql must include plpgsql/%s.sql once", file)
		delete(counts, file)
	}
	require.Empty(t, counts, "sql/install.sql includes files that plpgsql/ does not have")
}

// TestRiverTablesHaveOneOwner: only plpgsql/jobs.sql names River's tables,
// so a River upgrade touches one file.
func TestRiverTablesHaveOneOwner(t *testing.T) {
	for _, dir := range []string{"plpgsql", "sql"} {
		files, err := filepath.Glob(filepath.Join(root(t), dir, "*.sql"))
		require.NoError(t, err)
		for _, f := range files {
			text, err := os.ReadFile(f)
			require.NoError(t, err)
			rel := dir + "/" + filepath.Base(f)
			if rel == "plpgsql/jobs.sql" {
				require.Contains(t, string(text), "public.river_job")
				continue
			}
			for _, word := range []string{"river_job", timer.Name} {
				if strings.Contains(string(text), word) {
					t.Errorf("%s names %q: statements on River's tables belong in plpgsql/jobs.sql", rel, word)
				}
			}
		}
	}
}

// TestDatabaseHasOnlyTheseFunctions: the migrated database has exactly the
// functions plpgsql/ defines (a function created by a migration but missing
// from plpgsql/, or left behind by a rename, fails here).
func TestDatabaseHasOnlyTheseFunctions(t *testing.T) {
	pool := pgtest.NewPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := pool.Query(ctx, `
SELECT p.proname FROM pg_catalog.pg_proc AS p
WHERE p.pronamespace = 'ordertimeout'::regnamespace ORDER BY 1`)
	require.NoError(t, err)
	var inDB []string
	for rows.Next() {
		var name string
		require.NoError(t, rows.Scan(&name))
		inDB = append(inDB, name)
	}
	require.NoError(t, rows.Err())
	var inFiles []string
	for _, fns := range definitions(t) {
		inFiles = append(inFiles, fns...)
	}
	sort.Strings(inFiles)
	require.Equal(t, inFiles, inDB, "functions in the migrated database vs plpgsql/")
}

func TestMain(m *testing.M) { pgtest.Main(m) }

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
