package sqlstate_test

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/sqlstate"
)

var otCode = regexp.MustCompile(`^OT[0-9]{3}$`)

// constants returns the package's string constants by name, and their doc
// comments, read from its source.
func constants(t *testing.T) (values, docs map[string]string) {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "sqlstate.go", nil, parser.ParseComments)
	require.NoError(t, err)
	values, docs = map[string]string{}, map[string]string{}
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			require.Len(t, vs.Names, 1, "one constant per line")
			require.Len(t, vs.Values, 1, "constant %s has a value", vs.Names[0].Name)
			lit, ok := vs.Values[0].(*ast.BasicLit)
			require.True(t, ok && lit.Kind == token.STRING, "constant %s is a string literal", vs.Names[0].Name)
			v, err := strconv.Unquote(lit.Value)
			require.NoError(t, err)
			name := vs.Names[0].Name
			values[name] = v
			doc := vs.Doc
			if doc == nil && len(gd.Specs) == 1 {
				doc = gd.Doc
			}
			if doc != nil {
				docs[name] = doc.Text()
			}
		}
	}
	return values, docs
}

// readmeCodes returns the OT codes of the README's table "Errors" with
// their meanings.
func readmeCodes(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	defer f.Close()
	codes := map[string]string{}
	inErrors := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			inErrors = line == "### Errors"
			continue
		}
		if !inErrors || !strings.HasPrefix(line, "| ") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		require.Len(t, cells, 2, "README errors row %q has two cells", line)
		code, meaning := strings.TrimSpace(cells[0]), strings.TrimSpace(cells[1])
		if code == "SQLSTATE" {
			continue
		}
		require.Regexp(t, otCode, code, "README errors row %q", line)
		require.NotContains(t, codes, code, "README lists %s twice", code)
		require.NotEmpty(t, meaning, "README gives %s a meaning", code)
		codes[code] = meaning
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, codes, "README has a section \"### Errors\" with a table of OT codes")
	return codes
}

func TestConstantsMatchREADME(t *testing.T) {
	t.Parallel()
	values, docs := constants(t)
	readme := readmeCodes(t)

	seen := map[string]string{}
	for name, v := range values {
		if other, ok := seen[v]; ok {
			t.Errorf("%s and %s are both %q", name, other, v)
		}
		seen[v] = name
		doc := docs[name]
		if !strings.HasPrefix(doc, name+" ") {
			t.Errorf("constant %s has no doc comment starting with its name", name)
		}
		if otCode.MatchString(v) {
			if !strings.HasPrefix(doc, fmt.Sprintf("%s (%s)", name, v)) {
				t.Errorf("doc comment of %s does not start with %q", name, fmt.Sprintf("%s (%s)", name, v))
			}
			if _, ok := readme[v]; !ok {
				t.Errorf("%s = %q is not in the README's table of errors", name, v)
			}
		}
	}
	for code, meaning := range readme {
		if _, ok := seen[code]; !ok {
			t.Errorf("README's %s (%s) has no constant in package sqlstate", code, meaning)
		}
	}
}

// TestREADMEListsEveryRaisedCode checks that every OT code the SQL writes
// (RAISE ... USING ERRCODE, or handed to a helper that raises it) is in the
// README's table.
func TestREADMEListsEveryRaisedCode(t *testing.T) {
	t.Parallel()
	readme := readmeCodes(t)
	inSQL := regexp.MustCompile(`'(OT[0-9]{3})'`)
	var files []string
	for _, dir := range []string{"plpgsql", "sql"} {
		m, err := filepath.Glob(filepath.Join("..", "..", dir, "*.sql"))
		require.NoError(t, err)
		files = append(files, m...)
	}
	require.NotEmpty(t, files)
	raised := map[string]bool{}
	for _, file := range files {
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		for _, m := range inSQL.FindAllStringSubmatch(string(b), -1) {
			raised[m[1]] = true
			if _, ok := readme[m[1]]; !ok {
				t.Errorf("%s raises %s, which the README's table of errors does not list", filepath.Base(file), m[1])
			}
		}
	}
	for code := range readme {
		if !raised[code] {
			t.Errorf("README lists %s, which no file in plpgsql/ or sql/ raises", code)
		}
	}
}

func TestIs(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("create order: %w", &pgconn.PgError{Code: sqlstate.InsufficientStock})
	require.True(t, sqlstate.Is(err, sqlstate.InsufficientStock))
	require.True(t, sqlstate.Is(err, sqlstate.UnknownSKU, sqlstate.InsufficientStock))
	require.False(t, sqlstate.Is(err, sqlstate.UnknownSKU))
	require.False(t, sqlstate.Is(err))
	require.Equal(t, sqlstate.InsufficientStock, sqlstate.Code(err))
	require.Equal(t, sqlstate.ClassOT, sqlstate.Class(err))

	plain := fmt.Errorf("dial: %w", os.ErrDeadlineExceeded)
	require.False(t, sqlstate.Is(plain, ""))
	require.Empty(t, sqlstate.Code(plain))
	require.Empty(t, sqlstate.Class(plain))
	require.Empty(t, sqlstate.Code(nil))
	require.True(t, slices.Contains([]string{sqlstate.ClassConnectionException, sqlstate.ClassOperatorIntervention},
		sqlstate.Class(&pgconn.PgError{Code: "57P01"})))
}
