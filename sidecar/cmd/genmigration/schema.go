package main

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
)

// Kinds of object the tool diffs.
const (
	kindFunction  = "FUNCTION"
	kindProcedure = "PROCEDURE"
	kindView      = "VIEW"
)

// object is one function, procedure or view of a snapshot: its CREATE
// statement and the COMMENT ON statements about it.
type object struct {
	kind     string
	name     string // unqualified
	create   string // the CREATE statement, semicolon included
	comments []string
	file     string
	line     int
	order    int // position in install order

	columns []string // views only: see viewColumns

	// Functions and procedures only.
	params   []param
	returns  string // normalized RETURNS clause, "" for procedures
	defaults int    // how many parameters have a default
}

// param is one parameter of a function: its mode (in, out, inout,
// variadic), its name ("" when unnamed) and its normalized type.
type param struct {
	mode, name, typ string
}

// snapshot is the schema objects of one revision, by name, plus what the
// tool needs to write their privileges.
type snapshot struct {
	label   string // "daea0a1" or "the working tree"
	schema  string
	objects map[string]*object
	grants  []grant
}

// grant is one GRANT statement of sql/grants.sql: on the objects it names
// (by unqualified name), or on every object of the kinds in all (VIEW for ON
// ALL TABLES IN SCHEMA, FUNCTION and PROCEDURE for ON ALL ROUTINES...).
type grant struct {
	privileges string
	targets    []string
	all        []string
	roles      string
}

// covers says whether the grant is about o.
func (g grant) covers(o *object) bool {
	return slices.Contains(g.all, o.kind) || slices.Contains(g.targets, o.name)
}

// The files the tool reads, relative to the repository's root.
const (
	functionsDir = "plpgsql"
	viewsFile    = "sql/views.sql"
	installFile  = "sql/install.sql"
	grantsFile   = "sql/grants.sql"
)

// files reads a revision or the working tree.
type files interface {
	// list returns the paths of plpgsql/*.sql and sql/views.sql that exist.
	list() ([]string, error)
	// read returns a file's text, and false when it does not exist.
	read(name string) (string, bool, error)
	// describe names the revision for messages and headers.
	describe() string
}

var (
	createRE  = regexp.MustCompile(`(?is)^CREATE\s+(OR\s+REPLACE\s+)?(FUNCTION|PROCEDURE|VIEW)\s+("?[A-Za-z_][A-Za-z0-9_]*"?)\.("?[A-Za-z_][A-Za-z0-9_]*"?)`)
	commentRE = regexp.MustCompile(`(?is)^COMMENT\s+ON\s+(FUNCTION|PROCEDURE|VIEW|COLUMN)\s+([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)`)
	includeRE = regexp.MustCompile(`(?m)^\\ir?\s+(\S+)`)
	grantRE   = regexp.MustCompile(`(?is)^GRANT\s+(.+?)\s+ON\s+(.+?)\s+TO\s+(.+?)\s*;$`)
	allRE     = regexp.MustCompile(`(?is)^ALL\s+(TABLES|FUNCTIONS|PROCEDURES|ROUTINES)\s+IN\s+SCHEMA\s+([A-Za-z_][A-Za-z0-9_]*)$`)
	otherRE   = regexp.MustCompile(`(?is)^(ALL|SCHEMA|SEQUENCE|DATABASE|TYPE|DOMAIN|LANGUAGE|FOREIGN|LARGE|TABLESPACE|PARAMETER)\s`)
	targetRE  = regexp.MustCompile(`(?is)^(?:(?:FUNCTION|PROCEDURE|ROUTINE|TABLE)\s+)?([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)`)
	orReplace = regexp.MustCompile(`(?is)^CREATE\s+(OR\s+REPLACE\s+)?`)
)

// load parses the functions, procedures and views of a revision.
func load(f files, schema string) (*snapshot, error) {
	snap := &snapshot{label: f.describe(), schema: schema, objects: map[string]*object{}}
	names, err := f.list()
	if err != nil {
		return nil, err
	}
	order, err := installOrder(f, names)
	if err != nil {
		return nil, err
	}
	pos := 0
	for _, name := range order {
		text, _, err := f.read(name)
		if err != nil {
			return nil, err
		}
		if err := snap.parseFile(name, text, &pos); err != nil {
			return nil, fmt.Errorf("%s at %s: %w", name, f.describe(), err)
		}
	}
	if text, ok, err := f.read(grantsFile); err != nil {
		return nil, err
	} else if ok {
		if snap.grants, err = parseGrants(text, schema); err != nil {
			return nil, fmt.Errorf("%s at %s: %w", grantsFile, f.describe(), err)
		}
	}
	return snap, nil
}

// installOrder sorts names in the order sql/install.sql includes them (the
// order that builds the schema from nothing); files it does not include
// follow in the order of their names.
func installOrder(f files, names []string) ([]string, error) {
	rank := map[string]int{}
	text, ok, err := f.read(installFile)
	if err != nil {
		return nil, err
	}
	if ok {
		for i, m := range includeRE.FindAllStringSubmatch(text, -1) {
			rank[path.Clean(path.Join(path.Dir(installFile), m[1]))] = i
		}
	}
	out := slices.Clone(names)
	slices.SortStableFunc(out, func(a, b string) int {
		ra, oka := rank[a]
		rb, okb := rank[b]
		switch {
		case oka && okb:
			return ra - rb
		case oka:
			return -1
		case okb:
			return 1
		}
		return strings.Compare(a, b)
	})
	return out, nil
}

// parseFile adds the objects of one file. Every statement must be a CREATE
// of a function, procedure or view of the schema, or a COMMENT ON one.
func (s *snapshot) parseFile(file, text string, pos *int) error {
	stmts, err := splitStatements(text)
	if err != nil {
		return err
	}
	for _, st := range stmts {
		if m := createRE.FindStringSubmatch(st.text); m != nil {
			schema, name := unquote(m[3]), unquote(m[4])
			if schema != s.schema {
				return fmt.Errorf("line %d: %s %s.%s is not in schema %s", st.line, strings.ToUpper(m[2]), schema, name, s.schema)
			}
			if prev, ok := s.objects[name]; ok {
				return fmt.Errorf("line %d: %s is also defined in %s line %d (overloads are not supported)", st.line, name, prev.file, prev.line)
			}
			o := &object{kind: strings.ToUpper(m[2]), name: name, create: st.text, file: file, line: st.line, order: *pos}
			*pos++
			if o.kind != kindView {
				err = o.parseHeader(st.text[len(m[0]):])
			} else {
				o.columns, err = viewColumns(st.text[len(m[0]):])
			}
			if err != nil {
				return fmt.Errorf("line %d: %s: %w", st.line, name, err)
			}
			s.objects[name] = o
			continue
		}
		if m := commentRE.FindStringSubmatch(st.text); m != nil {
			if m[2] != s.schema {
				return fmt.Errorf("line %d: COMMENT ON %s.%s is not in schema %s", st.line, m[2], m[3], s.schema)
			}
			o, ok := s.objects[m[3]]
			if !ok {
				return fmt.Errorf("line %d: COMMENT ON %s.%s comes before its object (or the object is not a function, procedure or view)", st.line, m[2], m[3])
			}
			o.comments = append(o.comments, st.text)
			continue
		}
		return fmt.Errorf("line %d: the tool only diffs CREATE FUNCTION, PROCEDURE or VIEW %s.name and COMMENT ON them; this statement is neither: %.60q", st.line, s.schema, st.text)
	}
	return nil
}

func unquote(ident string) string {
	return strings.Trim(ident, `"`)
}

// optionWords end a function's RETURNS clause.
var optionWords = map[string]bool{
	"LANGUAGE": true, "AS": true, "SET": true, "IMMUTABLE": true, "STABLE": true, "VOLATILE": true,
	"SECURITY": true, "EXTERNAL": true, "STRICT": true, "CALLED": true, "LEAKPROOF": true, "NOT": true,
	"PARALLEL": true, "COST": true, "ROWS": true, "SUPPORT": true, "TRANSFORM": true, "WINDOW": true,
	"BEGIN": true, "RETURN": true,
}

// multiWordTypes are the first words of types spelled in several words: a
// parameter "double precision" has no name.
var multiWordTypes = map[string]bool{
	"double": true, "timestamp": true, "time": true, "character": true, "char": true,
	"bit": true, "national": true, "interval": true,
}

// parseHeader reads the parameters and the RETURNS clause that follow a
// function's name.
func (o *object) parseHeader(rest string) error {
	toks, err := tokens(rest)
	if err != nil {
		return err
	}
	if len(toks) == 0 || toks[0][0] != '(' {
		return fmt.Errorf("no parameter list after the name")
	}
	list := toks[0][1 : len(toks[0])-1]
	items, err := splitTopLevel(list)
	if err != nil {
		return err
	}
	for _, item := range items {
		p, hasDefault, err := parseParam(item)
		if err != nil {
			return fmt.Errorf("parameter %q: %w", strings.TrimSpace(item), err)
		}
		if hasDefault {
			o.defaults++
		}
		o.params = append(o.params, p)
	}
	if len(toks) > 1 && strings.EqualFold(toks[1], "RETURNS") {
		end := 2
		for end < len(toks) && !optionWords[strings.ToUpper(toks[end])] {
			end++
		}
		o.returns = normalize(toks[2:end])
	}
	return nil
}

// parseParam reads "[mode] [name] type [DEFAULT expr | = expr]".
func parseParam(s string) (param, bool, error) {
	toks, err := tokens(s)
	if err != nil {
		return param{}, false, err
	}
	hasDefault := false
	for i, t := range toks {
		if strings.EqualFold(t, "DEFAULT") || t == "=" {
			toks, hasDefault = toks[:i], true
			break
		}
	}
	p := param{mode: "in"}
	if len(toks) > 0 {
		switch m := strings.ToLower(toks[0]); m {
		case "in", "out", "inout", "variadic":
			p.mode, toks = m, toks[1:]
		}
	}
	if len(toks) >= 2 && isWordByte(toks[0][0]) && !multiWordTypes[strings.ToLower(toks[0])] && (isWordByte(toks[1][0]) || toks[1][0] == '"') {
		p.name, toks = strings.ToLower(toks[0]), toks[1:]
	} else if len(toks) >= 2 && toks[0][0] == '"' {
		p.name, toks = toks[0], toks[1:]
	}
	if len(toks) == 0 {
		return param{}, false, fmt.Errorf("no type")
	}
	p.typ = normalize(toks)
	return p, hasDefault, nil
}

// signature is how DROP, REVOKE and COMMENT name a function:
// schema.name(types of its IN, INOUT and VARIADIC parameters).
func (o *object) signature(schema string) string {
	if o.kind == kindView {
		return schema + "." + o.name
	}
	var types []string
	for _, p := range o.params {
		switch p.mode {
		case "in", "inout":
			types = append(types, p.typ)
		case "variadic":
			types = append(types, "VARIADIC "+p.typ)
		}
	}
	return schema + "." + o.name + "(" + strings.Join(types, ", ") + ")"
}

// shape is what CREATE OR REPLACE cannot change: the kind, every
// parameter's mode, name and type, and the result type.
func (o *object) shape() string {
	var b strings.Builder
	b.WriteString(o.kind)
	for _, p := range o.params {
		fmt.Fprintf(&b, "|%s %s %s", p.mode, p.name, p.typ)
	}
	b.WriteString("|returns " + o.returns)
	return b.String()
}

// needsRecreate says whether going from o to n takes DROP and CREATE:
// CREATE OR REPLACE cannot change a kind, a parameter's mode, name or type,
// the result type, or take a default away.
func needsRecreate(o, n *object) bool {
	if o.kind != n.kind {
		return true
	}
	if o.kind == kindView {
		return !slices.Equal(o.columns, n.columns)
	}
	return o.shape() != n.shape() || n.defaults < o.defaults
}

// viewColumns returns the names of a view's columns as well as a parser
// without the database can tell them: the column list if the view has one,
// otherwise for each item of the first SELECT list its AS alias, the column
// it names (a, t.a), or else the item's text. It is only compared between
// two versions of a view; an item it cannot name makes them differ, which
// costs a DROP and CREATE that was not needed, never a wrong migration.
func viewColumns(rest string) ([]string, error) {
	toks, err := tokens(rest)
	if err != nil {
		return nil, err
	}
	if len(toks) > 0 && toks[0][0] == '(' {
		items, err := splitTopLevel(toks[0][1 : len(toks[0])-1])
		if err != nil {
			return nil, err
		}
		var out []string
		for _, item := range items {
			t, err := tokens(item)
			if err != nil {
				return nil, err
			}
			out = append(out, normalize(t))
		}
		return out, nil
	}
	i := slices.IndexFunc(toks, func(t string) bool { return strings.EqualFold(t, "SELECT") })
	if i < 0 {
		return nil, fmt.Errorf("no SELECT in the view")
	}
	toks = toks[i+1:]
	if len(toks) > 0 && strings.EqualFold(toks[0], "DISTINCT") {
		toks = toks[1:]
		if len(toks) > 1 && strings.EqualFold(toks[0], "ON") {
			toks = toks[2:]
		}
	}
	end := slices.IndexFunc(toks, func(t string) bool {
		switch strings.ToUpper(t) {
		case "FROM", "WHERE", "GROUP", "UNION", "EXCEPT", "INTERSECT", "ORDER", "LIMIT", "WINDOW", "HAVING", ";":
			return true
		}
		return false
	})
	if end >= 0 {
		toks = toks[:end]
	}
	var out []string
	for len(toks) > 0 {
		j := slices.Index(toks, ",")
		if j < 0 {
			j = len(toks)
		}
		item := toks[:j]
		toks = toks[min(j+1, len(toks)):]
		switch n := len(item); {
		case n >= 2 && strings.EqualFold(item[n-2], "AS"):
			out = append(out, strings.ToLower(item[n-1]))
		case n == 1 && isWordByte(item[0][0]):
			out = append(out, strings.ToLower(item[0]))
		case n == 3 && item[1] == "." && isWordByte(item[2][0]):
			out = append(out, strings.ToLower(item[2]))
		default:
			out = append(out, normalize(item))
		}
	}
	return out, nil
}

// withCreate returns a CREATE statement beginning with "CREATE OR REPLACE"
// when replace is set and with "CREATE" otherwise.
func withCreate(stmt string, replace bool) string {
	head := "CREATE "
	if replace {
		head = "CREATE OR REPLACE "
	}
	loc := orReplace.FindStringIndex(stmt)
	return head + stmt[loc[1]:]
}

// parseGrants reads the GRANT statements of sql/grants.sql that name
// objects of the schema; other statements are not the tool's business.
func parseGrants(text, schema string) ([]grant, error) {
	stmts, err := splitStatements(text)
	if err != nil {
		return nil, err
	}
	var out []grant
	for _, st := range stmts {
		m := grantRE.FindStringSubmatch(st.text)
		if m == nil {
			continue
		}
		g := grant{privileges: oneLine(m[1]), roles: oneLine(m[3])}
		on := strings.TrimSpace(m[2])
		if a := allRE.FindStringSubmatch(on); a != nil {
			if a[2] != schema {
				continue
			}
			g.all = map[string][]string{
				"TABLES":     {kindView},
				"FUNCTIONS":  {kindFunction},
				"PROCEDURES": {kindProcedure},
				"ROUTINES":   {kindFunction, kindProcedure},
			}[strings.ToUpper(a[1])]
			out = append(out, g)
			continue
		}
		if otherRE.MatchString(on) {
			continue // not about functions, procedures or views
		}
		items, err := splitTopLevel(on)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", st.line, err)
		}
		for _, item := range items {
			t := targetRE.FindStringSubmatch(strings.TrimSpace(item))
			if t == nil {
				return nil, fmt.Errorf("line %d: cannot read the grant's object %q", st.line, strings.TrimSpace(item))
			}
			if t[1] == schema {
				g.targets = append(g.targets, t[2])
			}
		}
		if len(g.targets) > 0 {
			out = append(out, g)
		}
	}
	return out, nil
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
