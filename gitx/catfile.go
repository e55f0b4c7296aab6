package gitx

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"

	"github.com/swarmops/swarmops/core"
)

// missingCommits returns those of shas that the repository does not hold
// as commits, asking one `git cat-file --batch-check` for all of them.
func (r *repo) missingCommits(shas []string) (map[string]bool, error) {
	missing := map[string]bool{}
	if len(shas) == 0 {
		return missing, nil
	}
	var in bytes.Buffer
	for _, s := range shas {
		in.WriteString(s)
		in.WriteByte('\n')
	}
	out, err := r.run(in.Bytes(), "cat-file", "--batch-check=%(objecttype)")
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(shas) {
		return nil, fmt.Errorf("%w: %w: git cat-file --batch-check answered %d lines for %d ids", core.ErrIO, ErrGitFailed, len(lines), len(shas))
	}
	for i, l := range lines {
		// A missing object is "<id> missing"; a present one its type.
		if l != "commit" {
			missing[shas[i]] = true
		}
	}
	return missing, nil
}

// catFile is a running `git cat-file --batch`: it answers one object at a
// time, so a history's commits and blobs are read by one process.
type catFile struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	errOut bytes.Buffer
}

// startCatFile starts `git cat-file --batch` on r.
func (r *repo) startCatFile() (*catFile, error) {
	cmd, err := r.command("cat-file", "--batch")
	if err != nil {
		return nil, err
	}
	c := &catFile{cmd: cmd}
	cmd.Stderr = &limitedBuffer{max: stderrLimit, b: &c.errOut}
	if c.in, err = cmd.StdinPipe(); err != nil {
		return nil, gitFailed([]string{"cat-file"}, err, "")
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, gitFailed([]string{"cat-file"}, err, "")
	}
	c.out = bufio.NewReaderSize(stdout, 256<<10)
	if err := cmd.Start(); err != nil {
		return nil, gitFailed([]string{"cat-file"}, err, "")
	}
	return c, nil
}

// read returns the content of object sha, which must be of type typ.
func (c *catFile) read(sha, typ string) ([]byte, error) {
	fail := func(err error) ([]byte, error) {
		return nil, gitFailed([]string{"cat-file"}, err, c.errOut.String())
	}
	if _, err := io.WriteString(c.in, sha+"\n"); err != nil {
		return fail(err)
	}
	head, err := c.out.ReadString('\n')
	if err != nil {
		return fail(err)
	}
	f := strings.Fields(head)
	if len(f) == 2 && f[1] == "missing" {
		return nil, fmt.Errorf("%w: git object %s is missing", core.ErrNotFound, sha)
	}
	if len(f) != 3 || f[0] != sha {
		return fail(fmt.Errorf("unexpected answer %q for %s", strings.TrimSpace(head), sha))
	}
	size, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil || size < 0 {
		return fail(fmt.Errorf("unexpected size in %q", strings.TrimSpace(head)))
	}
	data := make([]byte, size+1)
	if _, err := io.ReadFull(c.out, data); err != nil {
		return fail(err)
	}
	if data[size] != '\n' {
		return fail(fmt.Errorf("object %s not followed by a newline", sha))
	}
	if f[1] != typ {
		return nil, fmt.Errorf("%w: %w: git object %s is a %s, not a %s", core.ErrInvalid, ErrUnrepresentable, sha, f[1], typ)
	}
	return data[:size], nil
}

// close ends the process.
func (c *catFile) close() error {
	return closeAndWait(c.cmd, c.in, &c.errOut, []string{"cat-file"})
}
