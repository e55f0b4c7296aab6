package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/worktree"
)

// defaultStoreName is the store's directory when neither --store nor
// SWARMOPS_STORE names one.
const defaultStoreName = ".swarmops"

// The change-list format read by `swarmops commit -F FILE` (docs/cli.md has
// the user's version). One statement per line; blank lines and lines whose
// first token starts with '#' are ignored; a '#' starting a token ends the
// line as a comment.
//
//	put    PATH < SOURCE     regular file (0644), content of the local file SOURCE
//	put    PATH = "TEXT"     regular file, inline content
//	exec   PATH < SOURCE     executable file (0755)
//	exec   PATH = "TEXT"
//	link   PATH = "TARGET"   symbolic link (120000) to TARGET (or < SOURCE: the file's bytes)
//	delete PATH
//
// PATH and SOURCE are bare tokens (no whitespace, not starting with '"' or
// '#') or quoted strings. A quoted string may hold the escapes \\ \" \n \t
// \r \0 and \xHH (any byte). SOURCE is relative to the current directory.
// Every error names the list, the line and the byte column (both 1-based).

// changeLine is one parsed statement.
type changeLine struct {
	Line   int
	Path   string
	Delete bool
	Exec   bool
	Link   bool
	Inline bool   // content is Text; otherwise it is read from Source
	Text   []byte // inline content
	Source string // local file
}

// listError is a change-list error with its position.
type listError struct {
	Name      string
	Line, Col int
	Msg       string
}

func (e *listError) Error() string {
	return fmt.Sprintf("%s:%d:%d: %s", e.Name, e.Line, e.Col, e.Msg)
}

// token is a lexical token of a line.
type token struct {
	text   string
	col    int // 1-based byte column
	quoted bool
}

// lexLine splits a line into tokens, stopping at a comment.
func lexLine(line string, errAt errAtFunc) ([]token, error) {
	var toks []token
	i := 0
	for i < len(line) {
		c := line[i]
		if c == ' ' || c == '\t' || c == '\r' {
			i++
			continue
		}
		if c == '#' {
			break
		}
		start := i
		if c != '"' {
			for i < len(line) && line[i] != ' ' && line[i] != '\t' && line[i] != '\r' {
				if line[i] == '"' {
					return nil, errAt(i+1, "unexpected '\"' inside a bare word (quote the whole word)")
				}
				i++
			}
			toks = append(toks, token{text: line[start:i], col: start + 1})
			continue
		}
		var b strings.Builder
		i++
		closed := false
		for i < len(line) {
			c := line[i]
			if c == '"' {
				i++
				closed = true
				break
			}
			if c != '\\' {
				b.WriteByte(c)
				i++
				continue
			}
			if i+1 >= len(line) {
				return nil, errAt(i+1, "backslash at end of line")
			}
			switch e := line[i+1]; e {
			case '\\', '"':
				b.WriteByte(e)
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case '0':
				b.WriteByte(0)
			case 'x':
				if i+3 >= len(line) || !isHex(line[i+2:i+4]) {
					return nil, errAt(i+1, "\\x needs two hex digits")
				}
				v, _ := strconv.ParseUint(line[i+2:i+4], 16, 8) // isHex said it parses
				b.WriteByte(byte(v))
				i += 2
			default:
				return nil, errAt(i+1, "unknown escape \\%c (use \\\\ \\\" \\n \\t \\r \\0 \\xHH)", e)
			}
			i += 2
		}
		if !closed {
			return nil, errAt(start+1, "unterminated quoted string")
		}
		if i < len(line) && line[i] != ' ' && line[i] != '\t' && line[i] != '\r' {
			return nil, errAt(i+1, "expected a space after the closing quote")
		}
		toks = append(toks, token{text: b.String(), col: start + 1, quoted: true})
	}
	return toks, nil
}

// errAtFunc makes a listError at a byte column of the current line.
type errAtFunc func(col int, format string, args ...any) error

// parseChanges parses a change list. name labels errors ("-" reads as
// "<stdin>").
func parseChanges(name string, src []byte) ([]changeLine, error) {
	if name == "-" {
		name = "<stdin>"
	}
	var out []changeLine
	seen := make(map[string]int)
	for n, line := range strings.Split(string(src), "\n") {
		lineNo := n + 1
		errAt := func(col int, format string, args ...any) error {
			return &listError{Name: name, Line: lineNo, Col: col, Msg: fmt.Sprintf(format, args...)}
		}
		if err := checkLineUTF8(line, errAt); err != nil {
			return nil, err
		}
		toks, err := lexLine(line, errAt)
		if err != nil {
			return nil, err
		}
		if len(toks) == 0 {
			continue
		}
		cl, err := parseStatement(toks, len(line), lineNo, seen, errAt)
		if err != nil {
			return nil, err
		}
		out = append(out, cl)
	}
	return out, nil
}

// checkLineUTF8 refuses a line that is not UTF-8, at the first bad byte:
// paths must be UTF-8, and quoted content may use \xHH for raw bytes.
func checkLineUTF8(line string, errAt errAtFunc) error {
	if utf8.ValidString(line) {
		return nil
	}
	for i := 0; i < len(line); {
		r, size := utf8.DecodeRuneInString(line[i:])
		if r == utf8.RuneError && size == 1 {
			return errAt(i+1, "invalid UTF-8 (write raw bytes as \\xHH inside quotes)")
		}
		i += size
	}
	return nil
}

// parseStatement parses the tokens of one non-empty line of lineLen bytes.
// seen maps each path already changed to its line, so a path changed twice
// is refused at its second line.
func parseStatement(toks []token, lineLen, lineNo int, seen map[string]int, errAt errAtFunc) (changeLine, error) {
	verb := toks[0]
	cl := changeLine{Line: lineNo}
	switch {
	case verb.quoted:
		return cl, errAt(verb.col, "expected put, exec, link or delete, got a quoted string")
	case verb.text == "put":
	case verb.text == "exec":
		cl.Exec = true
	case verb.text == "link":
		cl.Link = true
	case verb.text == "delete":
		cl.Delete = true
	default:
		return cl, errAt(verb.col, "unknown statement %q (expected put, exec, link or delete)", verb.text)
	}
	if len(toks) < 2 {
		return cl, errAt(lineLen+1, "%s needs a path", verb.text)
	}
	pt := toks[1]
	if err := checkPath(pt.text); err != nil {
		return cl, errAt(pt.col, "%v", err)
	}
	// No change may reach into .git, a work tree's metadata directory or
	// a store in its default place: a later checkout of the tree would
	// write there.
	if err := worktree.ValidatePath(pt.text, defaultStoreName); err != nil {
		return cl, errAt(pt.col, "%s", plainText(err))
	}
	cl.Path = pt.text
	if prev, dup := seen[cl.Path]; dup {
		return cl, errAt(pt.col, "path %q is already changed on line %d", cl.Path, prev)
	}
	seen[cl.Path] = lineNo
	if cl.Delete {
		if len(toks) > 2 {
			return cl, errAt(toks[2].col, "unexpected %q after delete PATH", toks[2].text)
		}
		return cl, nil
	}
	return cl, parseContent(&cl, toks, lineLen, errAt)
}

// parseContent parses what follows a put or exec PATH: '<' SOURCE or '='
// "TEXT".
func parseContent(cl *changeLine, toks []token, lineLen int, errAt errAtFunc) error {
	if len(toks) < 3 {
		return errAt(lineLen+1, "expected '<' SOURCE or '=' \"TEXT\" after the path")
	}
	op := toks[2]
	if op.quoted || (op.text != "<" && op.text != "=") {
		return errAt(op.col, "expected '<' or '=' after the path, got %q", op.text)
	}
	if len(toks) < 4 {
		return errAt(lineLen+1, "expected %s after %q", map[string]string{"<": "a source file", "=": "a quoted string"}[op.text], op.text)
	}
	arg := toks[3]
	if len(toks) > 4 {
		return errAt(toks[4].col, "unexpected %q after the statement", toks[4].text)
	}
	if op.text == "=" {
		if !arg.quoted {
			return errAt(arg.col, "inline content must be a quoted string, like \"text\\n\"")
		}
		cl.Inline, cl.Text = true, []byte(arg.text)
		return nil
	}
	if arg.text == "" || strings.IndexByte(arg.text, 0) >= 0 {
		return errAt(arg.col, "source file name is empty or contains NUL")
	}
	cl.Source = arg.text
	return nil
}

// loadChanges turns parsed lines into store changes, reading source files
// with readFile.
func loadChanges(name string, lines []changeLine, readFile func(string) ([]byte, error)) ([]core.Change, error) {
	if name == "-" {
		name = "<stdin>"
	}
	out := make([]core.Change, 0, len(lines))
	for _, cl := range lines {
		c := core.Change{Path: cl.Path, Delete: cl.Delete}
		switch {
		case cl.Link:
			c.Mode = objects.ModeSymlink
		case cl.Exec:
			c.Mode = objects.ModeExec
		}
		switch {
		case cl.Delete:
		case cl.Inline:
			c.Data = bytes.Clone(cl.Text)
		default:
			data, err := readFile(cl.Source)
			if err != nil {
				var pe *fs.PathError
				msg := err.Error()
				if errors.As(err, &pe) {
					msg = pe.Err.Error()
				}
				return nil, usagef("%s:%d: put %s: source %q: %s", name, cl.Line, cl.Path, cl.Source, msg)
			}
			c.Data = data
		}
		out = append(out, c)
	}
	return out, nil
}
