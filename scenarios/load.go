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
	cl, err := l.list(f["claims"], "claims")
	if err != nil {
		return nil, err
	}
	if len(cl) == 0 {
		return nil, l.errf(f["claims"], "claims: list at least one claim")
	}
	for _, c := range cl {
		s, err := l.str(c, "claim")
		if err != nil {
			return nil, err
		}
		claim, err := ParseClaim(s)
		if err != nil {
			return nil, l.errf(c, "%s", strings.TrimPrefix(err.Error(), ErrInvalid.Error()+": "))
		}
		if sc.Has(claim) {
			return nil, l.errf(c, "claim %s listed twice", claim)
		}
		sc.Claims = append(sc.Claims, claim)
	}
	if o := f["options"]; o != nil {
		of, err := l.fields(o, "options", "checkpoint_every", "inline_threshold", "segment_size")
		if err != nil {
			return nil, err
		}
		if v := of["checkpoint_every"]; v != nil {
			x, err := l.integer(v, "checkpoint_every", 1, 1<<20)
			if err != nil {
				return nil, err
			}
			sc.Options.CheckpointEvery = int(x)
		}
		if v := of["inline_threshold"]; v != nil {
			x, err := l.integer(v, "inline_threshold", 1, 1<<30)
			if err != nil {
				return nil, err
			}
			sc.Options.InlineThreshold = int(x)
		}
		if v := of["segment_size"]; v != nil {
			x, err := l.integer(v, "segment_size", 512, 1<<40)
			if err != nil {
				return nil, err
			}
			sc.Options.SegmentSize = x
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

func (l *loader) steps(nodes []*yaml.Node, depth int) ([]Step, error) {
	out := make([]Step, 0, len(nodes))
	for _, n := range nodes {
		st, err := l.step(n, depth, false)
		if err != nil {
			return nil, err
		}
		out = append(out, *st)
	}
	return out, nil
}

var stepKinds = []string{
	string(KindInit), string(KindCommit), string(KindRefCreate), string(KindRefSet), string(KindRefDelete),
	string(KindLand), string(KindRace), string(KindRepeat), string(KindRecover), string(KindReopen), string(KindRead),
}

// step parses a one-key mapping {kind: body}.
func (l *loader) step(n *yaml.Node, depth int, inRace bool) (*Step, error) {
	if n.Kind != yaml.MappingNode || len(n.Content) != 2 {
		return nil, l.errf(n, "a step must be a mapping with exactly one key, the step kind (%s)", strings.Join(stepKinds, ", "))
	}
	k, body := n.Content[0], n.Content[1]
	st := &Step{Kind: Kind(k.Value), Pos: l.pos(k), Outcome: OutcomeOK}
	what := k.Value
	if body.Kind == yaml.ScalarNode && body.Tag == "!!null" {
		body = &yaml.Node{Kind: yaml.MappingNode, Line: body.Line, Column: body.Column}
	}
	switch st.Kind {
	case KindInit:
		if l.inited {
			return nil, l.errf(k, "init: the store is already created by an earlier init")
		}
		if depth > 0 {
			return nil, l.errf(k, "init may only be a top-level step")
		}
		if _, err := l.fields(body, what); err != nil {
			return nil, err
		}
		l.inited = true
		return st, nil
	case KindRecover, KindReopen:
		if inRace {
			return nil, l.errf(k, "%s cannot be raced", what)
		}
		if _, err := l.fields(body, what); err != nil {
			return nil, err
		}
	case KindRead:
		f, err := l.fields(body, what, "writer")
		if err != nil {
			return nil, err
		}
		if err := l.writer(st, f); err != nil {
			return nil, err
		}
	case KindCommit:
		f, err := l.fields(body, what, "id", "agent", "message", "parents", "files", "deletes", "advance", "writer", "outcome")
		if err != nil {
			return nil, err
		}
		if err := l.writer(st, f); err != nil {
			return nil, err
		}
		if v := f["agent"]; v != nil {
			if st.Agent, err = l.str(v, "agent"); err != nil {
				return nil, err
			}
		}
		if v := f["message"]; v != nil {
			if st.Message, err = l.str(v, "message"); err != nil {
				return nil, err
			}
		}
		if v := f["parents"]; v != nil {
			ps, err := l.list(v, "parents")
			if err != nil {
				return nil, err
			}
			for _, p := range ps {
				r, err := l.rev(p, "parent", false)
				if err != nil {
					return nil, err
				}
				st.Parents = append(st.Parents, r)
			}
		}
		if v := f["files"]; v != nil {
			if st.Files, err = l.files(v); err != nil {
				return nil, err
			}
		}
		if v := f["deletes"]; v != nil {
			ds, err := l.list(v, "deletes")
			if err != nil {
				return nil, err
			}
			for _, d := range ds {
				p, err := l.filePath(d)
				if err != nil {
					return nil, err
				}
				st.Deletes = append(st.Deletes, p)
			}
		}
		if len(st.Files) == 0 && len(st.Deletes) == 0 {
			return nil, l.errf(k, "commit: give files or deletes (an empty commit writes nothing to crash)")
		}
		if v := f["advance"]; v != nil {
			if st.Advance, err = l.name(v, "advance"); err != nil {
				return nil, err
			}
		}
		if err := l.outcome(st, f, OutcomeOK, OutcomeConflict); err != nil {
			return nil, err
		}
		if err := l.define(st, f); err != nil {
			return nil, err
		}
	case KindRefCreate, KindRefSet, KindRefDelete:
		allowed := map[Kind][]string{
			KindRefCreate: {"ref", "to", "writer", "outcome"},
			KindRefSet:    {"ref", "to", "expect", "writer", "outcome"},
			KindRefDelete: {"ref", "expect", "writer", "outcome"},
		}[st.Kind]
		f, err := l.fields(body, what, allowed...)
		if err != nil {
			return nil, err
		}
		for _, req := range allowed {
			if req != "writer" && req != "outcome" && f[req] == nil {
				return nil, l.errf(k, "%s: missing required key %q", what, req)
			}
		}
		if err := l.writer(st, f); err != nil {
			return nil, err
		}
		if st.Ref, err = l.name(f["ref"], "ref"); err != nil {
			return nil, err
		}
		if v := f["to"]; v != nil {
			if st.To, err = l.rev(v, "to", false); err != nil {
				return nil, err
			}
		}
		if v := f["expect"]; v != nil {
			if st.Expect, err = l.rev(v, "expect", true); err != nil {
				return nil, err
			}
		}
		if err := l.outcome(st, f, OutcomeOK, OutcomeConflict); err != nil {
			return nil, err
		}
	case KindLand:
		f, err := l.fields(body, what, "change", "onto", "id", "writer", "outcome")
		if err != nil {
			return nil, err
		}
		if f["change"] == nil || f["onto"] == nil {
			return nil, l.errf(k, "land: keys change and onto are required")
		}
		if err := l.writer(st, f); err != nil {
			return nil, err
		}
		if st.Change, err = l.rev(f["change"], "change", false); err != nil {
			return nil, err
		}
		if st.Onto, err = l.name(f["onto"], "onto"); err != nil {
			return nil, err
		}
		if err := l.outcome(st, f, OutcomeOK, OutcomeConflict, OutcomeNoop); err != nil {
			return nil, err
		}
		if err := l.define(st, f); err != nil {
			return nil, err
		}
	case KindRace:
		if inRace {
			return nil, l.errf(k, "race: races do not nest")
		}
		f, err := l.fields(body, what, "at", "first", "second")
		if err != nil {
			return nil, err
		}
		if f["at"] == nil || f["first"] == nil || f["second"] == nil {
			return nil, l.errf(k, "race: keys at, first and second are required")
		}
		at, err := l.str(f["at"], "at")
		if err != nil {
			return nil, err
		}
		if at != "LOCK" && at != "SYNCLOCK" {
			return nil, l.errf(f["at"], "race: at must be LOCK (second lands between first's merge and its CAS) or SYNCLOCK (second's sync covers first's frame: group commit), got %q", at)
		}
		st.At = at
		if st.First, err = l.step(f["first"], depth+1, true); err != nil {
			return nil, err
		}
		if st.Second, err = l.step(f["second"], depth+1, true); err != nil {
			return nil, err
		}
		for _, s := range []*Step{st.First, st.Second} {
			switch s.Kind {
			case KindCommit, KindLand, KindRefCreate, KindRefSet, KindRefDelete:
			default:
				return nil, l.errf(f["first"], "race: only write steps (commit, land, ref_*) can race, got %s", s.Kind)
			}
		}
		if st.First.Writer == st.Second.Writer {
			return nil, l.errf(f["second"], "race: the two sides must use different writers (writer: 0 and writer: 1), as two processes would")
		}
	case KindRepeat:
		f, err := l.fields(body, what, "times", "steps")
		if err != nil {
			return nil, err
		}
		if f["times"] == nil || f["steps"] == nil {
			return nil, l.errf(k, "repeat: keys times and steps are required")
		}
		t, err := l.integer(f["times"], "times", 1, 100000)
		if err != nil {
			return nil, err
		}
		st.Times = int(t)
		body, err := l.list(f["steps"], "steps")
		if err != nil {
			return nil, err
		}
		if len(body) == 0 {
			return nil, l.errf(f["steps"], "repeat: steps is empty")
		}
		if st.Body, err = l.steps(body, depth+1); err != nil {
			return nil, err
		}
	default:
		return nil, l.errf(k, "unknown step kind %q (known: %s)", k.Value, strings.Join(stepKinds, ", "))
	}
	if !l.inited {
		return nil, l.errf(k, "%s before init: the first step must be init", what)
	}
	return st, nil
}

func (l *loader) writer(st *Step, f map[string]*yaml.Node) error {
	if v := f["writer"]; v != nil {
		w, err := l.integer(v, "writer", 0, 1)
		if err != nil {
			return err
		}
		st.Writer = int(w)
	}
	return nil
}

func (l *loader) outcome(st *Step, f map[string]*yaml.Node, allowed ...Outcome) error {
	v := f["outcome"]
	if v == nil {
		return nil
	}
	s, err := l.str(v, "outcome")
	if err != nil {
		return err
	}
	for _, a := range allowed {
		if string(a) == s {
			st.Outcome = a
			return nil
		}
	}
	names := make([]string, len(allowed))
	for i, a := range allowed {
		names[i] = string(a)
	}
	return l.errf(v, "%s: outcome %q is not one of %s", st.Kind, s, strings.Join(names, ", "))
}

// define registers the step's label after its revs were checked, so a
// commit may name its own label as parent only if an earlier step defined it
// (the chain idiom inside repeat).
func (l *loader) define(st *Step, f map[string]*yaml.Node) error {
	v := f["id"]
	if v == nil {
		return nil
	}
	s, err := l.name(v, "id")
	if err != nil {
		return err
	}
	if s == "none" || strings.HasPrefix(s, "@") {
		return l.errf(v, "id %q is reserved", s)
	}
	st.Label = s
	l.labels[s] = true
	return nil
}

func (l *loader) rev(n *yaml.Node, what string, noneOK bool) (Rev, error) {
	s, err := l.str(n, what)
	if err != nil {
		return Rev{}, err
	}
	switch {
	case s == "none":
		if !noneOK {
			return Rev{}, l.errf(n, "%s: none is only allowed as an expected value", what)
		}
		return Rev{None: true}, nil
	case strings.HasPrefix(s, "@"):
		if !nameRE.MatchString(s[1:]) {
			return Rev{}, l.errf(n, "%s: %q is not a valid ref name", what, s[1:])
		}
		return Rev{Ref: s[1:]}, nil
	}
	if !l.labels[s] {
		return Rev{}, l.errf(n, "%s: unknown label %q (define it with id: on an earlier commit or land; write @NAME for a ref)", what, s)
	}
	return Rev{Label: s}, nil
}

func (l *loader) filePath(n *yaml.Node) (string, error) {
	p, err := l.str(n, "path")
	if err != nil {
		return "", err
	}
	if p == "" || strings.HasPrefix(p, "/") || strings.Contains(p, "\x00") || path.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../") {
		return "", l.errf(n, "path %q must be relative and clean", p)
	}
	return p, nil
}

func (l *loader) files(n *yaml.Node) ([]File, error) {
	if n.Kind != yaml.MappingNode {
		return nil, l.errf(n, "files must be a mapping path → content, got %s", kindName(n))
	}
	var out []File
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		p, err := l.filePath(k)
		if err != nil {
			return nil, err
		}
		if seen[p] {
			return nil, l.errf(k, "file %q given twice", p)
		}
		seen[p] = true
		f := File{Path: p}
		switch v.Kind {
		case yaml.ScalarNode:
			f.Content = []byte(v.Value)
		case yaml.MappingNode:
			g, err := l.fields(v, "file "+p, "size", "seed")
			if err != nil {
				return nil, err
			}
			if g["size"] == nil {
				return nil, l.errf(v, "file %s: size is required", p)
			}
			sz, err := l.integer(g["size"], "size", 0, 64<<20)
			if err != nil {
				return nil, err
			}
			f.Size, f.Gen = int(sz), true
			if s := g["seed"]; s != nil {
				sd, err := l.integer(s, "seed", 0, 1<<62)
				if err != nil {
					return nil, err
				}
				f.Seed = uint64(sd)
			}
		default:
			return nil, l.errf(v, "file %s: content must be a string or {size: N, seed: S}, got %s", p, kindName(v))
		}
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// IsInvalid reports whether err is a scenario validation error.
func IsInvalid(err error) bool { return errors.Is(err, ErrInvalid) }
