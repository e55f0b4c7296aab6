package scenarios

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// files holds the shipped scenarios, so crashsim needs no path to find them.
//
//go:embed *.yaml
var files embed.FS

// Embedded returns the file system of the shipped scenario files.
func Embedded() fs.FS { return files }

// All loads every shipped scenario, sorted by file name.
func All() ([]*Scenario, error) { return LoadDir(files, ".") }

// LoadDir loads every *.yaml file of dir in fsys, sorted by file name. Two
// files with the same scenario name are an error.
func LoadDir(fsys fs.FS, dir string) ([]*Scenario, error) {
	names, err := fs.Glob(fsys, path.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []*Scenario
	seen := map[string]string{}
	for _, n := range names {
		data, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, err
		}
		sc, err := Load(n, data)
		if err != nil {
			return nil, err
		}
		if prev, ok := seen[sc.Name]; ok {
			return nil, fmt.Errorf("%w: %s: scenario name %q already used by %s", ErrInvalid, n, sc.Name, prev)
		}
		seen[sc.Name] = n
		out = append(out, sc)
	}
	return out, nil
}

// Select returns the scenarios whose name matches the shell glob pattern.
// A malformed pattern is an error; a pattern matching nothing is an error
// too, because a sweep of zero scenarios passes vacuously.
func Select(all []*Scenario, pattern string) ([]*Scenario, error) {
	if pattern == "" {
		pattern = "*"
	}
	if _, err := path.Match(pattern, ""); err != nil {
		return nil, fmt.Errorf("%w: scenario pattern %q: %w", ErrInvalid, pattern, err)
	}
	var out []*Scenario
	for _, s := range all {
		if ok, _ := path.Match(pattern, s.Name); ok {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no scenario matches %q", ErrInvalid, pattern)
	}
	return out, nil
}

// Load parses and validates one scenario file. name is used in error
// positions.
func Load(name string, data []byte) (*Scenario, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &Error{Pos: Pos{File: name, Line: 1, Col: 1}, Msg: "empty scenario file"}
		}
		return nil, yamlError(name, err)
	}
	l := &loader{file: name, labels: map[string]bool{}}
	sc, err := l.scenario(&doc)
	if err != nil {
		return nil, err
	}
	sc.File = name
	return sc, nil
}

var lineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlError turns a yaml.v3 syntax error into a positioned Error.
func yamlError(file string, err error) error {
	msg := err.Error()
	if m := lineRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &Error{Pos: Pos{File: file, Line: line, Col: 1}, Msg: "malformed YAML: " + m[2]}
	}
	return &Error{Pos: Pos{File: file, Line: 1, Col: 1}, Msg: "malformed YAML: " + strings.TrimPrefix(msg, "yaml: ")}
}

type loader struct {
	file   string
	labels map[string]bool // defined so far, in textual order
	inited bool
}

func (l *loader) pos(n *yaml.Node) Pos { return Pos{File: l.file, Line: n.Line, Col: n.Column} }

func (l *loader) errf(n *yaml.Node, format string, a ...any) error {
	return &Error{Pos: l.pos(n), Msg: fmt.Sprintf(format, a...)}
}

// fields checks that n is a mapping whose keys are all in allowed (and
// unique), returning key → value node. Key order is kept for messages.
func (l *loader) fields(n *yaml.Node, what string, allowed ...string) (map[string]*yaml.Node, error) {
	if n.Kind != yaml.MappingNode {
		return nil, l.errf(n, "%s must be a mapping, got %s", what, kindName(n))
	}
	out := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return nil, l.errf(k, "%s: keys must be plain names", what)
		}
		ok := false
		for _, a := range allowed {
			if a == k.Value {
				ok = true
				break
			}
		}
		if !ok {
			return nil, l.errf(k, "%s: unknown key %q (allowed: %s)", what, k.Value, strings.Join(allowed, ", "))
		}
		if _, dup := out[k.Value]; dup {
			return nil, l.errf(k, "%s: key %q given twice", what, k.Value)
		}
		out[k.Value] = v
	}
	return out, nil
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("the scalar %q", n.Value)
	case yaml.AliasNode:
		return "an alias"
	}
	return "nothing"
}

func (l *loader) str(n *yaml.Node, what string) (string, error) {
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!str" && n.Tag != "!!int" && n.Tag != "!!float" && n.Tag != "!!bool") {
		return "", l.errf(n, "%s must be a string, got %s", what, kindName(n))
	}
	return n.Value, nil
}

func (l *loader) name(n *yaml.Node, what string) (string, error) {
	s, err := l.str(n, what)
	if err != nil {
		return "", err
	}
	if !nameRE.MatchString(s) {
		return "", l.errf(n, "%s %q is not a valid name (letters, digits, '-', '_', '.', '/')", what, s)
	}
	return s, nil
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]*$`)

func (l *loader) integer(n *yaml.Node, what string, min, max int64) (int64, error) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		return 0, l.errf(n, "%s must be an integer, got %s", what, kindName(n))
	}
	v, err := strconv.ParseInt(n.Value, 0, 64)
	if err != nil {
		return 0, l.errf(n, "%s: %v", what, err)
	}
	if v < min || v > max {
		return 0, l.errf(n, "%s = %d is out of range [%d, %d]", what, v, min, max)
	}
	return v, nil
}

func (l *loader) list(n *yaml.Node, what string) ([]*yaml.Node, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, l.errf(n, "%s must be a list, got %s", what, kindName(n))
	}
	return n.Content, nil
}

func (l *loader) scenario(doc *yaml.Node) (*Scenario, error) {
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, &Error{Pos: Pos{File: l.file, Line: 1, Col: 1}, Msg: "empty scenario file"}
	}
	root := doc.Content[0]
	f, err := l.fields(root, "scenario", "name", "description", "claims", "options", "steps")
	if err != nil {
		return nil, err
	}
	sc := &Scenario{}
	for _, req := range []string{"name", "claims", "steps"} {
		if f[req] == nil {
			return nil, l.errf(root, "scenario: missing required key %q", req)
		}
	}
	if sc.Name, err = l.name(f["name"], "name"); err != nil {
		return nil, err
	}
	if d := f["description"]; d != nil {
		if sc.Description, err = l.str(d, "description"); err != nil {
			return nil, err
		}
	}
	if err := l.claims(sc, f["claims"]); err != nil {
		return nil, err
	}
	if o := f["options"]; o != nil {
		if err := l.options(sc, o); err != nil {
			return nil, err
		}
	}
	steps, err := l.list(f["steps"], "steps")
	if err != nil {
		return nil, err
	}
	if len(steps) == 0 {
		return nil, l.errf(f["steps"], "steps: the list is empty")
	}
	if sc.Steps, err = l.steps(steps, 0); err != nil {
		return nil, err
	}
	if sc.Steps[0].Kind != KindInit {
		return nil, l.errf(steps[0], "the first step must be init (the sweep also crashes the creation of the store)")
	}
	return sc, nil
}

// claims parses the non-empty list of claims a scenario checks.
func (l *loader) claims(sc *Scenario, n *yaml.Node) error {
	cl, err := l.list(n, "claims")
	if err != nil {
		return err
	}
	if len(cl) == 0 {
		return l.errf(n, "claims: list at least one claim")
	}
	for _, c := range cl {
		s, err := l.str(c, "claim")
		if err != nil {
			return err
		}
		claim, err := ParseClaim(s)
		if err != nil {
			return l.errf(c, "%s", strings.TrimPrefix(err.Error(), ErrInvalid.Error()+": "))
		}
		if sc.Has(claim) {
			return l.errf(c, "claim %s listed twice", claim)
		}
		sc.Claims = append(sc.Claims, claim)
	}
	return nil
}

// options parses a scenario's store options.
func (l *loader) options(sc *Scenario, n *yaml.Node) error {
	of, err := l.fields(n, "options", "checkpoint_every", "checkpoint_bytes", "inline_threshold", "segment_size")
	if err != nil {
		return err
	}
	for _, o := range []struct {
		key      string
		min, max int64
		set      func(int64)
	}{
		{"checkpoint_every", 1, 1 << 20, func(x int64) { sc.Options.CheckpointEvery = int(x) }},
		{"checkpoint_bytes", 1, 1 << 40, func(x int64) { sc.Options.CheckpointBytes = x }},
		{"inline_threshold", 1, 1 << 30, func(x int64) { sc.Options.InlineThreshold = int(x) }},
		{"segment_size", 512, 1 << 40, func(x int64) { sc.Options.SegmentSize = x }},
	} {
		if v := of[o.key]; v != nil {
			x, err := l.integer(v, o.key, o.min, o.max)
			if err != nil {
				return err
			}
			o.set(x)
		}
	}
	return nil
}

// IsInvalid reports whether err is a scenario validation error.
func IsInvalid(err error) bool { return errors.Is(err, ErrInvalid) }
