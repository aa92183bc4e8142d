package main

import (
	"fmt"
	"regexp"
	"strings"
)

// statement is one SQL statement of a file: its text from its first token
// through its semicolon, and the line it starts on.
type statement struct {
	text string
	line int
}

// splitStatements cuts src into statements at the semicolons that are
// outside comments, quoted strings, quoted identifiers and dollar-quoted
// bodies. Comments between statements are dropped.
func splitStatements(src string) ([]statement, error) {
	var out []statement
	line := 1
	start, startLine := -1, 0
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '\n':
			line++
			i++
		case c == ' ' || c == '\t' || c == '\r' || c == '\f':
			i++
		default:
			if start < 0 && !isComment(src[i:]) {
				start, startLine = i, line
			}
			if c == ';' {
				out = append(out, statement{text: src[start : i+1], line: startLine})
				start = -1
				i++
				continue
			}
			n, err := skipToken(src[i:])
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", line, err)
			}
			line += strings.Count(src[i:i+n], "\n")
			i += n
		}
	}
	if start >= 0 {
		return nil, fmt.Errorf("line %d: statement has no closing semicolon", startLine)
	}
	return out, nil
}

// skipBlockComment returns the length of the /* */ comment s starts with
// (PostgreSQL's block comments nest).
func skipBlockComment(s string) (int, error) {
	depth := 0
	for i := 0; i < len(s)-1; i++ {
		switch {
		case s[i] == '/' && s[i+1] == '*':
			depth++
			i++
		case s[i] == '*' && s[i+1] == '/':
			depth--
			i++
			if depth == 0 {
				return i + 1, nil
			}
		}
	}
	return 0, fmt.Errorf("unterminated /* comment")
}

var dollarTag = regexp.MustCompile(`^\$([A-Za-z_][A-Za-z0-9_]*)?\$`)

// isComment says whether s starts with a comment.
func isComment(s string) bool {
	return strings.HasPrefix(s, "--") || strings.HasPrefix(s, "/*")
}

// skipToken returns the length of the piece of a statement s starts with:
// a comment (a line comment without its newline), a quoted string, a quoted
// identifier, a dollar-quoted string, a word, or one byte.
func skipToken(s string) (int, error) {
	if strings.HasPrefix(s, "--") {
		if end := strings.IndexByte(s, '\n'); end >= 0 {
			return end, nil
		}
		return len(s), nil
	}
	if strings.HasPrefix(s, "/*") {
		return skipBlockComment(s)
	}
	switch s[0] {
	case '\'':
		escapes := false
		return skipQuoted(s, '\'', escapes)
	case 'E', 'e':
		if len(s) > 1 && s[1] == '\'' {
			n, err := skipQuoted(s[1:], '\'', true)
			return n + 1, err
		}
		return skipWord(s), nil
	case '"':
		return skipQuoted(s, '"', false)
	case '$':
		tag := dollarTag.FindString(s)
		if tag == "" {
			return 1, nil
		}
		end := strings.Index(s[len(tag):], tag)
		if end < 0 {
			return 0, fmt.Errorf("unterminated dollar-quoted string %s", tag)
		}
		return len(tag) + end + len(tag), nil
	}
	if isWordByte(s[0]) {
		return skipWord(s), nil
	}
	return 1, nil
}

// skipWord returns the length of the identifier or keyword s starts with, so
// that an E or a $ inside a word is not taken for a quote.
func skipWord(s string) int {
	i := 0
	for i < len(s) && (isWordByte(s[i]) || s[i] == '$') {
		i++
	}
	return i
}

func isWordByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

// skipQuoted returns the length of the string quoted by q that s starts
// with; a doubled quote is a quote, and with escapes a backslash escapes.
func skipQuoted(s string, q byte, escapes bool) (int, error) {
	for i := 1; i < len(s); i++ {
		switch {
		case escapes && s[i] == '\\':
			i++
		case s[i] == q:
			if i+1 < len(s) && s[i+1] == q {
				i++
				continue
			}
			return i + 1, nil
		}
	}
	return 0, fmt.Errorf("unterminated %c-quoted string", q)
}

// tokens cuts s into words, quoted strings and parenthesized groups (a group
// is one token, nested groups included), dropping whitespace and comments.
func tokens(s string) ([]string, error) {
	var out []string
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			i++
		case c == '(':
			n, err := skipGroup(s[i:])
			if err != nil {
				return nil, err
			}
			out = append(out, s[i:i+n])
			i += n
		default:
			n, err := skipToken(s[i:])
			if err != nil {
				return nil, err
			}
			if !isComment(s[i:]) {
				out = append(out, s[i:i+n])
			}
			i += n
		}
	}
	return out, nil
}

// skipGroup returns the length of the parenthesized group s starts with.
func skipGroup(s string) (int, error) {
	depth := 0
	for i := 0; i < len(s); {
		switch s[i] {
		case '(':
			depth++
			i++
		case ')':
			depth--
			i++
			if depth == 0 {
				return i, nil
			}
		default:
			n, err := skipToken(s[i:])
			if err != nil {
				return 0, err
			}
			i += n
		}
	}
	return 0, fmt.Errorf("unbalanced parentheses")
}

// splitTopLevel cuts s at the commas outside parentheses and quotes.
func splitTopLevel(s string) ([]string, error) {
	var out []string
	start := 0
	for i := 0; i < len(s); {
		var n int
		var err error
		switch s[i] {
		case '(':
			n, err = skipGroup(s[i:])
		case ')':
			err = fmt.Errorf("unbalanced parentheses")
		case ',':
			out, start, n = append(out, s[start:i]), i+1, 1
		default:
			n, err = skipToken(s[i:])
		}
		if err != nil {
			return nil, err
		}
		i += n
	}
	if strings.TrimSpace(s[start:]) != "" || len(out) > 0 {
		out = append(out, s[start:])
	}
	return out, nil
}

// normalize writes a piece of SQL the same way however it was spaced:
// words lowercased (quoted ones kept), one space between tokens, none
// inside parentheses next to a parenthesis or a comma.
func normalize(toks []string) string {
	parts := make([]string, len(toks))
	for i, t := range toks {
		switch {
		case t[0] == '"' || t[0] == '\'' || t[0] == '$':
			parts[i] = t
		case t[0] == '(':
			inner, err := tokens(t[1 : len(t)-1])
			if err != nil {
				parts[i] = t
				continue
			}
			parts[i] = "(" + normalize(inner) + ")"
		default:
			parts[i] = strings.ToLower(t)
		}
	}
	var b strings.Builder
	for i, p := range parts {
		if i > 0 && wordy(parts[i-1][len(parts[i-1])-1]) && wordy(p[0]) {
			b.WriteByte(' ')
		}
		b.WriteString(p)
	}
	return b.String()
}

// wordy says whether a token ending or starting with c needs a space to
// stay apart from a neighbour of the same sort.
func wordy(c byte) bool {
	return isWordByte(c) || c == '"' || c == '\'' || c == '$'
}
