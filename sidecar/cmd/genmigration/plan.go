package main

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// plan is what changed between two snapshots, each list in install order
// of the snapshot its objects come from.
type plan struct {
	from, to *snapshot

	added     []*object // in to only
	replaced  []*object // in both, CREATE OR REPLACE can take old to new (the new ones)
	commented []*object // in both, only the COMMENT ON statements differ (the new ones)
	recreated []*object // in both, must be dropped and created (the new ones)
	removed   []*object // in from only
}

// diff compares two snapshots. A view whose columns change is dropped and
// created again (CREATE OR REPLACE VIEW can only add columns at the end, and
// the down migration would have to take them away), and so is every view
// that reads one that is: DROP VIEW fails while another view reads it.
func diff(from, to *snapshot) *plan {
	p := &plan{from: from, to: to}
	recreate := map[string]bool{}
	for _, n := range to.objects {
		if o, ok := from.objects[n.name]; ok && needsRecreate(o, n) {
			recreate[n.name] = true
		}
	}
	for grew := true; grew; {
		grew = false
		for _, n := range to.objects {
			o, ok := from.objects[n.name]
			if !ok || recreate[n.name] || n.kind != kindView || o.kind != kindView {
				continue
			}
			for name := range recreate {
				if references(o.create, from.schema, name) || references(n.create, to.schema, name) {
					recreate[n.name], grew = true, true
					break
				}
			}
		}
	}
	for _, n := range sorted(to.objects) {
		o, ok := from.objects[n.name]
		switch {
		case !ok:
			p.added = append(p.added, n)
		case recreate[n.name]:
			p.recreated = append(p.recreated, n)
		case o.create != n.create:
			p.replaced = append(p.replaced, n)
		case !slices.Equal(o.comments, n.comments):
			p.commented = append(p.commented, n)
		}
	}
	for _, o := range sorted(from.objects) {
		if _, ok := to.objects[o.name]; !ok {
			p.removed = append(p.removed, o)
		}
	}
	return p
}

// references says whether a statement names schema.name.
func references(stmt, schema, name string) bool {
	return regexp.MustCompile(`(?i)\b` + regexp.QuoteMeta(schema) + `\s*\.\s*"?` + regexp.QuoteMeta(name) + `\b`).MatchString(stmt)
}

func (p *plan) empty() bool {
	return len(p.added)+len(p.replaced)+len(p.commented)+len(p.recreated)+len(p.removed) == 0
}

func sorted(objects map[string]*object) []*object {
	out := make([]*object, 0, len(objects))
	for _, o := range objects {
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b *object) int { return cmp.Compare(a.order, b.order) })
	return out
}

// step is how one object changes in one direction.
type step int

const (
	stepCreate  step = iota // CREATE, then its comments
	stepReplace             // CREATE OR REPLACE, then its comments
	stepComment             // its comments only
)

// change is an object and what to do with it.
type change struct {
	obj  *object
	old  *object // the object it replaces, if any
	step step
}

// direction is one of the two migrations: drops first (objects that must be
// re-created), then the creates and replaces in install order (views before
// the functions that read them, as sql/install.sql has them), then the drops
// of what is gone, after every object that read it has been replaced, then
// the privileges of what was created.
type direction struct {
	schema    string
	dropFirst []*object // re-created: the old definitions, reverse install order
	changes   []change  // install order of the target snapshot
	dropLast  []*object // gone: reverse install order
	created   []*object // new or re-created objects that need privileges
	grants    []grant   // the target's sql/grants.sql
}

func (p *plan) up() direction {
	return build(p.from, p.to, p.added, p.replaced, p.commented, p.recreated, p.removed)
}

func (p *plan) down() direction {
	// Going back, what was removed is added, what was added is removed, and
	// the changed objects go back to their old definitions.
	back := func(list []*object) []*object {
		out := make([]*object, len(list))
		for i, n := range list {
			out[i] = p.from.objects[n.name]
		}
		slices.SortFunc(out, func(a, b *object) int { return cmp.Compare(a.order, b.order) })
		return out
	}
	return build(p.to, p.from, p.removed, back(p.replaced), back(p.commented), back(p.recreated), p.added)
}

func build(from, to *snapshot, added, replaced, commented, recreated, removed []*object) direction {
	d := direction{schema: to.schema, grants: to.grants}
	for _, n := range recreated {
		d.dropFirst = append(d.dropFirst, from.objects[n.name])
	}
	slices.Reverse(d.dropFirst)
	for _, n := range added {
		d.changes = append(d.changes, change{obj: n, step: stepCreate})
	}
	for _, n := range recreated {
		d.changes = append(d.changes, change{obj: n, step: stepCreate})
	}
	for _, n := range replaced {
		d.changes = append(d.changes, change{obj: n, old: from.objects[n.name], step: stepReplace})
	}
	for _, n := range commented {
		d.changes = append(d.changes, change{obj: n, old: from.objects[n.name], step: stepComment})
	}
	slices.SortFunc(d.changes, func(a, b change) int { return cmp.Compare(a.obj.order, b.obj.order) })
	d.dropLast = slices.Clone(removed)
	slices.SortFunc(d.dropLast, func(a, b *object) int { return cmp.Compare(b.order, a.order) })
	for _, c := range d.changes {
		if c.step == stepCreate {
			d.created = append(d.created, c.obj)
		}
	}
	return d
}

// render writes the direction's statements.
func (d direction) render() string {
	var b strings.Builder
	for _, o := range d.dropFirst {
		fmt.Fprintf(&b, "%s\n", dropStatement(o, d.schema))
	}
	if len(d.dropFirst) > 0 {
		b.WriteString("\n")
	}
	for _, c := range d.changes {
		switch c.step {
		case stepCreate:
			b.WriteString(withCreate(c.obj.create, false) + "\n\n")
		case stepReplace:
			b.WriteString(withCreate(c.obj.create, true) + "\n\n")
		}
		for _, stmt := range c.obj.comments {
			b.WriteString(stmt + "\n\n")
		}
		if c.old != nil {
			// A comment that went away: its object keeps it otherwise.
			for _, stmt := range c.old.comments {
				if key := commentTarget(stmt); key != "" && !slices.ContainsFunc(c.obj.comments, func(s string) bool { return commentTarget(s) == key }) {
					fmt.Fprintf(&b, "%s IS NULL;\n\n", key)
				}
			}
		}
	}
	for _, o := range d.dropLast {
		fmt.Fprintf(&b, "%s\n", dropStatement(o, d.schema))
	}
	if len(d.dropLast) > 0 {
		b.WriteString("\n")
	}
	b.WriteString(d.privileges())
	return strings.TrimRight(b.String(), "\n") + "\n"
}

func dropStatement(o *object, schema string) string {
	return fmt.Sprintf("DROP %s %s;", o.kind, o.signature(schema))
}

var commentTargetRE = regexp.MustCompile(`(?is)^(COMMENT\s+ON\s+.+?)\s+IS\s`)

// commentTarget returns the "COMMENT ON <object>" part of a COMMENT
// statement (what it is about, not what it says).
func commentTarget(stmt string) string {
	m := commentTargetRE.FindStringSubmatch(stmt)
	if m == nil {
		return ""
	}
	return oneLine(m[1])
}

// privileges writes, for what this direction creates, what sql/grants.sql
// gives it: EXECUTE revoked from PUBLIC for every function and procedure
// (grants.sql revokes it from all), then each GRANT of grants.sql that names
// one of them (or every table and view, for a view), in grants.sql's order,
// so that each object's privileges come out in the order a fresh install
// gives them.
func (d direction) privileges() string {
	var b strings.Builder
	for _, o := range d.created {
		if o.kind != kindView {
			fmt.Fprintf(&b, "REVOKE ALL ON %s %s FROM PUBLIC;\n", o.kind, o.signature(d.schema))
		}
	}
	for _, g := range d.grants {
		byKind := map[string][]string{}
		var kinds []string
		for _, o := range d.created {
			if !g.covers(o) {
				continue
			}
			kind := o.kind
			if kind == kindView {
				kind = "TABLE"
			}
			if _, ok := byKind[kind]; !ok {
				kinds = append(kinds, kind)
			}
			byKind[kind] = append(byKind[kind], o.signature(d.schema))
		}
		for _, kind := range kinds {
			on := ""
			if kind != "TABLE" {
				on = kind + " "
			}
			fmt.Fprintf(&b, "GRANT %s ON %s%s\nTO %s;\n", g.privileges, on, strings.Join(byKind[kind], ", "), g.roles)
		}
	}
	return b.String()
}

// summary lists what a plan does, for the header of the up migration.
func (p *plan) summary() []string {
	names := func(list []*object, kinds ...string) []string {
		var out []string
		for _, o := range list {
			if slices.Contains(kinds, o.kind) {
				out = append(out, o.name)
			}
		}
		return out
	}
	var lines []string
	add := func(what string, list []string) {
		if len(list) > 0 {
			lines = append(lines, what+": "+strings.Join(list, ", ")+".")
		}
	}
	fn := []string{kindFunction, kindProcedure}
	add("New views", names(p.added, kindView))
	add("Views replaced", names(p.replaced, kindView))
	add("New functions", names(p.added, fn...))
	add("Functions replaced", names(p.replaced, fn...))
	add("Dropped and created again (parameters, result type or columns changed, or a view that reads one that did)", names(p.recreated, kindView, kindFunction, kindProcedure))
	add("Comments changed", names(p.commented, kindView, kindFunction, kindProcedure))
	add("Dropped", names(p.removed, kindView, kindFunction, kindProcedure))
	return lines
}
