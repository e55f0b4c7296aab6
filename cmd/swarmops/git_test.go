package main

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// gitIn runs git in dir with configuration files shut out and a fixed
// identity, and returns its standard output.
func gitIn(dir, stdin string, args ...string) string {
	GinkgoHelper()
	home := GinkgoT().TempDir()
	c := exec.Command("git", args...)
	c.Dir = dir
	c.Env = append(baseEnv(), "HOME="+home, "XDG_CONFIG_HOME="+home, "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=Ada", "GIT_AUTHOR_EMAIL=ada@example.com", "GIT_AUTHOR_DATE=@1700000000 +0100",
		"GIT_COMMITTER_NAME=Ada", "GIT_COMMITTER_EMAIL=ada@example.com", "GIT_COMMITTER_DATE=@1700000000 +0100")
	c.Stdin = strings.NewReader(stdin)
	out, err := c.Output()
	var stderr string
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = string(ee.Stderr)
	}
	Expect(err).NotTo(HaveOccurred(), "git %v: %s", args, stderr)
	return string(out)
}

// listing describes every file under dir: regular files by mode (exec or
// not) and content, symbolic links by target. MetaDir is left out.
func listing(dir string) map[string]string {
	GinkgoHelper()
	out := map[string]string{}
	Expect(filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		Expect(err).NotTo(HaveOccurred())
		rel, _ := filepath.Rel(dir, p)
		switch {
		case d.IsDir() && d.Name() == ".swarmops-tree":
			return filepath.SkipDir
		case d.IsDir():
			return nil
		case d.Type()&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			Expect(err).NotTo(HaveOccurred())
			out[rel] = "link " + t
		default:
			st, err := os.Stat(p)
			Expect(err).NotTo(HaveOccurred())
			data, err := os.ReadFile(p)
			Expect(err).NotTo(HaveOccurred())
			out[rel] = fmt.Sprintf("file x=%v %s", st.Mode()&0o100 != 0, data)
		}
		return nil
	})).To(Succeed())
	return out
}

var _ = Describe("export --git and import --git", func() {
	var (
		e    *env
		repo string // a git work tree with a real tree in it
	)
	BeforeEach(func() {
		if _, err := exec.LookPath("git"); err != nil {
			Skip("git is not on PATH: export and import drive git itself")
		}
		e = newStoreEnv()
		repo = filepath.Join(e.root, "src")
		Expect(os.MkdirAll(filepath.Join(repo, "bin"), 0o755)).To(Succeed())
		gitIn(repo, "", "init", "-q")
		gitIn(repo, "", "symbolic-ref", "HEAD", "refs/heads/main")
		ents, err := os.ReadDir(filepath.Join(runtime.GOROOT(), "src", "strings"))
		Expect(err).NotTo(HaveOccurred())
		for _, d := range ents {
			data, err := os.ReadFile(filepath.Join(runtime.GOROOT(), "src", "strings", d.Name()))
			Expect(err).NotTo(HaveOccurred())
			Expect(os.WriteFile(filepath.Join(repo, d.Name()), data, 0o644)).To(Succeed())
		}
		Expect(os.WriteFile(filepath.Join(repo, "bin", "run.sh"), []byte("#!/bin/sh\n"), 0o755)).To(Succeed())
		Expect(os.Symlink("strings.go", filepath.Join(repo, "link.go"))).To(Succeed())
		gitIn(repo, "", "add", "-A")
		gitIn(repo, "", "commit", "-q", "-m", "Go's strings package")
	})

	It("round-trips a branch: import, then export, gives git's tree id", func() {
		d := e.ok("", "import", "--git", "src", "main").(map[string]any)
		Expect(d).To(SatisfyAll(HaveKeyWithValue("ref", "main"), HaveKeyWithValue("moved", true),
			HaveKeyWithValue("old", BeNil()), HaveKeyWithValue("changesets", BeNumerically("==", 1)),
			HaveKeyWithValue("skipped", BeEmpty())))
		x := e.ok("", "export", "--git", "out.git", "main").(map[string]any)
		Expect(x).To(SatisfyAll(HaveKeyWithValue("created", true), HaveKeyWithValue("commits_written", BeNumerically("==", 1))))
		commit := x["refs"].([]any)[0].(map[string]any)["commit"].(string)
		out := filepath.Join(e.root, "out.git")
		Expect(gitIn(out, "", "rev-parse", commit+"^{tree}")).To(Equal(gitIn(repo, "", "rev-parse", "main^{tree}")))
	})

	It("refuses to drop a commit made in git on an exported branch (E_CONFLICT with the refs), and --force drops it", func() {
		e.ok("", "import", "--git", "src", "main")
		e.ok("", "export", "--git", "src")
		gitIn(repo, "", "checkout", "-q", "swarm/main")
		e.write("src/human.txt", "made in git\n")
		gitIn(repo, "", "add", "human.txt")
		gitIn(repo, "", "commit", "-q", "-m", "human")
		human := strings.TrimSpace(gitIn(repo, "", "rev-parse", "swarm/main"))
		e.commit("put agent.txt = \"agent\\n\"\n", "--advance", "main", "--agent", "agent-1")

		r := e.run("", "export", "--git", "src", "--json")
		Expect(r.Exit).To(Equal(4), r.Stdout)
		Expect(r.Err()).To(SatisfyAll(HaveKeyWithValue("code", "E_CONFLICT"), HaveKeyWithValue("retryable", false),
			HaveKeyWithValue("hint", ContainSubstring("--force")),
			HaveKeyWithValue("refs", ConsistOf(SatisfyAll(HaveKeyWithValue("git_ref", "refs/heads/swarm/main"),
				HaveKeyWithValue("commit", human))))))
		Expect(strings.TrimSpace(gitIn(repo, "", "rev-parse", "swarm/main"))).To(Equal(human))

		x := e.ok("", "export", "--git", "src", "--force").(map[string]any)
		commit := x["refs"].([]any)[0].(map[string]any)["commit"].(string)
		Expect(strings.TrimSpace(gitIn(repo, "", "rev-parse", "swarm/main"))).To(Equal(commit))
	})

	It("exports every ref as a tree that matches checkout byte for byte, modes and link targets included, and passes git fsck --strict", func() {
		e.ok("", "import", "--git", "src", "main", "--history")
		e.commit("exec tools/build.sh = \"#!/bin/sh\\nmake\\n\"\nput notes/a.txt = \"a\\n\"\n", "--advance", "main", "--agent", "agent-1", "-m", "tools")
		e.commit("put strings.go = \"package strings\\n\"\ndelete reader.go\n", "--advance", "main", "--agent", "", "-m", "rewrite")
		e.ok("", "ref", "create", "side", "main~1")
		e.commit("put side.txt = \"side\\n\"\n", "--advance", "side", "--agent", "agent-2")
		x := e.ok("", "export", "--git", "out.git").(map[string]any)
		Expect(x["commits_written"]).To(BeNumerically("==", 4))
		out := filepath.Join(e.root, "out.git")
		gitIn(out, "", "fsck", "--strict", "--no-dangling")
		for _, r := range x["refs"].([]any) {
			ref := r.(map[string]any)
			co := filepath.Join(e.root, "co-"+ref["name"].(string))
			e.ok("", "checkout", ref["name"].(string), co)
			ar := filepath.Join(e.root, "ar-"+ref["name"].(string))
			Expect(os.MkdirAll(ar, 0o755)).To(Succeed())
			tar := gitIn(out, "", "archive", "--format=tar", ref["commit"].(string))
			cmd := exec.Command("tar", "-x", "-C", ar)
			cmd.Stdin = strings.NewReader(tar)
			Expect(cmd.Run()).To(Succeed())
			want, got := listing(ar), listing(co)
			for p, w := range want {
				if t, ok := strings.CutPrefix(w, "link "); ok && strings.HasPrefix(got[p], "file ") {
					// checkout writes a link as a file today: the store's
					// entry must still be the link, with the same target.
					c := e.ok("", "cat", ref["name"].(string)+":"+filepath.ToSlash(p)).(map[string]any)
					Expect(c).To(SatisfyAll(HaveKeyWithValue("mode", "120000"), HaveKeyWithValue("content", t)), p)
					got[p] = w
				}
			}
			Expect(got).To(Equal(want), "ref %s", ref["name"])
		}
	})

	It("writes one commit for one new changeset, and the same ids into a fresh repository", func() {
		e.ok("", "import", "--git", "src", "main", "--history")
		first := e.ok("", "export", "--git", "out.git").(map[string]any)
		e.commit("put late.txt = \"late\\n\"\n", "--advance", "main")
		second := e.ok("", "export", "--git", "out.git").(map[string]any)
		Expect(second).To(SatisfyAll(HaveKeyWithValue("commits_written", BeNumerically("==", 1)),
			HaveKeyWithValue("blobs_written", BeNumerically("==", 1)), HaveKeyWithValue("created", false)))
		Expect(second["refs"]).NotTo(Equal(first["refs"]))
		fresh := e.ok("", "export", "--git", "fresh.git").(map[string]any)
		Expect(fresh["refs"]).To(Equal(second["refs"]))
	})

	It("says what is wrong, with the table's codes", func() {
		e.write("notrepo/file", "x")
		Expect(e.run("", "export", "--json").Err()).To(SatisfyAll(HaveKeyWithValue("code", "E_USAGE"),
			HaveKeyWithValue("message", ContainSubstring("--git DIR is required"))))
		Expect(e.run("", "export", "--git", "notrepo", "--json").Err()).To(SatisfyAll(HaveKeyWithValue("code", "E_USAGE"),
			HaveKeyWithValue("message", ContainSubstring("holds files but no git repository"))))
		Expect(e.run("", "export", "--git", "out.git", "--prefix", "heads/", "--json").Err()).To(HaveKeyWithValue("code", "E_USAGE"))
		Expect(e.run("", "export", "--git", "out.git", "--prefix", "", "--json").Err()).To(HaveKeyWithValue("code", "E_USAGE"))
		Expect(e.run("", "export", "--git", "out.git", "mian", "--json").Err()).To(SatisfyAll(
			HaveKeyWithValue("code", "E_NOT_FOUND"), HaveKeyWithValue("message", `ref "mian" does not exist`)))
		Expect(e.run("", "import", "--git", "src", "nosuch", "--json").Err()).To(HaveKeyWithValue("code", "E_NOT_FOUND"))
		Expect(e.run("", "import", "--git", "notrepo", "main", "--json").Err()).To(SatisfyAll(
			HaveKeyWithValue("code", "E_NOT_FOUND"), HaveKeyWithValue("message", ContainSubstring("not a git repository"))))
		gitIn(repo, "", "tag", "v1")
		er := e.run("", "import", "--git", "src", "v1", "--json").Err()
		Expect(er).To(SatisfyAll(HaveKeyWithValue("code", "E_USAGE"), HaveKeyWithValue("message", ContainSubstring("--as"))))
		Expect(er["message"]).NotTo(MatchRegexp(leakedLayer + "|gitx: "))
		Expect(e.run("", "import", "--git", "src", "v1", "--as", "-x", "--json").Err()).To(HaveKeyWithValue("code", "E_USAGE"))
		Expect(e.ok("", "import", "--git", "src", "v1", "--as", "release")).To(HaveKeyWithValue("ref", "release"))
	})
})
