package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/worktree"
)

// The work-tree commands as an agent uses them: check out, edit with
// ordinary tools, look at status, commit from inside the tree.
var _ = Describe("work trees", func() {
	var (
		e  *env
		wt string
	)
	BeforeEach(func() {
		e = newStoreEnv()
		e.commit(list1, "--advance", "main", "-m", "first")
		wt = filepath.Join(e.root, "wt")
		e.ok("", "checkout", "main", wt)
	})

	It("status lists what changed, and a commit from inside the tree records exactly that and moves its base", func() {
		st := e.ok("", "status", wt).(map[string]any)
		Expect(st["clean"]).To(BeTrue())
		Expect(os.WriteFile(filepath.Join(wt, "a.txt"), []byte("ALPHA\n"), 0o644)).To(Succeed())
		Expect(os.Remove(filepath.Join(wt, "dir", "b.txt"))).To(Succeed())
		Expect(os.WriteFile(filepath.Join(wt, "new.txt"), []byte("n\n"), 0o755)).To(Succeed())
		Expect(os.Symlink("a.txt", filepath.Join(wt, "ln"))).To(Succeed())
		r := e.run("", "status", wt)
		Expect(r.Exit).To(Equal(0), r.Stderr)
		Expect(r.Stdout).To(Equal("M a.txt\nD dir/b.txt\nA ln\nA new.txt\n"))

		// Inside the tree, commit needs neither --dir nor a store: the tree
		// records both.
		c := e.cmd("", "commit", "-m", "edit", "--advance", "main", "--json")
		c.Dir = wt
		c.Env = append(baseEnv(), e.extra...)
		if e.server != nil {
			c.Env = append(c.Env, "SWARMOPS_SERVER=required")
		}
		out, err := c.Output()
		Expect(err).NotTo(HaveOccurred(), "%s", out)
		Expect(e.ok("", "status", wt).(map[string]any)["clean"]).To(BeTrue())
		Expect(e.run("", "cat", "main:ln").Stdout).To(Equal("a.txt"))
		ls := e.ok("", "ls", "main").([]any)
		modes := map[string]any{}
		for _, x := range ls {
			m := x.(map[string]any)
			modes[m["name"].(string)] = m["mode"]
		}
		Expect(modes).To(Equal(map[string]any{"a.txt": "100644", "ln": "120000", "new.txt": "100755"}))
	})

	It("commits the whole work tree when --dir names a directory inside it", func() {
		Expect(os.WriteFile(filepath.Join(wt, "dir", "b.txt"), []byte("BETA\n"), 0o644)).To(Succeed())
		d := e.ok("", "commit", "--dir", filepath.Join(wt, "dir"), "--advance", "main", "-m", "from dir").(map[string]any)
		Expect(d["changes"]).To(BeEquivalentTo(1))
		Expect(d["dir"]).To(Equal(wt))
		Expect(e.run("", "cat", "main:a.txt").Stdout).To(Equal("alpha\n"))
		Expect(e.run("", "cat", "main:dir/b.txt").Stdout).To(Equal("BETA\n"))
		Expect(filepath.Join(wt, "dir", ".swarmops-tree")).NotTo(BeADirectory())
		Expect(e.ok("", "status", wt).(map[string]any)["clean"]).To(BeTrue())
	})

	It("keeps directory records unless SWARMOPS_DIR_RECORDS=off, and refuses any other value", func() {
		dirs := filepath.Join(wt, ".swarmops-tree", "dirs")
		e.extra = []string{"SWARMOPS_DIR_RECORDS=off"}
		Expect(e.ok("", "status", wt).(map[string]any)["clean"]).To(BeTrue())
		Expect(dirs).NotTo(BeAnExistingFile())
		e.extra = []string{"SWARMOPS_DIR_RECORDS=maybe"}
		er := e.run("", "status", wt, "--json").Err()
		Expect(er["code"]).To(Equal("E_USAGE"))
		Expect(er["message"]).To(ContainSubstring(`SWARMOPS_DIR_RECORDS="maybe"`))
		e.extra = nil
		// A directory is recorded once it last changed 20 ms before a
		// status began; the checkout has just written them all.
		Eventually(func() bool {
			Expect(e.ok("", "status", wt).(map[string]any)["clean"]).To(BeTrue())
			_, err := os.Stat(dirs)
			return err == nil
		}).WithTimeout(10 * time.Second).WithPolling(50 * time.Millisecond).Should(BeTrue())
		Expect(os.WriteFile(filepath.Join(wt, "dir", "new.txt"), []byte("n\n"), 0o644)).To(Succeed())
		Expect(e.run("", "status", wt).Stdout).To(Equal("A dir/new.txt\n"))
	})

	It("refuses an empty commit unless --allow-empty, and a --parent other than the tree's base", func() {
		er := e.run("", "commit", "--dir", wt, "--advance", "main", "--json").Err()
		Expect(er["code"]).To(Equal("E_EMPTY"))
		e.ok("", "commit", "--dir", wt, "--advance", "main", "--allow-empty")
		e.commit("put z.txt = \"z\\n\"\n", "--advance", "main")
		Expect(os.WriteFile(filepath.Join(wt, "a.txt"), []byte("changed\n"), 0o644)).To(Succeed())
		er = e.run("", "commit", "--dir", wt, "--parent", "main", "--advance", "main", "--json").Err()
		Expect(er["code"]).To(Equal("E_STALE"))
		Expect(er).To(HaveKey("base"))
		// Committing on its own base against a main that moved is a lost
		// compare-and-swap, never a silent revert of z.txt.
		er = e.run("", "commit", "--dir", wt, "--advance", "main", "--json").Err()
		Expect(er["code"]).To(Equal("E_CONFLICT"))
		Expect(e.run("", "cat", "main:z.txt").Stdout).To(Equal("z\n"))
	})

	It("refuses to commit a tree into a store that lacks its base, naming the store it came from", func() {
		o := newEnv()
		o.ok("", "init")
		Expect(os.WriteFile(filepath.Join(wt, "a.txt"), []byte("changed\n"), 0o644)).To(Succeed())
		er := o.run("", "commit", "--dir", wt, "--advance", "main", "--json").Err()
		Expect(er["code"]).To(Equal("E_NOT_FOUND"), "%v", er)
		Expect(er["message"]).To(ContainSubstring("checked out from"))
		Expect(o.run("", "ref", "get", "main", "--json").Err()["code"]).To(Equal("E_NOT_FOUND"), "the other store's main moved")
	})

	It("refuses to switch over local changes without --force, and removes what the new revision deleted", func() {
		e.commit("put a.txt = \"two\\n\"\nput gone.txt = \"g\\n\"\n", "--advance", "main")
		e.ok("", "checkout", "main", wt)
		Expect(filepath.Join(wt, "gone.txt")).To(BeARegularFile())
		Expect(os.WriteFile(filepath.Join(wt, "a.txt"), []byte("local\n"), 0o644)).To(Succeed())
		er := e.run("", "checkout", "main~1", wt, "--json").Err()
		Expect(er["code"]).To(Equal("E_CONFLICT"))
		Expect(er["paths"]).To(ConsistOf("a.txt"))
		b, _ := os.ReadFile(filepath.Join(wt, "a.txt"))
		Expect(string(b)).To(Equal("local\n"), "a refused switch writes nothing")
		e.ok("", "checkout", "main~1", wt, "--force")
		Expect(filepath.Join(wt, "gone.txt")).NotTo(BeAnExistingFile())
		b, _ = os.ReadFile(filepath.Join(wt, "a.txt"))
		Expect(string(b)).To(Equal("alpha\n"))
	})

	It("never commits .git, the store or ignored files, and a plain directory needs a parent or --root", func() {
		plain := e.writeTree("plain", map[string]string{
			"keep.txt":    "k\n",
			".gitignore":  "*.o\nbuild/\n",
			"x.o":         "obj",
			"build/out":   "bin",
			".git/config": "[core]",
		})
		er := e.run("", "commit", "--dir", plain, "--json").Err()
		Expect(er["message"]).To(ContainSubstring("--root"))
		d := e.ok("", "commit", "--dir", plain, "--root").(map[string]any)
		ls := e.ok("", "ls", d["id"].(string)).([]any)
		var names []string
		for _, x := range ls {
			names = append(names, x.(map[string]any)["name"].(string))
		}
		Expect(names).To(ConsistOf(".gitignore", "keep.txt"))
	})

	It("refuses to commit a directory whose first checkout was interrupted, which would delete what it had yet to write", func() {
		half := filepath.Join(e.root, "half")
		e.ok("", "checkout", "main", half)
		// A checkout killed before its index: the metadata directory is
		// there, some files are not.
		Expect(os.Remove(filepath.Join(half, worktree.MetaDir, "index"))).To(Succeed())
		Expect(os.RemoveAll(filepath.Join(half, "dir"))).To(Succeed())
		before := e.ok("", "ref", "get", "main").(map[string]any)["id"]
		r := e.run("", "commit", "--dir", half, "--advance", "main", "-m", "agent work", "--json")
		Expect(r.Exit).To(Equal(3), r.Stdout)
		er := r.Err()
		Expect(er["code"]).To(Equal("E_NOT_FOUND"))
		Expect(er["message"]).To(ContainSubstring("interrupted"))
		Expect(e.ok("", "ref", "get", "main").(map[string]any)["id"]).To(Equal(before))
		// The same checkout again finishes the tree, which then commits.
		e.ok("", "checkout", "main", half)
		Expect(e.ok("", "status", half).(map[string]any)["clean"]).To(BeTrue())
	})

	It("names a checkout that stopped midway, refuses to commit its half, and lets a checkout of the old base put everything back", func() {
		var puts, dels strings.Builder
		for i := 0; i < 30; i++ {
			fmt.Fprintf(&puts, "put d/f%02d = \"%d\\n\"\n", i, i)
			fmt.Fprintf(&dels, "delete d/f%02d\n", i)
		}
		e.commit(puts.String(), "--advance", "main", "-m", "thirty")
		gone := e.commit(dels.String(), "--parent", "main", "-m", "gone")
		e.ok("", "checkout", "main", wt)
		main := e.ok("", "ref", "get", "main").(map[string]any)["id"]
		stopped := false
		for n := 10; n < 600 && !stopped; n += 10 {
			e.extra = []string{fmt.Sprintf("SWARMOPS_TEST_CRASH_AT=%d", n)}
			r := e.run("", "checkout", gone, wt)
			e.extra = nil
			if r.Exit == 0 {
				Fail(fmt.Sprintf("no crash point up to %d stopped the checkout midway", n))
			}
			Expect(r.Exit).To(Equal(kindCrashed.Exit), r.Stderr)
			st := e.ok("", "status", wt).(map[string]any)
			if st["switching"] == nil {
				Expect(st["clean"]).To(BeTrue(), "crash at %d: status shows changes %v and names no checkout", n, st["changes"])
				continue
			}
			stopped = true
			Expect(st["switching"]).To(Equal(gone))
			r = e.run("", "commit", "--dir", wt, "--advance", "main", "-m", "half", "--json")
			Expect(r.Exit).To(Equal(kindUnresolved.Exit), r.Stdout)
			Expect(r.Err()).To(HaveKeyWithValue("onto", gone))
			Expect(e.ok("", "ref", "get", "main").(map[string]any)["id"]).To(Equal(main))
			// An edit in the way of finishing it: the hint cannot be to
			// commit, which is refused.
			Expect(os.WriteFile(filepath.Join(wt, "d", "f29"), []byte("edited\n"), 0o644)).To(Succeed())
			er := e.run("", "checkout", "main", wt, "--json").Err()
			Expect(er).To(SatisfyAll(HaveKeyWithValue("code", "E_CONFLICT"), HaveKeyWithValue("onto", gone),
				HaveKeyWithValue("hint", ContainSubstring("--force"))))
			Expect(er["hint"]).NotTo(HavePrefix("commit"))
		}
		e.ok("", "checkout", "main", wt, "--force")
		st := e.ok("", "status", wt).(map[string]any)
		Expect(st["clean"]).To(BeTrue(), "%v", st["changes"])
		Expect(st["switching"]).To(BeNil())
		Expect(filepath.Join(wt, "d", "f29")).To(BeAnExistingFile())
	})

	It("names the files it skipped when they leave nothing to commit", func() {
		Expect(syscall.Mkfifo(filepath.Join(wt, "pipe"), 0o644)).To(Succeed())
		r := e.run("", "commit", "--dir", wt, "--advance", "main", "-m", "x", "--json")
		Expect(r.Exit).To(Equal(kindEmpty.Exit), r.Stdout)
		Expect(r.Err()["skipped"]).To(ConsistOf(HaveKeyWithValue("path", "pipe")))
		r = e.run("", "commit", "--dir", wt, "--advance", "main", "-m", "x")
		Expect(r.Stderr).To(ContainSubstring(`warning: skipped "pipe"`))
	})

	It("refuses an agent name that would forge a line or drive a terminal where log prints it", func() {
		er := e.run("put x = \"1\"\n", "commit", "-F", "-", "--advance", "main", "--agent", "a\nb", "--json").Err()
		Expect(er["code"]).To(Equal("E_USAGE"))
		Expect(er["message"]).To(ContainSubstring("--agent"))
		e.extra = []string{"SWARMOPS_AGENT=\x1b[31mred"}
		er = e.run("", "ref", "create", "other", "main", "--json").Err()
		e.extra = nil
		Expect(er["code"]).To(Equal("E_USAGE"))
		Expect(er["message"]).To(ContainSubstring("SWARMOPS_AGENT"))
		Expect(e.run("", "ref", "get", "other", "--json").Err()["code"]).To(Equal("E_NOT_FOUND"))
	})

	It("prints a name with a newline or an escape quoted in status, ls and diff, and as it is in JSON", func() {
		odd := "new\nline\x1b[31m"
		Expect(os.WriteFile(filepath.Join(wt, odd), []byte("x\n"), 0o644)).To(Succeed())
		q := `"new\nline\x1b[31m"`
		Expect(e.run("", "status", wt).Stdout).To(Equal("A " + q + "\n"))
		Expect(e.run("", "diff", "--work", wt, "--name-status").Stdout).To(Equal("A\t" + q + "\n"))
		Expect(e.run("", "diff", "--work", wt).Stdout).To(HavePrefix(`diff --git "a/new\nline\x1b[31m" "b/new\nline\x1b[31m"` + "\n"))
		d := e.ok("", "commit", "--dir", wt, "--advance", "main", "-m", "odd").(map[string]any)
		Expect(e.run("", "ls", d["id"].(string)).Stdout).To(ContainSubstring(" " + q + "\n"))
		names := []any{}
		for _, x := range e.ok("", "ls", d["id"].(string)).([]any) {
			names = append(names, x.(map[string]any)["name"])
		}
		Expect(names).To(ContainElement(odd))
	})

	It("says a path under a link is under a link, not under a file", func() {
		er := e.run("link evil = \"/x\"\nput evil/x = \"p\\n\"\n", "commit", "-F", "-", "--advance", "main", "--json").Err()
		Expect(er["code"]).To(Equal("E_USAGE"))
		Expect(er["message"]).To(ContainSubstring(`"evil" is a symbolic link`))
	})

	It("refuses change-list paths into .git, the metadata directory or a store in its default place", func() {
		for _, p := range []string{".git/config", "a/.GIT/x", ".swarmops-tree/index", ".swarmops/checkpoint"} {
			er := e.run("put "+p+" = \"x\"\n", "commit", "-F", "-", "--advance", "main", "--json").Err()
			Expect(er["code"]).To(Equal("E_USAGE"), p)
		}
	})

	It("records a link from a change list", func() {
		e.commit("link l = \"a.txt\"\n", "--advance", "main")
		e.ok("", "checkout", "main", wt)
		target, err := os.Readlink(filepath.Join(wt, "l"))
		Expect(err).NotTo(HaveOccurred())
		Expect(target).To(Equal("a.txt"))
	})

	It("round-trips a tree with links, executables, odd names and ignored junk", func() {
		if _, err := exec.LookPath("diff"); err != nil {
			Skip("needs diff(1)")
		}
		src := e.writeTree("src", map[string]string{
			"plain.txt":              "p\n",
			"empty":                  "",
			"with space/ünïcode.txt": "u\n",
			"deep/a/b/c/d/e/f.txt":   "deep\n",
			".gitignore":             "node_modules/\n*.o\n",
			"node_modules/x.js":      "junk",
			"m.o":                    "junk",
		})
		Expect(os.WriteFile(filepath.Join(src, "run.sh"), []byte("#!/bin/sh\n"), 0o755)).To(Succeed())
		Expect(os.Symlink("plain.txt", filepath.Join(src, "rel"))).To(Succeed())
		Expect(os.Symlink("/etc/hostname", filepath.Join(src, "abs"))).To(Succeed())
		Expect(os.Symlink("nowhere", filepath.Join(src, "dangling"))).To(Succeed())
		Expect(os.Symlink("deep/a", filepath.Join(src, "todir"))).To(Succeed())
		e.ok("", "commit", "--dir", src, "--parent", "main", "--advance", "main")
		out := filepath.Join(e.root, "out")
		e.ok("", "checkout", "main", out)
		cmd := exec.Command("diff", "-r", "--no-dereference", "-x", ".swarmops-tree", "-x", "node_modules", "-x", "*.o", src, out)
		b, err := cmd.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "%s", b)
		fi, err := os.Stat(filepath.Join(out, "run.sh"))
		Expect(err).NotTo(HaveOccurred())
		Expect(fi.Mode().Perm() & 0o100).NotTo(BeZero())
		Expect(filepath.Join(out, "node_modules")).NotTo(BeAnExistingFile())
	})

	It("leaves an agent's work tree made inside another out of that tree's status and commits", func() {
		// The hook's default place is under the cwd, which may itself be
		// a work tree: the orchestrator's checkout.
		r := e.run(`{"hook_event_name":"WorktreeCreate","name":"a1","cwd":"`+wt+`"}`, "hook", "worktree-create")
		Expect(r.Exit).To(Equal(0), r.Stderr)
		agent := strings.TrimSpace(r.Stdout)
		Expect(agent).To(HavePrefix(wt + string(filepath.Separator)))
		Expect(os.WriteFile(filepath.Join(agent, "wip.txt"), []byte("unfinished\n"), 0o644)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(wt, "a.txt"), []byte("edited\n"), 0o644)).To(Succeed())
		rel, err := filepath.Rel(wt, agent)
		Expect(err).NotTo(HaveOccurred())
		rel = filepath.ToSlash(rel)
		Expect(e.run("", "status", wt).Stdout).To(Equal("M a.txt\n! " + rel + " (a work tree of its own)\n"))
		d := e.ok("", "commit", "--dir", wt, "--advance", "main", "-m", "orchestrator edit").(map[string]any)
		ls := e.ok("", "ls", d["id"].(string)).([]any)
		for _, x := range ls {
			Expect(x.(map[string]any)["name"]).NotTo(Equal(".claude"))
		}
		Expect(e.ok("", "status", wt).(map[string]any)["clean"]).To(BeTrue())
	})

	It("gives a hook tree its base ref to follow, so a plain update brings what landed there", func() {
		r := e.run(`{"name":"a2","cwd":"`+e.root+`"}`, "hook", "worktree-create")
		Expect(r.Exit).To(Equal(0), r.Stderr)
		agent := strings.TrimSpace(r.Stdout)
		Expect(e.ok("", "status", agent).(map[string]any)["ref"]).To(Equal("main"))
		e.commit("put landed.txt = \"l\\n\"\n", "--advance", "main", "-m", "landed meanwhile")
		e.ok("", "update", agent)
		Expect(filepath.Join(agent, "landed.txt")).To(BeAnExistingFile())

		Expect(e.run("", "checkout", "main", filepath.Join(e.root, "x"), "--follow", "nowhere", "--json").Err()).
			To(HaveKeyWithValue("code", "E_NOT_FOUND"))
		Expect(e.run("", "checkout", "main", filepath.Join(e.root, "x"), "--follow", "a//b", "--json").Err()).
			To(HaveKeyWithValue("code", "E_USAGE"))
	})

	It("hands an agent a work tree through the WorktreeCreate and WorktreeRemove hooks, losing nothing it wrote", func() {
		r := e.run(`{"hook_event_name":"WorktreeCreate","name":"a7","cwd":"`+e.root+`"}`, "hook", "worktree-create")
		Expect(r.Exit).To(Equal(0), r.Stderr)
		dir := strings.TrimSpace(r.Stdout)
		Expect(dir).To(Equal(filepath.Join(e.root, ".claude", "worktrees", "a7")))
		Expect(e.ok("", "ref", "get", "agent/a7").(map[string]any)["id"]).To(Equal(e.ok("", "ref", "get", "main").(map[string]any)["id"]))
		Expect(os.WriteFile(filepath.Join(dir, "work.txt"), []byte("done\n"), 0o644)).To(Succeed())
		r = e.run(`{"hook_event_name":"WorktreeRemove","worktree_path":"`+dir+`"}`, "hook", "worktree-remove")
		Expect(r.Exit).To(Equal(0), r.Stderr)
		Expect(dir).NotTo(BeAnExistingFile())
		Expect(e.run("", "cat", "agent/a7:work.txt").Stdout).To(Equal("done\n"))
		Expect(e.ok("", "show", "agent/a7").(map[string]any)["agent"]).To(Equal("a7"))
		Expect(filepath.Join(e.store, core.LeaseDir, treeLeaseName(dir))).NotTo(BeAnExistingFile(),
			"the removed tree's lease would hold its base from gc for a day")
		er := e.run(`{"name":"../x"}`, "hook", "worktree-create", "--json").Err()
		Expect(er["code"]).To(Equal("E_USAGE"))
	})

	It("gives a reused hook name's new tree the work its branch kept, and removes it again", func() {
		create := func() string {
			r := e.run(`{"name":"a8","cwd":"`+e.root+`"}`, "hook", "worktree-create")
			Expect(r.Exit).To(Equal(0), r.Stderr)
			return strings.TrimSpace(r.Stdout)
		}
		remove := func(dir string) {
			r := e.run(`{"worktree_path":"`+dir+`"}`, "hook", "worktree-remove")
			Expect(r.Exit).To(Equal(0), r.Stderr)
			Expect(dir).NotTo(BeAnExistingFile())
		}
		dir := create()
		Expect(os.WriteFile(filepath.Join(dir, "one.txt"), []byte("one\n"), 0o644)).To(Succeed())
		remove(dir) // agent/a8 keeps one.txt; main does not
		dir = create()
		Expect(filepath.Join(dir, "one.txt")).To(BeAnExistingFile())
		Expect(os.WriteFile(filepath.Join(dir, "two.txt"), []byte("two\n"), 0o644)).To(Succeed())
		remove(dir)
		Expect(e.run("", "cat", "agent/a8:one.txt").Stdout).To(Equal("one\n"))
		Expect(e.run("", "cat", "agent/a8:two.txt").Stdout).To(Equal("two\n"))

		// Once landed, the next tree starts from main again, and its
		// removal fast-forwards the branch.
		Expect(e.run("", "land", "agent/a8", "--onto", "main").Exit).To(Equal(0))
		dir = create()
		Expect(os.WriteFile(filepath.Join(dir, "three.txt"), []byte("three\n"), 0o644)).To(Succeed())
		remove(dir)
		Expect(e.run("", "cat", "agent/a8:three.txt").Stdout).To(Equal("three\n"))
	})

	It("makes hook trees in SWARMOPS_WORKTREES, printed absolute, with or without a server", func() {
		rel := "wts"
		c := e.cmd(`{"name":"a9"}`, "hook", "worktree-create")
		c.Dir = e.root
		c.Env = append(c.Env, "SWARMOPS_WORKTREES="+rel)
		out, err := c.Output()
		Expect(err).NotTo(HaveOccurred(), "%s", out)
		Expect(strings.TrimSpace(string(out))).To(Equal(filepath.Join(e.root, rel, "a9")))
	})
})
