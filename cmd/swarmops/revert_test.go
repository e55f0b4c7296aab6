package main

import (
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// The revert case: an agent whose work tree lacks what
// other agents landed records a merge (or commits on main) and lands it.
// Every other agent's landed change must survive: a file the work tree
// merely still holds in its old version never wins.
var _ = Describe("commits onto a moved main", func() {
	var (
		e  *env
		wt string
	)
	// others lands three other agents' changes on main: a modified file, a
	// new file, a deleted file, and an edit of slot 1 of the shared
	// registry.
	others := func() {
		for _, l := range []string{
			"put one.txt = \"one by agent-1\\n\"\nput reg.txt = \"slot 1: agent-1\\n--\\nslot 3: free\\n--\\nslot 5: free\\n\"\n",
			"put two.txt = \"two by agent-2\\n\"\n",
			"delete old.txt\n",
		} {
			id := e.commit(l, "--parent", "main")
			e.ok("", "land", id, "--onto", "main")
		}
	}
	// expectOthersKept checks main for the other agents' work.
	expectOthersKept := func() {
		GinkgoHelper()
		Expect(e.run("", "cat", "main:one.txt").Stdout).To(Equal("one by agent-1\n"))
		Expect(e.run("", "cat", "main:two.txt").Stdout).To(Equal("two by agent-2\n"))
		Expect(e.run("", "cat", "main:old.txt", "--json").Err()["code"]).To(Equal("E_NOT_FOUND"), "old.txt, deleted by agent-3's peer, is back")
	}

	// landKept lands agent/3 on main: every other agent's change is kept,
	// and the shared registry reads reg.
	landKept := func(reg string) {
		GinkgoHelper()
		e.ok("", "land", "agent/3", "--onto", "main")
		expectOthersKept()
		Expect(e.run("", "cat", "main:reg.txt").Stdout).To(Equal(reg))
	}
	// writeReg writes the work tree's copy of the shared registry.
	writeReg := func(reg string) {
		GinkgoHelper()
		Expect(os.WriteFile(filepath.Join(wt, "reg.txt"), []byte(reg), 0o644)).To(Succeed())
	}

	BeforeEach(func() {
		e = newStoreEnv()
		e.commit("put one.txt = \"one\\n\"\nput old.txt = \"old\\n\"\nput reg.txt = \"slot 1: free\\n--\\nslot 3: free\\n--\\nslot 5: free\\n\"\n",
			"--advance", "main", "-m", "base")
		e.ok("", "ref", "create", "agent/3", "main")
		wt = filepath.Join(e.root, "wt")
		e.ok("", "checkout", "agent/3", wt)
	})

	It("a merge recorded with --parent agent/3 --parent main keeps every other agent's landed change", func() {
		Expect(os.WriteFile(filepath.Join(wt, "three.txt"), []byte("three\n"), 0o644)).To(Succeed())
		writeReg("slot 1: free\n--\nslot 3: free\n--\nslot 5: agent-3\n")
		e.ok("", "commit", "--dir", wt, "--advance", "agent/3", "-m", "agent-3's work")
		others()

		e.ok("", "commit", "--dir", wt, "--parent", "agent/3", "--parent", "main", "--advance", "agent/3", "-m", "merge")
		landKept("slot 1: agent-1\n--\nslot 3: free\n--\nslot 5: agent-3\n")
		Expect(e.run("", "cat", "main:three.txt").Stdout).To(Equal("three\n"))
		// The work tree holds what the merge brought, and is clean at it.
		Expect(os.ReadFile(filepath.Join(wt, "two.txt"))).To(Equal([]byte("two by agent-2\n")))
		Expect(filepath.Join(wt, "old.txt")).NotTo(BeAnExistingFile())
		st := e.ok("", "status", wt).(map[string]any)
		Expect(st["clean"]).To(BeTrue(), "status after the merge commit: %v", st)
	})

	It("a merge that conflicts is E_CONFLICT with hunks, and a resolution in the work tree wins only where it was made", func() {
		writeReg("slot 1: agent-3\n--\nslot 3: free\n--\nslot 5: free\n")
		e.ok("", "commit", "--dir", wt, "--advance", "agent/3", "-m", "agent-3's work")
		others()
		land := e.run("", "land", "agent/3", "--onto", "main", "--json").Err()
		Expect(land["code"]).To(Equal("E_CONFLICT"))
		Expect(land["paths"]).To(Equal([]any{"reg.txt"}))
		Expect(land["hunks"]).To(HaveKeyWithValue("reg.txt", ConsistOf(SatisfyAll(
			HaveKeyWithValue("base", HaveKeyWithValue("lines", []any{"slot 1: free"})),
			HaveKeyWithValue("ours", HaveKeyWithValue("lines", []any{"slot 1: agent-1"})),
			HaveKeyWithValue("theirs", HaveKeyWithValue("lines", []any{"slot 1: agent-3"})),
		))))

		// Without a resolution the merge commit is refused the same way.
		er := e.run("", "commit", "--dir", wt, "--parent", "agent/3", "--parent", "main", "--advance", "agent/3", "--allow-empty", "--json").Err()
		Expect(er["code"]).To(Equal("E_CONFLICT"))
		Expect(er["paths"]).To(Equal([]any{"reg.txt"}))

		writeReg("slot 1: agent-1 and agent-3\n--\nslot 3: free\n--\nslot 5: free\n")
		e.ok("", "commit", "--dir", wt, "--parent", "agent/3", "--parent", "main", "--advance", "agent/3", "-m", "merge")
		landKept("slot 1: agent-1 and agent-3\n--\nslot 3: free\n--\nslot 5: free\n")
	})

	It("a work tree checked out several lands ago cannot commit onto main, and its own commit lands without reverting anything", func() {
		writeReg("slot 1: free\n--\nslot 3: agent-3\n--\nslot 5: free\n")
		others()
		before := e.ok("", "ref", "get", "main")
		er := e.run("", "commit", "--dir", wt, "--parent", "main", "--advance", "main", "--json").Err()
		Expect(er["code"]).To(Equal("E_STALE"))
		Expect(e.ok("", "ref", "get", "main")).To(Equal(before))

		// With main as a second parent, the stale files lose.
		e.ok("", "commit", "--dir", wt, "--parent", "agent/3", "--parent", "main", "--advance", "agent/3", "-m", "mine, merged with main")
		// The work tree holds the file merged by lines, and is clean.
		Expect(os.ReadFile(filepath.Join(wt, "reg.txt"))).To(Equal([]byte("slot 1: agent-1\n--\nslot 3: agent-3\n--\nslot 5: free\n")))
		Expect(e.ok("", "status", wt).(map[string]any)["clean"]).To(BeTrue())
		landKept("slot 1: agent-1\n--\nslot 3: agent-3\n--\nslot 5: free\n")
	})

	It("a stale work tree's plain commit on its base lands by a line merge that keeps everything", func() {
		writeReg("slot 1: free\n--\nslot 3: free\n--\nslot 5: agent-3\n")
		others()
		e.ok("", "commit", "--dir", wt, "--advance", "agent/3", "-m", "mine")
		landKept("slot 1: agent-1\n--\nslot 3: free\n--\nslot 5: agent-3\n")
	})

	It("a change-list commit with a second parent carries that parent's work, and more than two parents is E_USAGE", func() {
		others()
		id := e.commit("put three.txt = \"three\\n\"\n", "--parent", "agent/3", "--parent", "main")
		e.ok("", "ref", "set", "agent/3", id, "--expect", e.ok("", "ref", "get", "agent/3").(map[string]any)["id"].(string))
		e.ok("", "land", "agent/3", "--onto", "main")
		expectOthersKept()
		er := e.run("put x = \"x\\n\"\n", "commit", "-F", "-", "--parent", "main", "--parent", "main~1", "--parent", "main~2", "--json").Err()
		Expect(er["code"]).To(Equal("E_USAGE"))
	})
})
