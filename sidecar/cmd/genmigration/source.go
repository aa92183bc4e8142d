package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// gitRevision reads the files of a commit with git.
type gitRevision struct {
	ctx  context.Context
	dir  string // the repository's root
	rev  string // as the caller spelled it
	hash string // the commit it names
}

// resolveRevision checks that rev names a commit of the repository in dir.
func resolveRevision(ctx context.Context, dir, rev string) (*gitRevision, error) {
	if rev == "" || strings.HasPrefix(rev, "-") {
		return nil, fmt.Errorf("revision %q: not a revision name", rev)
	}
	out, err := git(ctx, dir, "rev-parse", "--verify", "--quiet", "--end-of-options", rev+"^{commit}")
	if err != nil {
		return nil, fmt.Errorf("revision %q does not exist in %s (git rev-parse: %w)", rev, dir, err)
	}
	return &gitRevision{ctx: ctx, dir: dir, rev: rev, hash: strings.TrimSpace(out)}, nil
}

func (g *gitRevision) describe() string { return g.rev }

func (g *gitRevision) list() ([]string, error) {
	out, err := git(g.ctx, g.dir, "ls-tree", "-r", "--name-only", "--full-tree", g.hash, "--", functionsDir+"/", viewsFile)
	if err != nil {
		return nil, fmt.Errorf("list files at %s: %w", g.rev, err)
	}
	var names []string
	for _, name := range strings.Split(strings.TrimSpace(out), "\n") {
		if wanted(name) {
			names = append(names, name)
		}
	}
	return names, nil
}

func (g *gitRevision) read(name string) (string, bool, error) {
	out, err := git(g.ctx, g.dir, "ls-tree", "--name-only", "--full-tree", g.hash, "--", name)
	if err != nil {
		return "", false, fmt.Errorf("look for %s at %s: %w", name, g.rev, err)
	}
	if strings.TrimSpace(out) == "" {
		return "", false, nil
	}
	text, err := git(g.ctx, g.dir, "show", g.hash+":"+name)
	if err != nil {
		return "", false, fmt.Errorf("read %s at %s: %w", name, g.rev, err)
	}
	return text, true, nil
}

// wanted says whether a path is one of the files the tool diffs:
// plpgsql/*.sql (not in subfolders) and sql/views.sql.
func wanted(name string) bool {
	return name == viewsFile || path.Dir(name) == functionsDir && strings.HasSuffix(name, ".sql")
}

// git runs git in dir and returns its standard output; a failure carries
// git's standard error.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return "", fmt.Errorf("%w: %s", err, msg)
		}
		return "", err
	}
	return stdout.String(), nil
}

// workTree reads the files on disk.
type workTree struct {
	dir string
}

func (w workTree) describe() string { return "the working tree" }

func (w workTree) list() ([]string, error) {
	matches, err := filepath.Glob(filepath.Join(w.dir, functionsDir, "*.sql"))
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", functionsDir, err)
	}
	var names []string
	for _, m := range matches {
		names = append(names, functionsDir+"/"+filepath.Base(m))
	}
	if _, err := os.Stat(filepath.Join(w.dir, viewsFile)); err == nil {
		names = append(names, viewsFile)
	}
	slices.Sort(names)
	return names, nil
}

func (w workTree) read(name string) (string, bool, error) {
	b, err := os.ReadFile(filepath.Join(w.dir, filepath.FromSlash(name)))
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("read %s: %w", name, err)
	}
	return string(b), true, nil
}
