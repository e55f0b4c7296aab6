package scenarios

import (
	"path"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// steps parses a list of steps at a nesting depth (0 at the top).
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
	string(KindLand), string(KindUndo), string(KindProtect), string(KindGC), string(KindCheckpoint), string(KindRace), string(KindRepeat), string(KindRecover), string(KindReopen), string(KindRead),
}

// step parses a one-key mapping {kind: body}. Each kind's body is parsed by
// a method of its own; what every kind shares (the shape, a null body, init
// coming first) is checked here.
func (l *loader) step(n *yaml.Node, depth int, inRace bool) (*Step, error) {
	if n.Kind != yaml.MappingNode || len(n.Content) != 2 {
		return nil, l.errf(n, "a step must be a mapping with exactly one key, the step kind (%s)", strings.Join(stepKinds, ", "))
	}
	k, body := n.Content[0], n.Content[1]
	st := &Step{Kind: Kind(k.Value), Pos: l.pos(k), Outcome: OutcomeOK}
	if body.Kind == yaml.ScalarNode && body.Tag == "!!null" {
		body = &yaml.Node{Kind: yaml.MappingNode, Line: body.Line, Column: body.Column}
	}
	var err error
	switch st.Kind {
	case KindInit:
		// init is the step that makes the later ones valid, so it skips
		// the check below.
		if err := l.initStep(k, body, depth); err != nil {
			return nil, err
		}
		return st, nil
	case KindRecover, KindReopen:
		err = l.plainStep(k, body, inRace)
	case KindRead, KindCheckpoint:
		err = l.readStep(st, k, body)
	case KindCommit:
		err = l.commitStep(st, k, body)
	case KindRefCreate, KindRefSet, KindRefDelete:
		err = l.refStep(st, k, body)
	case KindLand:
		err = l.landStep(st, k, body)
	case KindUndo:
		err = l.undoStep(st, k, body)
	case KindProtect:
		err = l.protectStep(st, k, body)
	case KindGC:
		err = l.gcStep(st, k, body)
	case KindRace:
		err = l.raceStep(st, k, body, depth, inRace)
	case KindRepeat:
		err = l.repeatStep(st, k, body, depth)
	default:
		return nil, l.errf(k, "unknown step kind %q (known: %s)", k.Value, strings.Join(stepKinds, ", "))
	}
	if err != nil {
		return nil, err
	}
	if !l.inited {
		return nil, l.errf(k, "%s before init: the first step must be init", k.Value)
	}
	return st, nil
}

// initStep checks an init step: once, at the top level, with no keys.
func (l *loader) initStep(k, body *yaml.Node, depth int) error {
	if l.inited {
		return l.errf(k, "init: the store is already created by an earlier init")
	}
	if depth > 0 {
		return l.errf(k, "init may only be a top-level step")
	}
	if _, err := l.fields(body, k.Value); err != nil {
		return err
	}
	l.inited = true
	return nil
}

// plainStep checks a recover or reopen step: no keys, and never raced.
func (l *loader) plainStep(k, body *yaml.Node, inRace bool) error {
	if inRace {
		return l.errf(k, "%s cannot be raced", k.Value)
	}
	_, err := l.fields(body, k.Value)
	return err
}

// readStep parses a read or checkpoint step: an optional writer.
func (l *loader) readStep(st *Step, k, body *yaml.Node) error {
	f, err := l.fields(body, k.Value, "writer")
	if err != nil {
		return err
	}
	return l.writer(st, f)
}

// commitStep parses a commit step.
func (l *loader) commitStep(st *Step, k, body *yaml.Node) error {
	f, err := l.fields(body, k.Value, "id", "agent", "message", "parents", "files", "deletes", "advance", "writer", "outcome")
	if err != nil {
		return err
	}
	if err := l.writer(st, f); err != nil {
		return err
	}
	if v := f["agent"]; v != nil {
		if st.Agent, err = l.str(v, "agent"); err != nil {
			return err
		}
	}
	if v := f["message"]; v != nil {
		if st.Message, err = l.str(v, "message"); err != nil {
			return err
		}
	}
	if v := f["parents"]; v != nil {
		if st.Parents, err = l.revs(v, "parents", "parent"); err != nil {
			return err
		}
	}
	if v := f["files"]; v != nil {
		if st.Files, err = l.files(v); err != nil {
			return err
		}
	}
	if v := f["deletes"]; v != nil {
		if st.Deletes, err = l.deletes(v); err != nil {
			return err
		}
	}
	if len(st.Files) == 0 && len(st.Deletes) == 0 {
		return l.errf(k, "commit: give files or deletes (an empty commit writes nothing to crash)")
	}
	if v := f["advance"]; v != nil {
		if st.Advance, err = l.name(v, "advance"); err != nil {
			return err
		}
	}
	if err := l.outcome(st, f, OutcomeOK, OutcomeConflict, OutcomeProtected); err != nil {
		return err
	}
	return l.define(st, f)
}

// revs parses a list of revisions (what names the list, each what one).
func (l *loader) revs(n *yaml.Node, what, each string) ([]Rev, error) {
	ns, err := l.list(n, what)
	if err != nil {
		return nil, err
	}
	var out []Rev
	for _, p := range ns {
		r, err := l.rev(p, each, false)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// deletes parses a commit's list of paths to delete.
func (l *loader) deletes(n *yaml.Node) ([]string, error) {
	ds, err := l.list(n, "deletes")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range ds {
		p, err := l.filePath(d)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// refStep parses a ref_create, ref_set or ref_delete step.
func (l *loader) refStep(st *Step, k, body *yaml.Node) error {
	allowed := map[Kind][]string{
		KindRefCreate: {"ref", "to", "writer", "outcome"},
		KindRefSet:    {"ref", "to", "expect", "writer", "outcome"},
		KindRefDelete: {"ref", "expect", "writer", "outcome"},
	}[st.Kind]
	f, err := l.fields(body, k.Value, allowed...)
	if err != nil {
		return err
	}
	for _, req := range allowed {
		if req != "writer" && req != "outcome" && f[req] == nil {
			return l.errf(k, "%s: missing required key %q", k.Value, req)
		}
	}
	if err := l.writer(st, f); err != nil {
		return err
	}
	if st.Ref, err = l.name(f["ref"], "ref"); err != nil {
		return err
	}
	if v := f["to"]; v != nil {
		if st.To, err = l.rev(v, "to", false); err != nil {
			return err
		}
	}
	if v := f["expect"]; v != nil {
		if st.Expect, err = l.rev(v, "expect", true); err != nil {
			return err
		}
	}
	return l.outcome(st, f, OutcomeOK, OutcomeConflict, OutcomeProtected)
}

// landStep parses a land step.
func (l *loader) landStep(st *Step, k, body *yaml.Node) error {
	f, err := l.fields(body, k.Value, "change", "onto", "id", "writer", "outcome", "merged")
	if err != nil {
		return err
	}
	if f["change"] == nil || f["onto"] == nil {
		return l.errf(k, "land: keys change and onto are required")
	}
	if v := f["merged"]; v != nil {
		if st.Merged, err = l.files(v); err != nil {
			return err
		}
	}
	if err := l.writer(st, f); err != nil {
		return err
	}
	if st.Change, err = l.rev(f["change"], "change", false); err != nil {
		return err
	}
	if st.Onto, err = l.name(f["onto"], "onto"); err != nil {
		return err
	}
	if err := l.outcome(st, f, OutcomeOK, OutcomeConflict, OutcomeNoop); err != nil {
		return err
	}
	return l.define(st, f)
}

// undoStep parses an undo step: the ref whose move it undoes, and how far
// back that move is.
func (l *loader) undoStep(st *Step, k, body *yaml.Node) error {
	f, err := l.fields(body, k.Value, "ref", "back", "writer", "outcome")
	if err != nil {
		return err
	}
	if f["ref"] == nil {
		return l.errf(k, "undo: key ref is required")
	}
	if err := l.writer(st, f); err != nil {
		return err
	}
	if st.Ref, err = l.name(f["ref"], "ref"); err != nil {
		return err
	}
	if v := f["back"]; v != nil {
		b, err := l.integer(v, "back", 0, 1000)
		if err != nil {
			return err
		}
		st.Back = int(b)
	}
	return l.outcome(st, f, OutcomeOK, OutcomeConflict, OutcomeProtected)
}

// protectStep parses a protect step: the pattern, and off to clear it.
func (l *loader) protectStep(st *Step, k, body *yaml.Node) error {
	f, err := l.fields(body, k.Value, "pattern", "off", "writer")
	if err != nil {
		return err
	}
	if f["pattern"] == nil {
		return l.errf(k, "protect: key pattern is required")
	}
	if err := l.writer(st, f); err != nil {
		return err
	}
	if st.Pattern, err = l.name(f["pattern"], "pattern"); err != nil {
		return err
	}
	if v := f["off"]; v != nil {
		if v.Kind != yaml.ScalarNode || (v.Value != "true" && v.Value != "false") {
			return l.errf(v, "protect: off must be true or false, got %q", v.Value)
		}
		st.Off = v.Value == "true"
	}
	return nil
}

// raceStep parses a race step: two write steps by different writers, and
// the lock at which the second runs inside the first.
func (l *loader) raceStep(st *Step, k, body *yaml.Node, depth int, inRace bool) error {
	if inRace {
		return l.errf(k, "race: races do not nest")
	}
	f, err := l.fields(body, k.Value, "at", "first", "second")
	if err != nil {
		return err
	}
	if f["at"] == nil || f["first"] == nil || f["second"] == nil {
		return l.errf(k, "race: keys at, first and second are required")
	}
	at, err := l.str(f["at"], "at")
	if err != nil {
		return err
	}
	if at != "LOCK" && at != "SYNCLOCK" {
		return l.errf(f["at"], "race: at must be LOCK (second lands between first's merge and its CAS) or SYNCLOCK (second's sync covers first's frame: group commit), got %q", at)
	}
	st.At = at
	if st.First, err = l.step(f["first"], depth+1, true); err != nil {
		return err
	}
	if st.Second, err = l.step(f["second"], depth+1, true); err != nil {
		return err
	}
	for _, s := range []*Step{st.First, st.Second} {
		switch s.Kind {
		case KindCommit, KindLand, KindRefCreate, KindRefSet, KindRefDelete, KindUndo, KindProtect:
		default:
			return l.errf(f["first"], "race: only write steps (commit, land, ref_*, undo, protect) can race, got %s", s.Kind)
		}
	}
	if st.First.Writer == st.Second.Writer {
		return l.errf(f["second"], "race: the two sides must use different writers (writer: 0 and writer: 1), as two processes would")
	}
	return nil
}

// repeatStep parses a repeat step: a count and a non-empty body.
func (l *loader) repeatStep(st *Step, k, body *yaml.Node, depth int) error {
	f, err := l.fields(body, k.Value, "times", "steps")
	if err != nil {
		return err
	}
	if f["times"] == nil || f["steps"] == nil {
		return l.errf(k, "repeat: keys times and steps are required")
	}
	t, err := l.integer(f["times"], "times", 1, 100000)
	if err != nil {
		return err
	}
	st.Times = int(t)
	steps, err := l.list(f["steps"], "steps")
	if err != nil {
		return err
	}
	if len(steps) == 0 {
		return l.errf(f["steps"], "repeat: steps is empty")
	}
	st.Body, err = l.steps(steps, depth+1)
	return err
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

// gcStep parses a gc step: the changesets leased during it.
func (l *loader) gcStep(st *Step, k, body *yaml.Node) error {
	f, err := l.fields(body, k.Value, "leases", "writer")
	if err != nil {
		return err
	}
	if err := l.writer(st, f); err != nil {
		return err
	}
	v := f["leases"]
	if v == nil {
		return nil
	}
	if v.Kind != yaml.SequenceNode {
		return l.errf(v, "gc: leases must be a list of revisions")
	}
	for _, n := range v.Content {
		r, err := l.rev(n, "leases", false)
		if err != nil {
			return err
		}
		st.Leases = append(st.Leases, r)
	}
	return nil
}
